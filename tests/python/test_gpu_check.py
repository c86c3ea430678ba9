"""The GPU check (benchmarks/gpu_check.py) runs end to end here, against the
fake CUPTI and its simulated device (--self-test), so the script that will
run on a GPU machine cannot rot between the rare sessions that have one.
Its CUPTI probe (benchmarks/gpu_check_probe.cpp) must report the cell of the
fake's matrix the fake was configured with: that is what shows it measures
CUPTI's behaviour rather than assuming it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_live import _fake_cupti

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"

pytest.importorskip("torch")

#: Checks that fail on today's collector, each with the issue's reason. The
#: set must be exact: a check that starts passing must leave it (the fix
#: landed), and any other failure fails the test.
EXPECTED_TO_FAIL = {}  # type: dict


def _run(tmp_path, *args, matrix=None, timeout=600):
    env = dict(os.environ, GPUUTIL_FAKE_CUPTI=_fake_cupti())
    env.pop("GPUUTIL_CUPTI_LIBRARY", None)
    env.pop("GPUUTIL_FAKE_CUPTI_MATRIX", None)
    if matrix is not None:
        env["GPUUTIL_FAKE_CUPTI_MATRIX"] = matrix
    out = subprocess.run([sys.executable, str(SCRIPT), "--self-test", "--out", str(tmp_path), *args],
                         capture_output=True, text=True, env=env, timeout=timeout)
    result = json.loads((tmp_path / "gpu_check.json").read_text()) if (tmp_path / "gpu_check.json").exists() else {}
    return out, result


def _probe_rows(result):
    return {r["check"]: r for r in result["rows"] if r["scenario"] == "probe"}


def test_gpu_check_self_test_runs_the_probe_first_then_every_scenario_that_does_not_need_the_hardware(tmp_path):
    out, result = _run(tmp_path)
    log = out.stdout[-6000:] + out.stderr[-3000:]
    rows = result["rows"]
    failed = {(r["scenario"], r["check"]) for r in rows if r["result"] == "FAIL"}
    unexpected = failed - set(EXPECTED_TO_FAIL)
    fixed = set(EXPECTED_TO_FAIL) - failed
    assert not unexpected, f"failed: {sorted(unexpected)}\n{log}"
    assert not fixed, f"now pass, remove from EXPECTED_TO_FAIL: {sorted(fixed)}"
    assert out.returncode == (1 if EXPECTED_TO_FAIL else 0), log
    # The probe runs first, and reports the fake's default cell row by row.
    assert rows[0]["scenario"] == "probe"
    probe = _probe_rows(result)
    assert {k for k, r in probe.items() if r["result"] == "PASS"} == {
        "seal", "records", "buffers", "api", "skew", "hold", "names", "graph", "timestamps", "heads", "streams",
        "clock"}, probe
    assert probe["seal"]["measured"] == "seal=1" and probe["records"]["measured"] == "records=thread"
    assert result["probe"]["cell"] == "seal=1,records=thread,buffers=thread,api=start,skew=0,hold=0"
    assert "| matrix row | this CUPTI | measured |" in out.stdout
    # Scenarios in the order of what they teach.
    order = list(dict.fromkeys(r["scenario"] for r in rows))
    assert order[:5] == ["probe", "coverage", "pipelined", "long_kernel", "profiler_thread"], order
    skipped = {r["scenario"] for r in rows if r["result"] == "SKIP"}
    assert skipped == {"matmul", "compile", "nvml"}, skipped
    assert all(r["note"] for r in rows if r["result"] == "SKIP"), "every skip says why"
    ran = {r["scenario"] for r in rows if r["result"] in ("PASS", "FAIL")} - {"probe"}
    assert ran == {"coverage", "pipelined", "long_kernel", "profiler_thread", "dataloader", "item", "tiny", "graph",
                   "profiler", "nccl", "driver"}
    # Every scenario that ran checked that nothing was lost, late or invalid.
    clean = {r["scenario"] for r in rows if r["check"] == "records lost/late/invalid"}
    assert clean == ran
    # NCCL with one rank is informational; the driver got the CUPTI the Python side loaded.
    assert [r["result"] for r in rows if r["scenario"] == "nccl" and "communication" in r["check"]] == ["INFO"]
    driver_cupti = [r for r in rows if r["scenario"] == "driver" and r["check"] == "libcupti loaded"]
    assert driver_cupti and driver_cupti[0]["measured"] == _fake_cupti(), driver_cupti
    assert driver_cupti[0]["note"] == "the one the Python side loaded"
    # The table comes last.
    assert out.stdout.strip().splitlines()[-1].startswith("| driver")


@pytest.mark.parametrize("cell, expect", [
    ("seal=0,buffers=switch,api=exit,skew=3000,hold=1",
     {"seal": "seal=0", "records": "records=thread", "buffers": "buffers=switch", "api": "api=exit",
      "skew": "skew>0", "hold": "hold=1"}),
    ("records=device,buffers=global",
     {"seal": "n/a", "records": "records=device", "buffers": "buffers=global", "api": "n/a", "skew": "skew=0",
      "hold": "hold=0"}),
])
def test_the_probe_reports_the_cell_the_fake_was_configured_with(tmp_path, cell, expect):
    out, result = _run(tmp_path, "--only", "probe", matrix=cell, timeout=120)
    probe = _probe_rows(result)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert {k: probe[k]["measured"] for k in expect} == expect
    assert all(probe[k]["result"] == "PASS" for k in expect)


def test_the_probe_sees_cupti_13_0s_stale_graph_ids_in_a_second_activity_session(tmp_path):
    out, result = _run(tmp_path, "--only", "probe", "--probe-arg=--fake-graph-correlation-bug", timeout=120)
    probe = _probe_rows(result)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert probe["graph"]["measured"] == "graph=stale_after_first" and probe["graph"]["result"] == "PASS"
    assert result["probe"]["graph"]["session1"] == "matched"
    assert result["probe"]["graph"]["session2"].startswith("stale")


def test_cxx_only_runs_the_probe_and_the_driver_without_importing_gpuutil_or_torch(tmp_path):
    # As on a machine without Python.h: no gpuutil module, and torch must not be needed either.
    code = ("import runpy, sys; sys.modules['gpuutil'] = None; sys.modules['torch'] = None; "
            f"sys.argv = [{str(SCRIPT)!r}, '--self-test', '--cxx-only', '--out', {str(tmp_path)!r}]; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    env = dict(os.environ, GPUUTIL_FAKE_CUPTI=_fake_cupti())
    env.pop("GPUUTIL_CUPTI_LIBRARY", None)
    env.pop("GPUUTIL_FAKE_CUPTI_MATRIX", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    rows = json.loads((tmp_path / "gpu_check.json").read_text())["rows"]
    ran = {r["scenario"] for r in rows if r["result"] == "PASS"}
    assert ran == {"probe", "driver"}
    assert all("--cxx-only" in r["note"] for r in rows if r["result"] == "SKIP")


def test_gpu_check_refuses_an_unknown_scenario():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--self-test", "--only", "nope"],
        capture_output=True, text=True, env=dict(os.environ, GPUUTIL_FAKE_CUPTI=_fake_cupti()), timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("gpuutil: error: unknown scenario 'nope'")
