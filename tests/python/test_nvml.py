"""Tests of the opt-in NVML collector (python/gpuutil/nvml.py) and its binding.

Uses the fake NVML shared library built with the C++ tests
(build/tests/cpp/libfake_nvml.so), loaded through GPUUTIL_NVML_LIBRARY like
the real libnvidia-ml.so.1. Pins: the binding samples the fake's devices and
clamps the interval to NVML's averaging window; an enabled collector starts
inside a profile without disturbing it; a missing library is stated in the
profile's gpu_collection_off reasons; disable() makes later profiles inert.
And which devices the collector gives the sampler: those a torch-like source
uses, by UUID; CUDA_VISIBLE_DEVICES' UUIDs; numeric CUDA_VISIBLE_DEVICES only
under CUDA_DEVICE_ORDER=PCI_BUS_ID, else refused with the reason. (torch here
is a CPU build, so torch's side is a stand-in with torch's API.)
"""

from __future__ import annotations

import ctypes
import time
from types import SimpleNamespace

import pytest

from conftest import REPO

FAKE = REPO / "build" / "tests" / "cpp" / "libfake_nvml.so"


@pytest.fixture
def fake_nvml(monkeypatch):
    if not FAKE.is_file():
        pytest.skip(f"{FAKE} not built (scripts/test.sh builds the C++ tests)")
    monkeypatch.setenv("GPUUTIL_NVML_LIBRARY", str(FAKE))
    monkeypatch.setenv("FAKE_NVML_SCENARIO", "ok")
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "FAKE_NVML_DEVICES", "FAKE_NVML_ORDER", "FAKE_NVML_MIG"):
        monkeypatch.delenv(var, raising=False)
    return FAKE


def fake_uuid(gpu: int) -> str:
    """GPU k's UUID as the fake NVML prints it ("GPU-…")."""
    lib = ctypes.CDLL(str(FAKE))
    lib.fake_nvml_uuid.restype = ctypes.c_char_p
    return lib.fake_nvml_uuid(gpu).decode()


class _CUuuid:
    """torch's _CUuuid: prints the bare UUID, without NVML's "GPU-"."""

    def __init__(self, bare: str) -> None:
        self.bare = bare

    def __str__(self) -> str:
        return self.bare


def torch_like(uuids, current=0, contexts=(), reserved=(), initialised=True):
    """A stand-in for an imported torch with CUDA: the calls gpuutil.nvml makes."""
    cuda = SimpleNamespace(
        is_initialized=lambda: initialised,
        device_count=lambda: len(uuids),
        current_device=lambda: current,
        memory_reserved=lambda i: (64 << 20) if i in reserved else 0,
        get_device_properties=lambda i: SimpleNamespace(name="H100", uuid=_CUuuid(uuids[i])),
    )
    return SimpleNamespace(cuda=cuda, _C=SimpleNamespace(_cuda_hasPrimaryContext=lambda i: i in contexts))


def nvml_collector(prof):
    return next(c for c in prof._collectors if c.name == "nvml")


def profiled(gpuutil, steps: int, **nvml_options):
    """A profile of `steps` empty steps with the NVML collector enabled."""
    import gpuutil.nvml

    gpuutil.nvml.enable(**nvml_options)
    try:
        with gpuutil.profile() as prof:
            for _ in range(steps):
                with prof.step():
                    pass
    finally:
        gpuutil.nvml.disable()
    return prof


def test_binding_samples_the_fake_devices(fake_nvml, installed_gpuutil):
    from gpuutil import _core

    s = _core.NvmlSampler(interval_s=0.001, gpm=True)
    assert s.interval_ns >= 166_666_667  # never faster than NVML's averaging window
    assert s.open(), s.error
    assert s.device_count == 2
    s.sample_once()
    s.sample_once()
    assert s.dropped == 0
    assert any("device 1 gpm" in p for p in s.problems())  # device 1 has no GPM


def test_enabled_collector_runs_inside_a_profile(fake_nvml, installed_gpuutil):
    import gpuutil.nvml

    gpuutil.nvml.enable(interval_s=0.2)
    try:
        with installed_gpuutil.profile() as prof:
            with prof.step():
                time.sleep(0.05)
        assert not any(r.startswith("nvml:") for r in prof.gpu_collection_off), prof.gpu_collection_off
        assert len(prof.reports) == 1
    finally:
        gpuutil.nvml.disable()


def test_missing_library_is_stated_and_training_continues(monkeypatch, installed_gpuutil):
    import gpuutil.nvml

    monkeypatch.setenv("GPUUTIL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    gpuutil.nvml.enable()
    try:
        with installed_gpuutil.profile() as prof:
            with prof.step():
                pass
        reasons = [r for r in prof.gpu_collection_off if r.startswith("nvml:")]
        assert reasons and "cannot load /nonexistent/libnvidia-ml.so.1" in reasons[0]
    finally:
        gpuutil.nvml.disable()
    with installed_gpuutil.profile() as prof2:
        with prof2.step():
            pass
    assert not any(r.startswith("nvml:") for r in prof2.gpu_collection_off)


# --- which devices: the mapping ------------------------------------------------

UUIDS = [f"{k}a3c0f1e-7d2b-4c8e-9f00-5b6d7e8f9a0{k}" for k in range(4)]  # torch's bare form


def test_torch_like_source_gives_the_devices_it_uses_by_uuid_with_their_cuda_ids(installed_gpuutil):
    from gpuutil.nvml import DeviceRef, devices_from_torch

    torch = torch_like(UUIDS, current=1, contexts={1, 3}, reserved={2})
    sel = devices_from_torch(torch)
    assert sel.source == "torch"
    # cuda:0 has neither a context nor memory here: another rank's GPU.
    assert sel.devices == [DeviceRef(1, UUIDS[1]), DeviceRef(2, UUIDS[2]), DeviceRef(3, UUIDS[3])]
    assert sel.problems == []


def test_torch_that_has_not_initialised_cuda_gives_no_list_yet(installed_gpuutil):
    from gpuutil.nvml import devices_from_torch, select_devices

    torch = torch_like(UUIDS, initialised=False)
    assert devices_from_torch(torch) is None
    assert select_devices(environ={}, torch=torch) is None


def test_torch_wins_over_cuda_visible_devices(installed_gpuutil):
    from gpuutil.nvml import DeviceRef, select_devices

    sel = select_devices(environ={"CUDA_VISIBLE_DEVICES": "3"}, torch=torch_like(UUIDS[:1]))
    assert sel.devices == [DeviceRef(0, UUIDS[0])]


def test_cuda_visible_devices_uuids_are_the_cuda_devices_in_list_order(installed_gpuutil):
    from gpuutil.nvml import DeviceRef, devices_from_environment

    sel = devices_from_environment({"CUDA_VISIBLE_DEVICES": "GPU-3a3c0f1e-7d2b, MIG-0c7e2d90-3f4a,0"})
    assert sel.source == "CUDA_VISIBLE_DEVICES"
    # A numeric entry after UUIDs ends the list, as in CUDA.
    assert sel.devices == [DeviceRef(0, "GPU-3a3c0f1e-7d2b"), DeviceRef(1, "MIG-0c7e2d90-3f4a")]
    assert devices_from_environment({}) is None


def test_numeric_cuda_visible_devices_without_pci_bus_id_order_is_refused(installed_gpuutil):
    from gpuutil.nvml import devices_from_environment

    for order in ({}, {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}):
        sel = devices_from_environment({"CUDA_VISIBLE_DEVICES": "3", **order})
        assert sel.devices == []  # never guessed
        assert len(sel.problems) == 1
        assert "CUDA_VISIBLE_DEVICES=3 names devices by CUDA index" in sel.problems[0]
        assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in sel.problems[0]


def test_numeric_cuda_visible_devices_under_pci_bus_id_order_are_nvml_indices(installed_gpuutil):
    from gpuutil.nvml import DeviceRef, devices_from_environment

    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    sel = devices_from_environment({"CUDA_VISIBLE_DEVICES": "3,1", **env})
    assert sel.devices == [DeviceRef(0, nvml_index=3), DeviceRef(1, nvml_index=1)]
    # A negative entry ends the list; a repeated one hides every device.
    assert devices_from_environment({"CUDA_VISIBLE_DEVICES": "0,2,-1,1", **env}).devices == [
        DeviceRef(0, nvml_index=0),
        DeviceRef(1, nvml_index=2),
    ]
    sel = devices_from_environment({"CUDA_VISIBLE_DEVICES": "1,1", **env})
    assert sel.devices == [] and "makes no CUDA device visible" in sel.problems[0]


# --- which devices: through the sampler ------------------------------------------


def test_torch_like_device_list_reaches_the_sampler_labelled_by_cuda_id(fake_nvml, monkeypatch, installed_gpuutil):
    from gpuutil import _core
    from gpuutil.nvml import select_devices

    monkeypatch.setenv("FAKE_NVML_ORDER", "1,0")  # NVML index 0 is GPU 1
    bare_upper = fake_uuid(0)[len("GPU-"):].upper()
    sel = select_devices(environ={}, torch=torch_like([bare_upper]))
    s = _core.NvmlSampler(devices=sel.devices)
    assert s.open(), s.error
    assert s.devices == [(0, fake_uuid(0), "gpu", "")]


@pytest.mark.parametrize("deferred", [False, True], ids=["chosen_at_start", "chosen_at_first_step_end"])
def test_collector_samples_the_cuda_visible_device_by_uuid_as_cuda_0(deferred, fake_nvml, monkeypatch, installed_gpuutil):
    import gpuutil.nvml

    # torch imported without CUDA at start defers the choice to the first step end.
    monkeypatch.setattr(gpuutil.nvml, "_torch_cuda_pending", lambda: deferred)
    monkeypatch.setenv("FAKE_NVML_ORDER", "1,0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", fake_uuid(0))
    collector = nvml_collector(profiled(installed_gpuutil, 2))
    assert collector.sampler.devices == [(0, fake_uuid(0), "gpu", "")]
    assert not any("NVML index" in p for p in collector.problems()), collector.problems()


def test_collector_refuses_numeric_cuda_visible_devices_and_says_why(fake_nvml, monkeypatch, installed_gpuutil):
    import gpuutil.nvml

    # (torch here, if imported, is a CPU build: it never initialises CUDA.)
    monkeypatch.setattr(gpuutil.nvml, "_torch_cuda_pending", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    prof = profiled(installed_gpuutil, 1)
    reasons = [r for r in prof.gpu_collection_off if r.startswith("nvml:")]
    assert len(reasons) == 1 and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in reasons[0], prof.gpu_collection_off


def test_deferred_choice_that_finds_no_device_samples_none_and_says_so(fake_nvml, monkeypatch, installed_gpuutil):
    import gpuutil.nvml

    # torch imported without CUDA at start, still without CUDA at the first
    # step end, no CUDA_VISIBLE_DEVICES: this process uses no GPU we can name.
    monkeypatch.setattr(gpuutil.nvml, "_torch_cuda_pending", lambda: True)
    prof = profiled(installed_gpuutil, 2)
    assert nvml_collector(prof).sampler.devices == []  # not every GPU of the node by NVML index
    off = next(d for d in prof.reports[-1]["diagnostics"] if d["name"] == "gpu_collection_off")
    assert off["count"] == len(prof.gpu_collection_off) + 1  # the start reasons, and this one


def test_partial_counters_reach_every_report_as_a_diagnostic(fake_nvml, monkeypatch, installed_gpuutil):
    # Without a device list the devices are labelled by NVML index, and the
    # fake's device 1 has no GPM: both are in every step report, not only in
    # the collector's problems().
    import gpuutil.nvml

    monkeypatch.setattr(gpuutil.nvml, "_torch_cuda_pending", lambda: False)  # torch may be loaded by other tests
    monkeypatch.setattr(gpuutil.nvml, "select_devices", lambda *a, **k: None)
    prof = profiled(installed_gpuutil, 2, interval_s=0.2, gpm=True)
    assert len(prof.reports) == 2
    for report in prof.reports:
        partial = [d for d in report["diagnostics"] if d["name"] == "nvml_counters_partial"]
        assert partial and partial[0]["example"].startswith("nvml: "), report["diagnostics"]
