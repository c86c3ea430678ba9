"""examples/train.py: each planted problem shows up in its reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train.py"


def run_example(tmp_path, *flags):
    out = tmp_path / "steps.jsonl"
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "5", "--output", str(out), *flags],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[-1]["schema"] == "gpuutil.run/1"  # the run record, written at stop
    return proc.stdout, lines[:-1]


def main_thread(report):
    return max(report["steps"][0]["host"], key=lambda h: h["breakdown_ns"]["optimizer"])


def test_planted_slow_loader_is_the_top_finding(tmp_path):
    stdout, reports = run_example(tmp_path, "--slow-loader-ms", "5")
    assert len(reports) == 5
    assert "top finding: The training thread waits for the next batch" in stdout, stdout  # the library's finding
    assert "(host_dataloader)" in stdout
    for r in reports:
        assert main_thread(r)["breakdown_ns"]["dataloader"] >= 8 * 5 * 1_000_000 * 0.8


def test_planted_item_names_aten_item(tmp_path):
    _, reports = run_example(tmp_path, "--item")
    for r in reports[1:]:
        culprits = [c["name"] for c in main_thread(r)["culprits"]["host_sync"]]
        assert culprits[:1] == ["aten::item"]


def test_planted_tiny_batch_runs_many_short_steps(tmp_path):
    _, reports = run_example(tmp_path, "--tiny-batch")
    assert len(reports) == 5
    # Launch-bound on a GPU; on CPU each step is short and fully accounted.
    for r in reports:
        h = main_thread(r)
        assert sum(h["breakdown_ns"].values()) == h["wall_ns"]
        assert h["breakdown_ns"]["forward"] > 0
