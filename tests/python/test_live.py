"""Live GPU collection from Python on this machine (no GPU, no driver): the
CUPTI collector is registered, degrades with a named reason, and every step
report says GPU collection is off and why. With the fake CUPTI (when the C++
tests' build tree has it) the same Python path collects kernels."""

import glob
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gpuutil
from gpuutil import _core, _live

REPO = Path(__file__).resolve().parents[2]


def _gpu_present() -> bool:
    return os.path.exists("/dev/nvidia0")


def test_live_collector_is_a_builtin_factory():
    from gpuutil import _collectors

    assert _live._factory in _collectors.factories()
    assert _live.CuptiCollector.collects_gpu is True


@pytest.mark.skipif(_gpu_present(), reason="this test pins the no-GPU behaviour")
def test_profile_works_without_a_gpu_and_every_report_says_why():
    with gpuutil.profile() as prof:
        for _ in range(3):
            with prof.step():
                pass
    assert len(prof.reports) == 3
    reasons = prof.gpu_collection_off
    assert len(reasons) == 1
    assert reasons[0].startswith("CUPTI: ")
    for report in prof.reports:
        diags = {d["name"]: d for d in report["diagnostics"]}
        assert "gpu_collection_off" in diags
        assert diags["gpu_collection_off"]["example"] == reasons[0]


@pytest.mark.skipif(_gpu_present(), reason="this test pins the no-GPU behaviour")
def test_real_libcupti_without_a_driver_names_cupti_error_unknown(monkeypatch):
    real = "/usr/local/cuda/lib64/libcupti.so.13"
    if not os.path.exists(real):
        pytest.skip(f"{real} not installed")
    monkeypatch.setenv("GPUUTIL_CUPTI_LIBRARY", real)
    with gpuutil.profile() as prof:
        with prof.step():
            pass
    (reason,) = prof.gpu_collection_off
    # CUPTI 13 without a driver fails at its first call that needs CUDA:
    # cuptiActivityRegisterTimestampCallback (before cuptiActivityEnable).
    assert "returned CUPTI_ERROR_UNKNOWN (999)" in reason
    assert "no NVIDIA driver/GPU visible" in reason


@pytest.mark.skipif(_gpu_present(), reason="this test pins the no-GPU behaviour")
def test_a_cpu_only_torch_profiler_running_at_start_keeps_the_real_reason_gpu_collection_is_off():
    # Without a GPU the reason is the missing driver, not the profiler
    # (issue 32, item 2: it read gpu_collection_suspended).
    pytest.importorskip("torch")
    script = textwrap.dedent("""
        import json, gpuutil, torch
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            with gpuutil.profile(report_interval_ms=0) as prof:
                with prof.step():
                    pass
        names = [d["name"] for r in prof.reports for d in r["diagnostics"]]
        print(json.dumps({"off": prof.gpu_collection_off, "names": names}))
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert "gpu_collection_suspended" not in result["names"]
    assert len(result["off"]) == 1 and result["off"][0].startswith("CUPTI: "), result
    assert "torch.profiler" not in result["off"][0]


def test_missing_library_override_is_the_reason(monkeypatch):
    monkeypatch.setenv("GPUUTIL_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13")
    with gpuutil.profile() as prof:
        with prof.step():
            pass
    (reason,) = prof.gpu_collection_off
    assert "GPUUTIL_CUPTI_LIBRARY=/nonexistent/libcupti.so.13" in reason


def test_gpuutil_cupti_off_disables_collection(monkeypatch):
    monkeypatch.setenv("GPUUTIL_CUPTI", "off")
    with gpuutil.profile() as prof:
        with prof.step():
            pass
    assert prof.gpu_collection_off == ["CUPTI: disabled by GPUUTIL_CUPTI=off"]


def test_wheel_dirs_are_found_on_sys_path(tmp_path, monkeypatch):
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert str(lib) in _live.cupti_wheel_dirs()


def _fake_cupti() -> str:
    env = os.environ.get("GPUUTIL_FAKE_CUPTI")
    if env:
        return env
    hits = sorted(glob.glob(str(REPO / "build*" / "tests" / "cpp" / "libfake_cupti.so")))
    if not hits:
        pytest.skip("libfake_cupti.so not built (build the C++ tests)")
    return hits[0]


def test_fake_cupti_kernels_reach_python_reports_through_the_same_loading_path():
    # A subprocess: CUPTI state is process-wide, and the fake must be the
    # library the collector loads.
    fake = _fake_cupti()
    code = textwrap.dedent(
        f"""
        import ctypes, json, gpuutil
        fake = ctypes.CDLL({fake!r})
        fake.fake_cupti_reset(None)
        fake.fake_cupti_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64]
        with gpuutil.profile() as prof:
            for i in range(4):
                with prof.step():
                    fake.fake_cupti_launch_kernel(b"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 2000, 100)
                    fake.fake_cupti_launch_kernel(b"gemm", 7, 1000, 100)
        print(json.dumps({{"off": prof.gpu_collection_off,
                           "kernels": [d["kernels"] for r in prof.reports for d in r["steps"][0]["devices"]]}}))
        """
    )
    env = dict(os.environ, GPUUTIL_CUPTI_LIBRARY=fake)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["off"] == []
    assert result["kernels"] == [2, 2, 2, 2]


def test_live_collector_binding_reports_counters():
    s = _core.Session()
    c = _core.LiveCollector(s, buffer_count=2, buffer_bytes=1 << 16)
    assert not c.running
    counters = c.counters()
    assert counters["records_dropped"] == 0
    assert set(counters) >= {"buffers_starved", "records_decoded", "buffers_invalid"}


NVTX_USER = r"""
#include "nvtx3/nvToolsExt.h"
#include <time.h>
static void spin_ms(long ms) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do { clock_gettime(CLOCK_MONOTONIC, &b); }
  while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ms * 1000000L);
}
void dataloader_range(long ms) {
  nvtxRangePushA("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  spin_ms(ms);
  nvtxRangePop();
}
"""


@pytest.fixture(scope="module")
def nvtx_user_lib(tmp_path_factory):
    """A third-party binary with header-only NVTX (like torch or NCCL)."""
    inc = "/usr/local/cuda/include"
    if not os.path.exists(os.path.join(inc, "nvtx3", "nvToolsExt.h")):
        pytest.skip("NVTX headers not installed")
    d = tmp_path_factory.mktemp("nvtxuser")
    src = d / "user.c"
    src.write_text(NVTX_USER)
    lib = d / "libuser.so"
    r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", f"-I{inc}", str(src), "-o", str(lib), "-ldl"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot compile the NVTX user library: {r.stderr}")
    return str(lib)


def _run(code: str, **env: str) -> dict:
    import json

    full = dict(os.environ)
    full.pop("NVTX_INJECTION64_PATH", None)  # a fresh process, as a user would start it
    full.update(env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_gpuutil_injects_nvtx_and_user_ranges_reach_the_host_breakdown(nvtx_user_lib):
    result = _run(
        f"""
        import ctypes, json, os, gpuutil
        user = ctypes.CDLL({nvtx_user_lib!r})  # its first NVTX call comes after import gpuutil
        with gpuutil.profile() as prof:
            for i in range(3):
                with prof.step():
                    user.dataloader_range(ctypes.c_long(5))
        print(json.dumps({{"env": os.environ["NVTX_INJECTION64_PATH"],
                           "host": [r["steps"][0].get("host", []) for r in prof.reports],
                           "diags": [[d["name"] for d in r["diagnostics"]] for r in prof.reports]}}))
        """
    )
    assert result["env"].endswith("libgpuutil_nvtx.so")
    for host, diags in zip(result["host"], result["diags"]):
        assert "nvtx_collection_off" not in diags
        dataloader = sum(t["breakdown_ns"]["dataloader"] for t in host)
        # a 5 ms range, on the session clock through the tick fit (+-20 us, docs/clock.md)
        assert 5_000_000 - 20_000 <= dataloader < 50_000_000


def test_nvtx_owned_by_another_tool_degrades_and_every_report_says_so(nvtx_user_lib):
    result = _run(
        f"""
        import ctypes, json, gpuutil
        with gpuutil.profile() as prof:
            for i in range(2):
                with prof.step():
                    pass
        print(json.dumps([{{d["name"]: d.get("example") for d in r["diagnostics"]}} for r in prof.reports]))
        """,
        NVTX_INJECTION64_PATH="/opt/nvidia/nsight-systems/target-linux-x64/libToolsInjection64.so",
    )
    assert len(result) == 2
    for diags in result:
        assert "another tool" in diags["nvtx_collection_off"]
        assert "gpu_collection_off" in diags


def test_gpuutil_step_ranges_are_nvtx_ranges_our_collector_skips():
    # Pushed in the "gpuutil" domain for Nsight Systems; gpuutil's own NVTX
    # collector must not count them as host ranges.
    result = _run(
        """
        import json, gpuutil
        from gpuutil import _core
        with gpuutil.profile() as prof:
            for i in range(3):
                with prof.step():
                    _core.nvtx_push_step(i)
                    _core.nvtx_pop_step()
            nvtx = [c for c in prof._collectors if c.name == "nvtx"][0]
            counters = nvtx.counters()
        print(json.dumps({"ranges": counters["nvtx_ranges"], "off": nvtx.off_reason, "steps": len(prof.reports)}))
        """
    )
    assert result == {"ranges": 0, "off": "", "steps": 3}
