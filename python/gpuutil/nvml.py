"""Opt-in NVML device counters for ``gpuutil.profile()``.

    import gpuutil, gpuutil.nvml
    gpuutil.nvml.enable()              # every later profile samples NVML
    with gpuutil.profile(output="steps.jsonl") as prof: ...

Each step's report then carries ``steps[].devices[].health`` (duty cycle,
clocks vs max, throttle durations, power, J per step, temperature, memory
used; GPM metrics with ``enable(gpm=True)`` on Hopper+), for devices the
step has GPU activity on (host-only profiles have no device entries, so
the counters are sampled but not shown). The sampler is C++ (libgpuutil/src/collectors/nvml):
a background thread, bounded memory, never faster than NVML's averaging
window. When NVML cannot be loaded (no driver) the profile says why in its
``gpu_collection_off`` diagnostic and trains on unaffected.
"""

from __future__ import annotations

from typing import Any, List, Optional

from gpuutil import _core
from gpuutil._profile import register_collector

_enabled: List[dict] = []
_registered = False


class NvmlCollector:
    """The Collector (see gpuutil._profile.Collector) around _core.NvmlSampler."""

    name = "nvml"
    collects_gpu = False  # device counters, not GPU activity

    def __init__(self, interval_s: float = 0.2, gpm: bool = False) -> None:
        self.sampler = _core.NvmlSampler(interval_s=interval_s, gpm=gpm)

    def start(self, prof: Any) -> Optional[str]:
        if not self.sampler.open():
            return self.sampler.error
        self.sampler.sample_once()  # a sample at the start anchors cumulative counters
        self.sampler.start()
        return None

    def on_step_end(self, prof: Any) -> None:
        self.sampler.drain_into(prof._session)

    def complete_until_ns(self) -> Optional[int]:
        return None

    def stop(self, prof: Any) -> None:
        self.sampler.stop()
        self.sampler.sample_once()  # closes the last step's cumulative counters
        self.sampler.drain_into(prof._session)

    def problems(self) -> List[str]:
        return list(self.sampler.problems())


def enable(interval_s: float = 0.2, gpm: bool = False) -> None:
    """Samples NVML in every later ``gpuutil.profile()`` (idempotent)."""
    global _registered
    _enabled.clear()
    _enabled.append({"interval_s": interval_s, "gpm": gpm})
    if not _registered:
        register_collector(_factory)
        _registered = True


def disable() -> None:
    """Stops sampling NVML in later profiles."""
    _enabled.clear()


def _factory(prof: Any) -> Optional[NvmlCollector]:
    if not _enabled:
        return None
    return NvmlCollector(**_enabled[0])
