"""Hands CUPTI to torch.profiler while it runs, and takes it back after.

CUPTI has one set of activity-buffer callbacks per process: when
torch.profiler (Kineto) starts it registers its own, silently replacing
gpuutil's, and buffers gpuutil had handed to CUPTI would then be completed
to Kineto, which rejects them; when it stops it disables the same activity
kinds gpuutil enabled. So gpuutil steps aside:

* before a profiler that traces CUDA prepares its trace
  (``torch.autograd.profiler.profile._prepare_trace``, used by
  ``torch.profiler.profile`` and the legacy ``with profile(use_cuda=True)``),
  gpuutil synchronises the devices, waits for its records, disables its
  kinds, force-flushes every buffer back and restores CUPTI's clock;
* after that profiler's ``__exit__`` (which disabled Kineto's kinds and
  flushed its buffers) gpuutil takes CUPTI back. The patches are on the
  class, so a profiler entered on any thread is seen; until the last one
  seen entering has exited, a step boundary never takes CUPTI back (the
  profiler state it reads is thread-local and does not show a profiler
  on another thread);
* a profiler started some other way is caught at the next step boundary
  (``torch._C._autograd._profiler_enabled()``), later and so with a gap;
  that client already set its kinds, per-id API enables, clock and
  callbacks, so gpuutil touches none of them and only marks the steps
  (``suspend(why, since_ns)``). A client no Python entry point shows
  (Kineto's on-demand tracing through dynolog, a profiler started from
  C++ on another thread) is detected in C++ (``cupti_taken_over``,
  docs/live-collection.md);
* torch's experimental CUPTI monitor (``torch.profiler._cupti_monitor``,
  torch >= 2.13; also what ``torch.profiler.profile`` uses with
  ``experimental_config`` backend ``cupti_monitor``, which passes
  ``use_device=None`` so the profiler itself looks CPU-only) registers its
  own buffer callbacks and clock: there is one set per process, so gpuutil
  steps aside while it runs (``CuptiMonitor.start``/``stop``), and starts
  suspended when one is already collecting. With an always-on monitor,
  gpuutil collects no GPU activity, and every step says so.

A profiler that does not use CUPTI leaves gpuutil alone: a CPU-only
torch.profiler (no ``ProfilerActivity.CUDA``, or no CUDA device), the
NVTX/ITT emitters (``emit_nvtx``, ``emit_itt``) and the legacy profiler
(``running_profiler_traces_gpu``). One already running when gpuutil starts
is found among the live ``torch.autograd.profiler.profile`` objects; when
none can be found (a profiler started from C++ or by a daemon) gpuutil
assumes the worst and steps aside.

Every step report overlapping the suspension carries the
``gpu_collection_suspended`` diagnostic with the reason. The patches are
control-path only (profiler start and stop) and are undone exactly by
``uninstall()``.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, List, Optional

import torch

MONITOR_WHY = ("torch's CUPTI monitor (torch.profiler._cupti_monitor) started; it registers its own CUPTI "
               "callbacks, so gpuutil handed CUPTI over until it stops")
MONITOR_RUNNING_WHY = ("torch's CUPTI monitor (torch.profiler._cupti_monitor) was collecting when gpuutil started; "
                       "GPU collection waits until it stops")


def cupti_monitor_module() -> Any:
    """``torch.profiler._cupti_monitor`` (torch >= 2.13), or None."""
    mod = sys.modules.get("torch.profiler._cupti_monitor")
    if mod is not None:
        return mod
    try:
        import torch.profiler._cupti_monitor as mod  # noqa: F811 - light: ctypes and json, no CUPTI yet
    except Exception:  # noqa: BLE001 - an older torch without it
        return None
    return mod


def cupti_monitor_running() -> bool:
    """Whether torch's CUPTI monitor is collecting now (it holds CUPTI)."""
    mod = sys.modules.get("torch.profiler._cupti_monitor")
    get = getattr(mod, "get_monitor", None)
    try:
        monitor = get() if get is not None else None
    except Exception:  # noqa: BLE001 - another torch's private API
        return False
    return monitor is not None and bool(getattr(monitor, "_started", True))


def profiler_enabled() -> bool:
    """Whether the autograd profiler (Kineto, torch.profiler) is on now."""
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except Exception:  # noqa: BLE001 - an older/newer torch without it
        return False


def traces_gpu(prof: Any) -> bool:
    """Whether a torch.autograd.profiler.profile asks Kineto for CUDA activity
    (which it gets only where torch sees a CUDA device)."""
    activities = getattr(prof, "kineto_activities", None) or ()
    cuda = getattr(torch.profiler.ProfilerActivity, "CUDA", None)
    asks = (cuda is not None and cuda in activities) or getattr(prof, "use_device", None) == "cuda"
    return asks and _cuda_available()


def _cuda_available() -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA set-up traces nothing either
        return False


def running_profilers() -> List[Any]:
    """The ``torch.autograd.profiler.profile`` objects that are entered now
    (``torch.profiler.profile`` holds one). A scan of the objects that refer
    to the class (tens of ms in a large process): called only when a
    profiler is found running and not yet accounted for."""
    import gc

    cls = torch.autograd.profiler.profile
    try:
        found = gc.get_referrers(cls)
    except Exception:  # noqa: BLE001 - an interpreter without it
        return []
    return [o for o in found if issubclass(type(o), cls) and getattr(o, "entered", False)]


def running_profiler_traces_gpu() -> Optional[bool]:
    """Whether the autograd profiler on now takes CUPTI: False for the
    NVTX/ITT emitters, the legacy profiler and a Kineto profiler without
    CUDA activity (or without a CUDA device); True when a running one
    traces CUDA; None when it cannot be told (a Kineto client started
    outside Python)."""
    try:
        kind = torch._C._autograd._profiler_type()
        types = torch._C._profiler.ActiveProfilerType
    except Exception:  # noqa: BLE001 - an older/newer torch without them
        return None
    if kind == types.NONE:
        return None  # on, yet no type: cannot be told
    if kind != types.KINETO:
        return False  # LEGACY (CUDA events), NVTX, ITT, PRIVATEUSE1: no CUPTI
    found = running_profilers()
    if not found:
        return None
    return any(traces_gpu(p) for p in found)


def synchronize_used_devices() -> None:
    """Waits for the work of every CUDA device this process initialised."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    for d in range(torch.cuda.device_count()):
        try:
            if torch.cuda.memory_reserved(d) > 0 or d == torch.cuda.current_device():
                torch.cuda.synchronize(d)
        except Exception:  # noqa: BLE001 - a device that cannot sync is not ours to fix
            pass


class ProfilerGuard:
    """Calls ``suspend(why)`` before a GPU-tracing torch profiler starts and
    ``resume()`` after it stops."""

    def __init__(self, suspend: Callable[..., None], resume: Callable[[], str]) -> None:
        """``suspend(why, since_ns=None)``; ``resume()`` returns "" or why
        CUPTI could not be taken back (then it is retried at the next step
        boundary)."""
        self._suspend = suspend
        self._resume = resume
        self._undo: List[Callable[[], None]] = []
        #: Why collection is suspended by this guard now (None: it is not).
        self.suspended_for: Optional[str] = None
        self._cpu_only_profilers = 0  # running profilers known not to trace CUDA
        # A profiler found running (no patched entry point saw it start) that
        # does not take CUPTI: not looked at again until it stops.
        self._found_cpu_only = False
        # torch's CUPTI monitor holds CUPTI: only its stop gives it back.
        self._held_by_monitor = False
        # GPU-tracing profilers seen entering through the patched
        # ``_prepare_trace`` and not yet exited, on any thread: only their
        # ``__exit__`` gives CUPTI back (the thread-local profiler state a
        # step boundary reads does not show one on another thread).
        self._entered_gpu_profilers = 0

    def adopt_running(self) -> str:
        """At gpuutil's start, with a profiler already on: "" when it leaves
        CUPTI to gpuutil (CPU-only, NVTX/ITT, legacy; counted, so that the
        step boundaries do not suspend for it), else why gpuutil waits."""
        if cupti_monitor_running():
            self._held_by_monitor = True
            return MONITOR_RUNNING_WHY
        if not profiler_enabled():
            return ""
        if running_profiler_traces_gpu() is False:
            self._note_cpu_only_running()
            return ""
        return "torch.profiler was running when gpuutil started; GPU collection waits until it stops"

    def _note_cpu_only_running(self) -> None:
        for p in running_profilers():
            if not getattr(p, "_gpuutil_cpu_only", False):
                p._gpuutil_cpu_only = True
                self._cpu_only_profilers += 1
        self._found_cpu_only = True

    def install(self) -> None:
        cls = torch.autograd.profiler.profile
        if not hasattr(cls, "_prepare_trace") or not hasattr(cls, "__exit__"):
            return  # caught at step boundaries instead
        guard = self
        prepare = cls.__dict__["_prepare_trace"]
        leave = cls.__dict__["__exit__"]

        def _prepare_trace(prof: Any, *args: Any, **kwargs: Any) -> Any:
            if not traces_gpu(prof):
                if not getattr(prof, "_gpuutil_cpu_only", False):
                    guard._cpu_only_profilers += 1
                    prof._gpuutil_cpu_only = True
            else:
                if not getattr(prof, "_gpuutil_gpu", False):
                    prof._gpuutil_gpu = True
                    guard._entered_gpu_profilers += 1
                if guard.suspended_for is None:
                    guard._enter("torch.profiler started (CUDA activity); gpuutil handed CUPTI over until it stops")
            return prepare(prof, *args, **kwargs)

        def __exit__(prof: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return leave(prof, *args, **kwargs)
            finally:
                if getattr(prof, "_gpuutil_cpu_only", False):
                    prof._gpuutil_cpu_only = False
                    guard._cpu_only_profilers = max(0, guard._cpu_only_profilers - 1)
                else:
                    if getattr(prof, "_gpuutil_gpu", False):
                        prof._gpuutil_gpu = False
                        guard._entered_gpu_profilers = max(0, guard._entered_gpu_profilers - 1)
                    if (guard.suspended_for is not None and guard._entered_gpu_profilers == 0
                            and not profiler_enabled() and not guard._held_by_monitor):
                        guard._leave()

        cls._prepare_trace = _prepare_trace
        cls.__exit__ = __exit__

        def undo() -> None:
            cls._prepare_trace = prepare
            cls.__exit__ = leave

        self._undo.append(undo)
        self._install_monitor_patch()

    def _install_monitor_patch(self) -> None:
        """Steps aside while torch's CUPTI monitor runs (see the module docstring)."""
        mod = cupti_monitor_module()
        mcls = getattr(mod, "CuptiMonitor", None)
        if mcls is None or "start" not in mcls.__dict__ or "stop" not in mcls.__dict__:
            return
        guard = self
        mstart, mstop = mcls.__dict__["start"], mcls.__dict__["stop"]

        def start(monitor: Any, *args: Any, **kwargs: Any) -> Any:
            guard._monitor_starts()
            try:
                return mstart(monitor, *args, **kwargs)
            except BaseException:
                guard._monitor_stopped()
                raise

        def stop(monitor: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return mstop(monitor, *args, **kwargs)
            finally:
                guard._monitor_stopped()

        mcls.start, mcls.stop = start, stop

        def undo() -> None:
            mcls.start, mcls.stop = mstart, mstop

        self._undo.append(undo)

    def _monitor_starts(self) -> None:
        self._held_by_monitor = True
        if self.suspended_for is None:
            self._enter(MONITOR_WHY)

    def _monitor_stopped(self) -> None:
        if not self._held_by_monitor:
            return
        self._held_by_monitor = False
        if self.suspended_for is not None and not profiler_enabled() and self._entered_gpu_profilers == 0:
            self._leave()

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def on_step_boundary(self, step_start_ns: Optional[int] = None) -> None:
        """Catches a profiler started or stopped without the patched entry
        points. Found running, it may have started any time in the step that
        began at ``step_start_ns``: that step is marked too."""
        enabled = profiler_enabled()
        if not enabled:
            self._found_cpu_only = False
        if enabled and self.suspended_for is None and self._cpu_only_profilers == 0 and not self._found_cpu_only:
            if running_profiler_traces_gpu() is False:
                self._note_cpu_only_running()
                return
            self._enter("torch.profiler (or another Kineto client) was found running at a step boundary; "
                        "GPU records from when it started are missing", step_start_ns)
        elif (not enabled and self.suspended_for is not None and not self._held_by_monitor
              and self._entered_gpu_profilers == 0):
            self._leave()

    def _enter(self, why: str, since_ns: Optional[int] = None) -> None:
        synchronize_used_devices()
        self._suspend(why, since_ns)
        self.suspended_for = why

    def _leave(self) -> None:
        why = self._resume()
        self.suspended_for = f"could not take CUPTI back: {why}" if why else None
