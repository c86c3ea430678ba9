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

Which devices: only the CUDA devices this process uses, found in NVML by
UUID and labelled with their CUDA device id (the id CUPTI's kernel records
carry), never by NVML's index, which follows PCI bus order and ignores
``CUDA_VISIBLE_DEVICES``. ``select_devices()`` decides: with torch imported
and CUDA initialised, the devices torch has a context or memory on (and the
current device), by the UUID of their device properties; if torch is
imported but CUDA is not yet initialised at profile start, at the first
step end instead. Otherwise ``CUDA_VISIBLE_DEVICES``: UUID entries as they
are, numeric entries only under ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (else they
are refused, never guessed). With neither, every NVML device is sampled,
labelled by NVML index, and the sampler's ``problems()`` says that this is
only right when CUDA and NVML number devices alike. torch is never imported
here: only a torch the program has imported is asked.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, List, Mapping, NamedTuple, Optional

from gpuutil import _core
from gpuutil._collectors import register_collector

_enabled: List[dict] = []
_registered = False

_UUID_PREFIXES = ("GPU-", "MIG-")


class DeviceRef(NamedTuple):
    """A CUDA device of this process, named so NVML can find it
    (``NvmlDeviceRef`` in libgpuutil/include/gpuutil/nvml_sampler.h)."""

    cuda_device_id: int  #: the label of its samples (CUPTI's ``device``, torch's ``cuda:N``)
    uuid: str = ""  #: "GPU-…"/"MIG-…" or torch's bare form; "" when nvml_index is given
    nvml_index: int = -1  #: instead of uuid, only under CUDA_DEVICE_ORDER=PCI_BUS_ID


class DeviceSelection(NamedTuple):
    """The devices to sample, where the list came from, and what could not be mapped."""

    devices: List[DeviceRef]
    source: str  #: "torch" or "CUDA_VISIBLE_DEVICES"
    problems: List[str]  #: one line per device or setting that could not be mapped, and why


def devices_from_torch(torch: Any) -> Optional[DeviceSelection]:
    """The CUDA devices this process uses, from an imported torch (passed in,
    never imported here); None when torch has not initialised CUDA.

    Used: the current device, and every device torch holds a primary context
    or allocator memory on; each mapped to its UUID through
    ``torch.cuda.get_device_properties(i).uuid`` (printed without NVML's
    "GPU-" prefix; the sampler accepts both).
    """
    cuda = torch.cuda
    if not cuda.is_initialized():
        return None
    has_context = getattr(getattr(torch, "_C", None), "_cuda_hasPrimaryContext", None)
    current = cuda.current_device()
    used = [
        i
        for i in range(cuda.device_count())
        if i == current or (has_context is not None and has_context(i)) or cuda.memory_reserved(i) > 0
    ]
    devices: List[DeviceRef] = []
    problems: List[str] = []
    for i in used:
        uuid = getattr(cuda.get_device_properties(i), "uuid", None)
        if uuid is None:
            problems.append(f"cuda:{i}: this torch's device properties have no uuid; NVML cannot be joined to it")
        else:
            devices.append(DeviceRef(i, str(uuid)))
    return DeviceSelection(devices, "torch", problems)


def _cuda_indices(entries: List[str]) -> List[int]:
    """CUDA's reading of numeric CUDA_VISIBLE_DEVICES entries: each is read
    like strtoul ("1gpu" is 1); a negative or unreadable one ends the list; a
    repeated one makes it empty (as torch's parser, after CUDA's)."""
    out: List[int] = []
    for e in entries:
        number = re.match(r"[+-]?[0-9]+", e)
        if number is None or int(number.group()) < 0:
            break
        x = int(number.group())
        if x in out:
            return []
        out.append(x)
    return out


def devices_from_environment(environ: Mapping[str, str]) -> Optional[DeviceSelection]:
    """The CUDA devices CUDA_VISIBLE_DEVICES makes visible, as CUDA numbers
    them (the i-th entry is CUDA device i); None when it is unset.

    UUID entries ("GPU-…", "MIG-…", or a unique leading part of one) are used
    as they are. Numeric entries are NVML indices only under
    CUDA_DEVICE_ORDER=PCI_BUS_ID; otherwise CUDA's order cannot be mapped to
    NVML's and they are refused (no devices, and the reason), never guessed.
    """
    var = environ.get("CUDA_VISIBLE_DEVICES")
    if var is None:
        return None
    source = "CUDA_VISIBLE_DEVICES"
    entries = [e.strip() for e in var.split(",")]
    if entries[0].upper().startswith(_UUID_PREFIXES):
        uuids: List[str] = []
        for e in entries:
            if not e.upper().startswith(_UUID_PREFIXES):
                break  # CUDA ignores the rest
            if e in uuids:
                return DeviceSelection([], source, [f"CUDA_VISIBLE_DEVICES={var} lists {e} twice: no device is visible"])
            uuids.append(e)
        return DeviceSelection([DeviceRef(i, u) for i, u in enumerate(uuids)], source, [])
    indices = _cuda_indices(entries)
    if not indices:
        return DeviceSelection([], source, [f"CUDA_VISIBLE_DEVICES={var!r} makes no CUDA device visible"])
    if environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "PCI_BUS_ID":
        return DeviceSelection(
            [],
            source,
            [
                f"CUDA_VISIBLE_DEVICES={var} names devices by CUDA index, and without CUDA_DEVICE_ORDER=PCI_BUS_ID "
                "CUDA's order (FASTEST_FIRST) cannot be mapped to NVML's (PCI bus): no device sampled. Set "
                "CUDA_DEVICE_ORDER=PCI_BUS_ID, list GPU UUIDs, or initialise CUDA with torch before the first step end"
            ],
        )
    return DeviceSelection([DeviceRef(i, nvml_index=k) for i, k in enumerate(indices)], source, [])


def select_devices(environ: Optional[Mapping[str, str]] = None, torch: Any = None) -> Optional[DeviceSelection]:
    """The devices the NVML collector samples: from torch (the program's own,
    ``sys.modules["torch"]`` unless given) when it has initialised CUDA,
    else from CUDA_VISIBLE_DEVICES (``os.environ`` unless given); None when
    neither says (every NVML device is then sampled, labelled by index)."""
    environ = os.environ if environ is None else environ
    torch = sys.modules.get("torch") if torch is None else torch
    chosen = devices_from_torch(torch) if torch is not None else None
    if chosen is not None and chosen.devices:
        return chosen
    env = devices_from_environment(environ)
    if chosen is None:
        return env
    if env is None:
        return chosen  # torch's problems, no device
    return DeviceSelection(env.devices, env.source, chosen.problems + env.problems)


def _torch_cuda_pending() -> bool:
    """torch is imported but has not initialised CUDA (yet)."""
    torch = sys.modules.get("torch")
    return torch is not None and not torch.cuda.is_initialized()


class NvmlCollector:
    """The Collector (see gpuutil._collectors.Collector) around _core.NvmlSampler."""

    name = "nvml"
    collects_gpu = False  # device counters, not GPU activity
    per_step = False  # drained before each report batch (the sampler has its own thread)

    def __init__(self, interval_s: float = 0.2, gpm: bool = False) -> None:
        self._options = {"interval_s": interval_s, "gpm": gpm}
        self.sampler: Optional[Any] = None
        self.selection: Optional[DeviceSelection] = None
        self._pending = False  # devices chosen at the first step end
        self._problems: List[str] = []

    def start(self, prof: Any) -> Optional[str]:
        self._pending = _torch_cuda_pending()
        devices: Optional[List[DeviceRef]] = []  # pending: none until the first step end
        if not self._pending:
            self.selection = select_devices()
            if self.selection is not None and not self.selection.devices:
                return "; ".join(self.selection.problems)  # nothing this process uses can be named
            devices = self.selection.devices if self.selection is not None else None
            self._problems += self.selection.problems if self.selection is not None else []
        self.sampler = _core.NvmlSampler(devices=devices, **self._options)
        if not self.sampler.open():
            return self.sampler.error
        self.sampler.sample_once()  # a sample at the start anchors cumulative counters
        self.sampler.start()
        self._report_problems(prof)
        return None

    def _report_problems(self, prof: Any) -> None:
        """Every report says which counters are partial, and why."""
        for line in self.problems():
            prof.session.add_standing_diagnostic("nvml_counters_partial", f"nvml: {line}")

    def _choose_devices(self, prof: Any) -> None:
        """The deferred choice, once, at the first step end: training has
        initialised CUDA by then if it uses it. Why nothing is sampled goes
        into every later report (gpu_collection_off); never raises."""
        self._pending = False
        try:
            self.selection = select_devices()
            why = self._use(self.selection)
        except Exception as e:  # noqa: BLE001 - stated, never raised into training
            why = f"choosing the devices failed: {type(e).__name__}: {e}"
        if why:
            prof.session.add_standing_diagnostic("gpu_collection_off", f"{self.name}: {why}")
        self._report_problems(prof)

    def _use(self, selection: Optional[DeviceSelection]) -> str:
        """Gives the sampler the selection; why nothing is sampled, or ""."""
        if selection is None:
            return (
                "torch has not initialised CUDA by the first step end and CUDA_VISIBLE_DEVICES is unset: "
                "the devices this process uses are unknown; no device sampled"
            )
        self._problems += selection.problems
        if not selection.devices:
            return "; ".join(selection.problems)
        if self.sampler.set_devices(list(selection.devices)) == 0:
            return "none of the CUDA devices was found in NVML: " + "; ".join(self.sampler.problems())
        self.sampler.sample_once()  # anchors cumulative counters for the new devices
        return ""

    def on_step_end(self, prof: Any) -> None:
        """Before each report batch (the first comes at the first step end)."""
        if self._pending:
            self._choose_devices(prof)
        self.sampler.drain_into(prof.session)

    before_report = on_step_end

    def complete_until_ns(self) -> Optional[int]:
        return None

    def stop(self, prof: Any) -> None:
        self.sampler.stop()
        self.sampler.sample_once()  # closes the last step's cumulative counters
        self.sampler.drain_into(prof.session)

    def problems(self) -> List[str]:
        """Devices that could not be mapped, MIG degradation, fields NVML does not give."""
        return self._problems + list(self.sampler.problems() if self.sampler is not None else [])


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
