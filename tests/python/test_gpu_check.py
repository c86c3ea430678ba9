"""The GPU check (benchmarks/gpu_check.py) runs end to end here, against the
fake CUPTI and its simulated device (--self-test), so the script that will
run on a GPU machine cannot rot between the rare sessions that have one."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_live import _fake_cupti

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("torch")


def test_gpu_check_self_test_passes_every_scenario_that_does_not_need_the_hardware(tmp_path):
    fake = _fake_cupti()
    env = dict(os.environ, GPUUTIL_FAKE_CUPTI=fake)
    env.pop("GPUUTIL_CUPTI_LIBRARY", None)
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--self-test", "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    rows = result["rows"]
    assert not [r for r in rows if r["result"] == "FAIL"]
    skipped = {r["scenario"] for r in rows if r["result"] == "SKIP"}
    assert skipped == {"matmul", "compile", "nvml"}, skipped
    assert all(r["note"] for r in rows if r["result"] == "SKIP"), "every skip says why"
    ran = {r["scenario"] for r in rows if r["result"] == "PASS"}
    assert ran == {"dataloader", "item", "tiny", "graph", "profiler", "nccl", "driver"}
    # Every scenario that ran checked that nothing was lost, late or invalid.
    clean = {r["scenario"] for r in rows if r["check"] == "records lost/late/invalid" and r["result"] == "PASS"}
    assert clean == ran
    # The table comes last.
    assert out.stdout.strip().splitlines()[-1].startswith("| driver")


def test_gpu_check_refuses_an_unknown_scenario():
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--self-test", "--only", "nope"],
        capture_output=True, text=True, env=dict(os.environ, GPUUTIL_FAKE_CUPTI=_fake_cupti()), timeout=120,
    )
    assert out.returncode == 2
    assert "unknown scenario 'nope'" in out.stderr
