"""Tests of the opt-in NVML collector (python/gpuutil/nvml.py) and its binding.

Uses the fake NVML shared library built with the C++ tests
(build/tests/cpp/libfake_nvml.so), loaded through GPUUTIL_NVML_LIBRARY like
the real libnvidia-ml.so.1. Pins: the binding samples the fake's devices and
clamps the interval to NVML's averaging window; an enabled collector starts
inside a profile without disturbing it; a missing library is stated in the
profile's gpu_collection_off reasons; disable() makes later profiles inert.
"""

from __future__ import annotations

import time

import pytest

from conftest import REPO

FAKE = REPO / "build" / "tests" / "cpp" / "libfake_nvml.so"


@pytest.fixture
def fake_nvml(monkeypatch):
    if not FAKE.is_file():
        pytest.skip(f"{FAKE} not built (scripts/test.sh builds the C++ tests)")
    monkeypatch.setenv("GPUUTIL_NVML_LIBRARY", str(FAKE))
    monkeypatch.setenv("FAKE_NVML_SCENARIO", "ok")
    return FAKE


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
