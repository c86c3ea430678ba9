"""The collector protocol, the narrow handle collectors are given, and the
registry of collector factories.

A collector feeds a live profile from one source: CUPTI and NVTX
(gpuutil._live), PyTorch's ranges (gpuutil.torch), the cross-rank exchange
(gpuutil.torch._cluster), NVML (gpuutil.nvml), or a user's own
(``gpuutil.register_collector``). It is given a ``CollectorHandle``, never
the ``Profile``: the session it writes to, the step path, the rank and the
options, and the few things a collector asks of the profile. This module
imports nothing of the profile, so collectors can import it without an
import circle (tests/python/test_layering.py keeps both so); the built-in
factories (gpuutil._builtin_collectors) are put first in the list the first
time a profile starts (``factories()``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple


class CollectorHandle:
    """What a collector gets of the profile it feeds (the Profile makes one
    and passes it to the factory and to every protocol call).

    - ``session``: the C++ session (``_core.Session``) the collector writes
      to: events, diagnostics, thread keys (gpuutil/event_sink.h on the
      C++ side);
    - ``path``: the C++ step path (``_core.StepPath``): boundaries, range
      slots, the optimizer hooks, the next step's number;
    - ``rank``, ``world_size``;
    - the options: ``detail`` (the detail tier's schedule), ``flops_mode``
      ("measure" or None), ``cluster_options`` (the cross-rank view's);
    - ``step_diagnostics``: (name, example) pairs every report carries; a
      collector appends to it in ``start``;
    - ``boundary_callbacks``: the profile's functions a step boundary runs
      (the PyTorch collector keeps Dynamo from compiling them);
    - ``set_measured_flops(flops, step)`` and ``emit_cluster(record)``: a
      measured FLOP count, a cross-rank record for the tracker sinks.
    """

    def __init__(
        self,
        *,
        session: Any,
        path: Any,
        rank: int,
        world_size: int,
        detail: Any,
        flops_mode: Optional[str],
        cluster_options: Dict[str, Any],
        step_diagnostics: "List[Tuple[str, str]]",
        boundary_callbacks: "Tuple[Callable[..., Any], ...]",
        set_measured_flops: Callable[[float, int], None],
        emit_cluster: Callable[[Dict[str, Any]], None],
    ) -> None:
        self.session = session
        self.path = path
        self.rank = rank
        self.world_size = world_size
        self.detail = detail
        self.flops_mode = flops_mode
        self.cluster_options = cluster_options
        self.step_diagnostics = step_diagnostics
        self.boundary_callbacks = boundary_callbacks
        self.set_measured_flops = set_measured_flops
        self.emit_cluster = emit_cluster


class Collector(Protocol):
    """What a collector implements to feed a Profile (through its handle).

    ``start`` returns None when the collector runs, or a one-line reason why
    it cannot (the Profile reports it in every step's diagnostics).
    ``on_step_end`` runs at step boundaries, on the training thread's hot
    path (it must cost a few µs at most), unless the collector sets
    ``per_step = False``: at every boundary, or, when the collector has
    ``steps_until_due(handle)``, only at the boundary that many boundaries
    after the last call (and whenever a report batch is due). Boundaries in
    between stay in C++ (``_core.StepPath``). ``complete_until_ns`` returns the session-clock
    time up to which the collector has delivered everything (None: no
    constraint), asked before each report batch; an optional
    ``wait_complete(t_ns)`` blocks (bounded) until that reaches ``t_ns`` and
    returns it (used by ``flush()``). An optional ``before_report(handle)``
    runs before each batch of steps is analysed (at most every
    ``report_interval_ms``): collectors drain their buffers there, not at
    every step end; an optional ``after_report(handle, final)`` after it.
    """

    name: str

    def start(self, handle: CollectorHandle) -> Optional[str]: ...

    def on_step_end(self, handle: CollectorHandle) -> None: ...

    def complete_until_ns(self) -> Optional[int]: ...

    def stop(self, handle: CollectorHandle) -> None: ...


# Collector factories tried at start, in order. Optional subsystems register
# here (the live GPU collector, the PyTorch hook). Each factory returns a
# Collector or None when it does not apply.
_COLLECTOR_FACTORIES: List[Callable[[CollectorHandle], Optional[Collector]]] = []
_builtins_added = False

#: Why GPU activity is off when no GPU collector is available in this build.
NO_GPU_COLLECTOR_REASON = "this build of gpuutil has no live GPU (CUPTI) collector; reports are host-only"


def register_collector(factory: Callable[[CollectorHandle], Optional[Collector]]) -> None:
    """Registers a collector factory used by every later ``profile()``; it
    is called with the profile's ``CollectorHandle``."""
    _COLLECTOR_FACTORIES.append(factory)


def factories() -> List[Callable[[CollectorHandle], Optional[Collector]]]:
    """The factories a starting profile tries, in order: the built-in ones
    (CUPTI, NVTX, PyTorch, cross-rank), then the registered ones."""
    global _builtins_added
    if not _builtins_added:
        _builtins_added = True
        from gpuutil._builtin_collectors import builtin_factories

        _COLLECTOR_FACTORIES[:0] = builtin_factories()
    return _COLLECTOR_FACTORIES
