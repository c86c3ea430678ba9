"""The PyTorch collector: attaches PyTorch's ranges and optimizer-step
boundaries to a ``gpuutil.Profile`` through the Collector protocol.

Two sources of ranges, chosen at start:

* the LibTorch hook (``_ext``, a RecordFunction observer built against the
  installed torch) when a build for this torch exists: on detail steps
  DataLoader waits, zero_grad, user ranges, ``aten::item``/
  ``aten::_local_scalar_dense``, c10d ops and (with CUDA) autograd nodes on
  every thread (under multi-rank torch.distributed with gloo, USER_SCOPE ranges on
  every step), drained from its per-thread rings straight into the
  session, in C++ (``_core.TorchHookDrain`` over the hook's C interface,
  ``csrc/hook_abi.h``); Python wrappers time the always-on tier's
  DataLoader waits, zero_grad, ``.item()`` and collectives on the other
  steps;
* otherwise Python-level hooks for the same things (``_fallback``), and the
  ``torch_hook_fallback`` diagnostic in every report saying why.

In both modes the optimizer step is timed by optimizer step pre/post hooks
(they also end automatic steps: PyTorch's own ``Optimizer.step#`` range
closes after the post-hooks run, too late for a boundary), backward by a
``torch.autograd.backward`` wrapper and forward by module hooks on the
outermost modules (``_fallback``: found by global hooks during the first
step, then hooks on those modules only).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Optional

from gpuutil import _core
from gpuutil._detail import DetailSchedule

_now_ns = _core.now_ns
from gpuutil.torch import _ext
from gpuutil.torch._fallback import PythonHooks
from gpuutil.torch._flops_measure import FlopsMeasurement
from gpuutil.torch._loader import LoaderSettingsWatch

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._collectors import CollectorHandle


class TorchCollector:
    """Collector protocol implementation for PyTorch (host ranges, auto steps)."""

    name = "torch"
    collects_gpu = False
    measures_flops = True  # flops_per_step="measure" (see _flops_measure)

    def __init__(
        self,
        prof: "CollectorHandle",
        *,
        forward_hooks: bool = True,
        function_scope: Optional[bool] = None,
        autograd_nodes: Optional[bool] = None,
    ) -> None:
        """The detail tier (on the steps ``prof.detail`` chooses; gpuutil._detail):

        ``function_scope``: observe FUNCTION-scope ops (every aten op pays
        for a RecordFunction then) to catch c10d ops and ``.item()`` from
        C++. Default: on. On the other steps ``Tensor.item`` and the
        ``torch.distributed`` collectives are timed by Python wrappers
        (which cost only when called).

        ``autograd_nodes``: observe every autograd node (BACKWARD_FUNCTION
        scope; ≈ 1 µs per node for PyTorch to build its RecordFunction).
        They give backward time on the threads the autograd engine runs
        nodes on, which with CUDA are its device threads; on CPU backward
        runs on the calling thread, where the ``torch.autograd.backward``
        wrapper already times it. Default: on when CUDA is available."""
        import torch

        self._prof = prof
        self._forward_hooks = forward_hooks
        self._function_scope = True if function_scope is None else function_scope
        self._cuda = torch.cuda.is_available()
        self._autograd_nodes = self._cuda if autograd_nodes is None else autograd_nodes
        self._schedule = DetailSchedule(getattr(prof, "detail", "sampled"))
        self._detail_flag = [False]  # shared with the Python hooks: the detail tier is on
        self._findings_seen = 0
        self._dist = dist_module_if_initialised
        self._ext: Any = None
        self._drainer: Any = None
        #: The hook's USER_SCOPE callback runs at every step (multi-rank gloo).
        self.user_scope_always = False
        self._hooks: Optional[PythonHooks] = None
        self._flops: Optional[FlopsMeasurement] = None
        #: The live DataLoaders' settings, for the dataloader findings (_loader).
        self.loaders: Optional[LoaderSettingsWatch] = None
        self._devices_set = False  # device facts given to the session (once CUDA is initialised)
        #: "libtorch" (RecordFunction observer) or "python" (fallback hooks).
        self.mode = ""

    def start(self, prof: "CollectorHandle") -> Optional[str]:
        self._ext, reason = _ext.load(build=False)
        if self._ext is not None:
            self.mode = "libtorch"
            always = self._schedule.mode == "always"
            # PyTorch's USER_SCOPE ranges on every step only where they are
            # needed on every step: gloo's "gloo:*" collective executions,
            # which are the cross-rank view's collective instances on CPU
            # (several ranks, cluster view on). Elsewhere USER_SCOPE is part
            # of the detail tier (a registered RecordFunction callback costs
            # every step; record_function_hook.cpp) and Python wrappers time
            # DataLoader waits and zero_grad.
            self.user_scope_always = gloo_ranks_to_compare(prof)
            self._hooks = PythonHooks(
                prof,
                forward_hooks=self._forward_hooks,
                python_ranges=False,
                item_hook=not (always and self._function_scope),
                collectives_hook=not (always and self._function_scope),
                loader_hooks=not (always or self.user_scope_always),
                detail_flag=self._detail_flag,
            )
            self._ext.drain()  # discard anything from an earlier session
            self._drainer = _core.TorchHookDrain(prof.session, self._ext.api())
            self._ext.start(self._function_scope, self._autograd_nodes, False, self.user_scope_always)
            self._set_detail(prof, self._schedule.wants(0))
        else:
            self.mode = "python"
            self._hooks = PythonHooks(prof, forward_hooks=self._forward_hooks, python_ranges=True)
            prof.step_diagnostics.append(("torch_hook_fallback", f"LibTorch hook {reason}; using Python-level hooks"))
        self._hooks.install()
        self.loaders = LoaderSettingsWatch(prof.session)
        self.loaders.install()
        if getattr(prof, "flops_mode", None) == "measure":
            self._flops = FlopsMeasurement(prof)
        return None

    def _drain(self) -> None:
        if self._drainer is not None:
            self._drainer.drain()

    def _set_detail(self, prof: "CollectorHandle", want: bool) -> None:
        """Switches the hook's detail tier (at a step boundary) and tells the session."""
        on = bool(self._ext.set_detail(want))
        self._detail_flag[0] = on
        prof.session.set_detail(_now_ns(), on)

    def on_step_end(self, prof: "CollectorHandle") -> None:
        """At the step boundaries steps_until_due() asks for (and whenever
        a report batch is due): the detail tier for the next step, forward
        discovery, FLOPs measurement while it runs, and with CUDA the
        allocator sample. The rings are drained before each report batch
        (before_report), and after each detail step (its per-op ranges
        fill them faster)."""
        index = prof.path.boundaries  # the step starting now (1 at the first boundary)
        if self._ext is not None:
            if self._detail_flag[0]:
                self._drain()
            want = self._schedule.wants(index)
            if want != self._detail_flag[0]:
                self._set_detail(prof, want)
        if self._hooks is not None:
            self._hooks.on_step_end(index)
        if self._flops is not None:
            self._flops.on_step_end()
        if self._cuda:
            self._sample_allocator(prof)
            if not self._devices_set:
                self._devices_set = set_device_info(prof.session)

    def steps_until_due(self, prof: "CollectorHandle") -> int:
        """How many boundaries from now on_step_end must next run at: every
        one with CUDA (the allocator sample), while FLOPs are measured and
        while the detail tier is on; else at the next detail step or forward
        rediscovery, whichever comes first."""
        if self._cuda or self._detail_flag[0] or (self._flops is not None and not self._flops.done):
            return 1
        index = prof.path.boundaries
        k = self._hooks.steps_until_due(index) if self._hooks is not None else 1 << 40
        if self._ext is not None:
            k = min(k, self._schedule.steps_until_wanted(index))
        return k

    def before_report(self, prof: "CollectorHandle") -> None:
        """Before each report batch: the hook's rings into the session (they
        hold 4,096 ranges per thread; a batch spans report_interval_ms).
        A multi-rank gloo job that came up after the profile started turns
        USER_SCOPE always on from here (its "gloo:*" ranges)."""
        self._drain()
        if self._ext is not None and not self.user_scope_always and gloo_ranks_to_compare(prof):
            self.user_scope_always = True
            if self._hooks is not None:
                self._hooks.loader_off[0] = True
            self._ext.set_user_scope_always(True)

    def after_report(self, prof: "CollectorHandle", final: bool = False) -> None:
        """A finding that fired for the first time asks for a detail step
        (culprits for it)."""
        seen = prof.session.findings_seen
        if seen > self._findings_seen:
            self._findings_seen = seen
            self._schedule.request()

    def _sample_allocator(self, prof: "CollectorHandle") -> None:
        """PyTorch's caching allocator per CUDA device, once per step end, as
        counters (each step's health: allocated, reserved, peak allocated)."""
        if not self._cuda:
            return
        stats = allocator_stats()
        if not stats:
            return
        now = _core.now_ns()
        session = prof.session
        for device, allocated, reserved, peak in stats:
            session.add_counter("torch_allocated_bytes", now, device, allocated)
            session.add_counter("torch_reserved_bytes", now, device, reserved)
            session.add_counter("torch_peak_allocated_bytes", now, device, peak)

    def complete_until_ns(self) -> Optional[int]:
        """Under torch.distributed, gloo's worker threads record each
        collective ("gloo:*") a moment after the training thread was
        released from it, so a step's data is complete only at the next
        boundary: reports lag one step."""
        if self._dist() is None:
            return None
        return int(self._prof.path.prev_boundary_ns)

    def wait_complete(self, t_ns: int) -> Optional[int]:
        """flush(): everything recorded by now is drained."""
        self._drain()
        return None

    def stop(self, prof: "CollectorHandle") -> None:
        if self._flops is not None:
            self._flops.stop()
        if self._ext is not None:
            if self._dist() is not None:
                time.sleep(0.002)  # gloo's last "gloo:*" record (see complete_until_ns)
            self._ext.stop()
            self._drain()
        if self._hooks is not None:
            self._hooks.uninstall()
        if self.loaders is not None:
            self.loaders.uninstall()


def gloo_ranks_to_compare(prof: Any) -> bool:
    """The cross-rank view needs gloo's collective ranges at every step:
    torch.distributed is initialised with a gloo backend (possibly beside
    NCCL) and more than one rank, and the profile's cluster view is on."""
    dist = dist_module_if_initialised()
    if dist is None or not getattr(prof, "cluster_options", {}).get("enabled", True):
        return False
    try:
        return "gloo" in str(dist.get_backend()).lower() and dist.get_world_size() > 1
    except Exception:  # noqa: BLE001 - an unusual process group: keep USER_SCOPE on, as before
        return True


def dist_module_if_initialised() -> Any:
    """torch.distributed when it is initialised, else None (cheap: called at
    every step boundary)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def set_device_info(session: Any) -> bool:
    """Gives the session each CUDA device's facts from torch (name for MFU's
    peak, SM count and limits for the SM efficiency and occupancy
    estimates), once torch has initialised CUDA. Returns whether it did."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    devices = []
    for d in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(d)
        devices.append(
            {
                "id": d,
                "name": p.name,
                "compute_major": int(p.major),
                "compute_minor": int(p.minor),
                "sm_count": int(p.multi_processor_count),
                "max_threads_per_sm": int(getattr(p, "max_threads_per_multi_processor", 0)),
                "registers_per_sm": int(getattr(p, "regs_per_multiprocessor", 0)),
                "shared_memory_per_sm_bytes": int(getattr(p, "shared_memory_per_multiprocessor", 0)),
                "warp_size": int(getattr(p, "warp_size", 32)),
                "total_memory_bytes": int(p.total_memory),
            }
        )
    session.set_devices(devices)
    return True


def allocator_stats() -> "list[tuple[int, float, float, float]]":
    """(device, allocated, reserved, peak allocated) bytes per CUDA device
    the program has initialised; empty without CUDA. The peak is PyTorch's
    ``max_memory_allocated`` (since start or the program's last reset;
    gpuutil never resets it)."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return []
    out = []
    for d in range(torch.cuda.device_count()):
        out.append(
            (
                d,
                float(torch.cuda.memory_allocated(d)),
                float(torch.cuda.memory_reserved(d)),
                float(torch.cuda.max_memory_allocated(d)),
            )
        )
    return out
