"""The LibTorch C++ training example (examples/libtorch) builds against the
installed torch with gpuutil's core, runs, and writes one report per step
with the planted input-pipeline stall in each step's host breakdown."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]


def test_libtorch_example_builds_runs_and_reports_each_step(tmp_path):
    if shutil.which("cmake") is None:
        pytest.fail("cmake is required (scripts/bootstrap.sh installs it)")
    import torch.utils

    build = REPO / "build" / "libtorch-example"  # reused between runs (incremental)
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(REPO / "examples" / "libtorch"), "-B", str(build), *gen,
                    "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"],
                   check=True, capture_output=True, text=True, timeout=600)
    built = subprocess.run(["cmake", "--build", str(build), "-j2"], capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    ours = [ln for ln in (built.stdout + built.stderr).splitlines() if "warning:" in ln and "train_libtorch" in ln]
    assert ours == []
    out = tmp_path / "steps.jsonl"
    run = subprocess.run([str(build / "train_libtorch"), "--steps", "4", "--loader-ms", "20", "--output", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    reports = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["steps"][0]["step"] for r in reports] == [0, 1, 2, 3]
    for r in reports:
        (host,) = r["steps"][0]["host"]
        assert sum(host["breakdown_ns"].values()) == host["wall_ns"]
        assert host["breakdown_ns"]["dataloader"] >= 18_000_000
        assert host["breakdown_ns"]["backward"] > 0
        assert host["breakdown_ns"]["optimizer"] > 0
