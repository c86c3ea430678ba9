"""Live collection for ``gpuutil.profile()``: CUPTI activity records and NVTX ranges.

Its collector factories are built-in ones (gpuutil._builtin_collectors). The CUPTI
collector starts the C++ CUPTI collector (``gpuutil._core.LiveCollector``),
which loads libcupti at run time. When it cannot run (no driver or GPU, a
CUPTI version mismatch, another CUPTI client such as torch.profiler or
Nsight Systems, insufficient privileges, no libcupti), ``start`` returns the
reason and every step report carries it as the ``gpu_collection_off``
diagnostic; the session continues host-only.

The nvidia-cuda-cupti wheel directories are found here, on ``sys.path``, and
passed to C++ as candidates (C++ first reuses a libcupti already loaded, for
example by torch; ``GPUUTIL_CUPTI_LIBRARY`` overrides everything).
Set ``GPUUTIL_CUPTI=off`` to skip GPU collection.

NVTX: ``import gpuutil`` points ``NVTX_INJECTION64_PATH`` at the packaged
``libgpuutil_nvtx.so`` unless another tool (Nsight Systems) already set it
(gpuutil._nvtx_env); NVTX reads the variable on each binary's first NVTX
call, so ``import gpuutil`` must come before the first ``torch.cuda.nvtx``
call. The NVTX collector never turns GPU collection off: when it cannot run, each
report carries the ``nvtx_collection_off`` diagnostic with the reason.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, List, Optional

from gpuutil import _core
from gpuutil._nvtx_env import NVTX_LIBRARY, claim_nvtx_injection

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._collectors import CollectorHandle

claim_nvtx_injection()  # also done by `import gpuutil`; here for direct imports

#: Where the CUPTI wheels put libcupti, relative to a sys.path entry.
_WHEEL_LIB_DIRS = ("nvidia/cu13/lib", "nvidia/cuda_cupti/lib")


def cupti_wheel_dirs() -> List[str]:
    """Directories of installed CUPTI wheels that hold libcupti.

    Only absolute sys.path entries are searched: never the current
    directory (``python -c`` and the REPL put ``""`` first on sys.path), so
    a ``./nvidia/cu13/lib/libcupti.so.13`` in the working directory is never
    loaded into the process."""
    found = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry):
            continue
        for rel in _WHEEL_LIB_DIRS:
            d = os.path.join(entry, rel)
            if os.path.isdir(d) and d not in found:
                found.append(d)
    return found


class CuptiCollector:
    """The Collector protocol (gpuutil._collectors.Collector) over CUPTI.

    Step reports wait for the GPU: a step is reported once every launch
    made before its end has its device record (``complete_until_ns``). The
    wait is never cut by wall time: while the device progresses it costs
    report latency only (the training thread never blocks on it). Past
    ``max_held_steps`` steps waiting (or a memory bound) the oldest steps
    are reported with ``complete: false`` (``cupti_step_incomplete``),
    never as idle; a launch with no device record arriving for
    ``stuck_after_ms`` is named (``gpu_stuck``); a launch the device
    finished (a sync, later work on its stream) whose record has not come
    ``missing_after_ms`` later is no longer waited for
    (``cupti_record_missing``). ``completion_wait_ms`` bounds only the
    blocking waits (``prof.flush()``, stop).
    With torch loaded, torch.profiler gets CUPTI while it runs
    (gpuutil.torch._profiler_guard) and the steps in between say so; when
    the program imports torch only after the profile started, the guard is
    installed right after that import (gpuutil._import_hook).
    """

    name = "cupti"
    collects_gpu = True
    completion_wait_ms = 2000
    max_held_steps = 1000
    stuck_after_ms = 30000
    missing_after_ms = 10000

    def __init__(self, prof: "CollectorHandle") -> None:
        self._live = _core.LiveCollector(
            prof.session,
            library_dirs=cupti_wheel_dirs(),
            completion_wait_ms=self.completion_wait_ms,
            max_held_steps=self.max_held_steps,
            stuck_after_ms=self.stuck_after_ms,
            missing_after_ms=self.missing_after_ms,
        )
        self._complete_until: Optional[int] = None
        # suspend, resume, step_boundary and stop are serialised here: the
        # guard may suspend or resume from the thread a torch.profiler runs
        # on while the training thread reaches a step boundary. Only
        # suspend waits under it (bounded by completion_wait_ms, for the
        # records of work already launched, before CUPTI is handed over), so
        # a step boundary can wait only while another profiler starts.
        self._control = threading.Lock()
        self._guard: Any = None
        self._torch_hook: Any = None  # installs the guard once the program imports torch
        self._released = False  # the subscription was let go around torch's import
        self._last_boundary_ns: Optional[int] = None

    def start(self, prof: "CollectorHandle") -> Optional[str]:
        if os.environ.get("GPUUTIL_CUPTI", "").lower() in ("0", "off", "false", "no"):
            return "CUPTI: disabled by GPUUTIL_CUPTI=off"
        suspended_why = ""
        guard = None
        if "torch" in sys.modules:
            from gpuutil.torch import _profiler_guard

            guard = _profiler_guard.ProfilerGuard(self._suspend, self._resume)
            # A profiler already on: gpuutil waits only for one that takes CUPTI.
            suspended_why = guard.adopt_running()
        why = self._live.start(suspended_why)
        if why:
            return why
        self._last_boundary_ns = _core.now_ns()
        if guard is not None:
            self._guard = guard
            guard.suspended_for = suspended_why or None
            guard.install()
        else:
            from gpuutil._import_hook import after_import

            # Kineto may subscribe to CUPTI while torch imports
            # (libkineto_init with KINETO_USE_DAEMON, before its lazy
            # subscription): a subscription gpuutil held then would leave
            # torch.profiler CPU-only for the rest of the process. gpuutil
            # lets go of it around the import and asks for it again after.
            self._torch_hook = after_import("torch", self._install_guard_late, before=self._release_subscription)
        return None

    def _release_subscription(self) -> None:
        with self._control:
            self._live.release_subscription()
            self._released = True

    def _install_guard_late(self) -> None:
        """torch was imported after the profile started (on the importing
        thread): nothing of it can be running yet."""
        with self._control:
            if self._released:
                self._released = False
                self._live.take_subscription()  # "": back; else learnt from records, asked again at boundaries
        from gpuutil.torch import _profiler_guard

        guard = _profiler_guard.ProfilerGuard(self._suspend, self._resume)
        guard.install()
        self._guard = guard

    def _suspend(self, why: str, since_ns: Optional[int] = None) -> None:
        with self._control:
            self._live.suspend(why, since_ns)

    def _resume(self) -> str:
        with self._control:
            return self._live.resume()

    def on_step_end(self, prof: "CollectorHandle") -> None:
        now = _core.now_ns()
        if self._guard is not None:
            self._guard.on_step_boundary(self._last_boundary_ns)
        self._last_boundary_ns = now
        with self._control:
            self._complete_until = self._live.step_boundary(now)

    def complete_until_ns(self) -> Optional[int]:
        return self._complete_until

    def wait_complete(self, t_ns: int) -> Optional[int]:
        """Blocks until every launch before ``t_ns`` has its device record (bounded)."""
        # Not under the control lock: this waits (bounded) on a report
        # thread, and the training thread's step boundary must never wait
        # for it (the C++ wait is safe beside step_boundary).
        self._complete_until = self._live.wait_complete(t_ns, self.completion_wait_ms)
        return self._complete_until

    def stop(self, prof: "CollectorHandle") -> None:
        if self._torch_hook is not None:
            self._torch_hook.remove()
            self._torch_hook = None
        if self._guard is not None:
            self._guard.uninstall()
        if "torch" in sys.modules:
            # CUPTI's forced flush at stop does not synchronise: finish the
            # devices' work first so nothing arrives unfinished.
            from gpuutil.torch import _profiler_guard

            _profiler_guard.synchronize_used_devices()
        with self._control:
            self._live.stop()
        self._complete_until = None

    def counters(self) -> dict:
        return self._live.counters()

    def learnt_calls(self) -> dict:
        """Calls learnt at API exit by CUPTI callback name (after stop)."""
        return self._live.learnt_calls()


class NvtxCollector:
    """The Collector protocol over gpuutil's NVTX injection (host ranges)."""

    name = "nvtx"
    per_step = False  # drained before each report batch (its own thread keeps the rings from overflowing)
    collects_gpu = False

    def __init__(self, prof: "CollectorHandle") -> None:
        self._live = _core.LiveCollector(prof.session, gpu=False, nvtx=True, nvtx_library=NVTX_LIBRARY)

    def start(self, prof: "CollectorHandle") -> Optional[str]:
        self._live.start()  # never fails the profile: the reason is nvtx_off, counted per step
        return None

    @property
    def off_reason(self) -> str:
        return self._live.nvtx_off

    def on_step_end(self, prof: "CollectorHandle") -> None:
        pass  # the drain thread keeps the rings from overflowing between reports

    def before_report(self, prof: "CollectorHandle") -> None:
        # Every range recorded so far reaches the session before it analyses.
        self._live.step_boundary(_core.now_ns())

    def complete_until_ns(self) -> Optional[int]:
        return None

    def stop(self, prof: "CollectorHandle") -> None:
        self._live.stop()

    def counters(self) -> dict:
        return self._live.counters()


def _factory(prof: "CollectorHandle") -> Optional[CuptiCollector]:
    return CuptiCollector(prof)


def _nvtx_factory(prof: "CollectorHandle") -> Optional[NvtxCollector]:
    return NvtxCollector(prof)

