"""The collector protocol and the registry of collector factories.

A collector feeds a live profile (gpuutil._profile.Profile) from one
source: CUPTI and NVTX (gpuutil._live), PyTorch's ranges (gpuutil.torch),
the cross-rank exchange (gpuutil.torch._cluster), NVML (gpuutil.nvml), or a
user's own (``gpuutil.register_collector``). This module imports nothing of
the profile, so collectors can import it without an import circle; the
built-in factories (gpuutil._builtin_collectors) are put first in the list
the first time a profile starts (``factories()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, Optional, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._profile import Profile

class Collector(Protocol):
    """What a collector implements to feed a Profile.

    ``start`` returns None when the collector runs, or a one-line reason why
    it cannot (the Profile reports it in every step's diagnostics).
    ``on_step_end`` runs at step boundaries, on the training thread's hot
    path (it must cost a few µs at most), unless the collector sets
    ``per_step = False``: at every boundary, or, when the collector has
    ``steps_until_due(prof)``, only at the boundary that many boundaries
    after the last call (and whenever a report batch is due). Boundaries in
    between stay in C++ (``_core.StepPath``). ``complete_until_ns`` returns the session-clock
    time up to which the collector has delivered everything (None: no
    constraint), asked before each report batch; an optional
    ``wait_complete(t_ns)`` blocks (bounded) until that reaches ``t_ns`` and
    returns it (used by ``flush()``). An optional ``before_report(prof)``
    runs before each batch of steps is analysed (at most every
    ``report_interval_ms``): collectors drain their buffers there, not at
    every step end.
    """

    name: str

    def start(self, prof: "Profile") -> Optional[str]: ...

    def on_step_end(self, prof: "Profile") -> None: ...

    def complete_until_ns(self) -> Optional[int]: ...

    def stop(self, prof: "Profile") -> None: ...


# Collector factories tried at start, in order. Optional subsystems register
# here (the live GPU collector, the PyTorch hook). Each factory returns a
# Collector or None when it does not apply.
_COLLECTOR_FACTORIES: List[Callable[["Profile"], Optional[Collector]]] = []
_builtins_added = False

#: Why GPU activity is off when no GPU collector is available in this build.
NO_GPU_COLLECTOR_REASON = "this build of gpuutil has no live GPU (CUPTI) collector; reports are host-only"


def register_collector(factory: Callable[["Profile"], Optional[Collector]]) -> None:
    """Registers a collector factory used by every later ``profile()``."""
    _COLLECTOR_FACTORIES.append(factory)


def factories() -> List[Callable[["Profile"], Optional[Collector]]]:
    """The factories a starting profile tries, in order: the built-in ones
    (CUPTI, NVTX, PyTorch, cross-rank), then the registered ones."""
    global _builtins_added
    if not _builtins_added:
        _builtins_added = True
        from gpuutil._builtin_collectors import builtin_factories

        _COLLECTOR_FACTORIES[:0] = builtin_factories()
    return _COLLECTOR_FACTORIES
