"""Tests of the regression gate, ``gpuutil compare`` (python/gpuutil/compare.py).

Pins the exit-code contract a CI job relies on: 1 on a 10% step-time
regression, 0 on differences under the threshold, 2 on unreadable input or
a gated metric that is missing; that a report JSON and a steps JSONL of the
same run give the same metrics; the percentage-point rule for ratio metrics;
and that the table names the regressed metric.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict

import pytest

from gpuutil import compare

RESNET = "kineto_resnet50_nw4_v100.json.gz"


@pytest.fixture(scope="module")
def base_report(trace, installed_gpuutil) -> Dict[str, Any]:
    return installed_gpuutil.analyze(trace(RESNET))


def _scaled(report: Dict[str, Any], factor: float) -> Dict[str, Any]:
    """The same run with every step and device time stretched by factor (idle grows)."""
    r = copy.deepcopy(report)
    for step in r["steps"]:
        step["wall_ns"] = int(step["wall_ns"] * factor)
        for d in step["devices"]:
            extra = int(d["wall_ns"] * factor) - d["wall_ns"]
            d["wall_ns"] += extra
            d["breakdown_ns"]["idle_host"] += extra
    return r


def _write(tmp_path: Path, name: str, report: Dict[str, Any]) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(report))
    return p


def _write_jsonl(tmp_path: Path, name: str, report: Dict[str, Any]) -> Path:
    p = tmp_path / name
    with p.open("w") as f:
        for step in report["steps"]:
            line = dict(report, steps=[step])
            f.write(json.dumps(line) + "\n")
    return p


def test_ten_percent_step_time_regression_exits_1(run_cli, tmp_path, base_report):
    base = _write(tmp_path, "base.json", base_report)
    cur = _write(tmp_path, "cur.json", _scaled(base_report, 1.10))
    proc = run_cli("compare", base, cur, "--max-regression", "5")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    row = next(line for line in proc.stdout.splitlines() if line.startswith("step_wall_p50_ms"))
    assert "REGRESSION" in row
    assert "+10.00%" in row
    assert "FAIL: step_wall_p50_ms" in proc.stdout


def test_difference_under_threshold_exits_0(run_cli, tmp_path, base_report):
    base = _write(tmp_path, "base.json", base_report)
    cur = _write(tmp_path, "cur.json", _scaled(base_report, 1.03))
    proc = run_cli("compare", base, cur, "--max-regression", "5")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "PASS" in proc.stdout.splitlines()[-1]


def test_improvement_is_not_a_regression(run_cli, tmp_path, base_report):
    base = _write(tmp_path, "base.json", _scaled(base_report, 1.5))
    cur = _write(tmp_path, "cur.json", base_report)
    assert run_cli("compare", base, cur, "--max-regression", "1").returncode == 0


def test_jsonl_run_and_report_give_the_same_metrics(tmp_path, base_report):
    from_report = compare.run_metrics(compare.load_run(str(_write(tmp_path, "r.json", base_report))))
    from_jsonl = compare.run_metrics(compare.load_run(str(_write_jsonl(tmp_path, "steps.jsonl", base_report))))
    assert from_report == from_jsonl
    assert from_report["step_wall_p50_ms"] == pytest.approx(base_report["summary"]["step_wall_p50_ns"] / 1e6)


def test_jsonl_against_report_gates(run_cli, tmp_path, base_report):
    base = _write_jsonl(tmp_path, "base.jsonl", base_report)
    cur = _write(tmp_path, "cur.json", _scaled(base_report, 1.10))
    assert run_cli("compare", base, cur, "--max-regression", "5").returncode == 1


def test_trace_files_are_analysed_on_the_fly(run_cli, trace):
    p = trace(RESNET)
    proc = run_cli("compare", p, p)
    assert proc.returncode == 0, proc.stderr
    assert "step_wall_p50_ms" in proc.stdout


def test_ratio_metrics_gate_in_percentage_points(tmp_path, base_report):
    cur = copy.deepcopy(base_report)
    for step in cur["steps"]:
        for d in step["devices"]:
            moved = d["wall_ns"] // 10  # 10 points of wall from compute... to dataloader idle
            take = min(moved, d["breakdown_ns"]["compute"])
            d["breakdown_ns"]["compute"] -= take
            d["breakdown_ns"]["idle_dataloader"] += take
    b = compare.run_metrics([base_report])
    c = compare.run_metrics([cur])
    diffs = {d.metric: d for d in compare.diff_metrics(b, c, ("idle_dataloader_pct", "compute_pct"), 5.0)}
    assert diffs["idle_dataloader_pct"].change == pytest.approx(c["idle_dataloader_pct"] - b["idle_dataloader_pct"])
    assert diffs["idle_dataloader_pct"].change > 5
    assert diffs["idle_dataloader_pct"].regressed
    assert diffs["compute_pct"].regressed  # lower compute share is worse
    assert not diffs["busy_pct"].regressed  # not gated


def test_metric_option_selects_the_gate(run_cli, tmp_path, base_report):
    base = _write(tmp_path, "base.json", base_report)
    cur = _write(tmp_path, "cur.json", _scaled(base_report, 1.10))
    # Gating only on the communication share: the stretched run is no worse there.
    proc = run_cli("compare", base, cur, "--metric", "communication_pct", "--max-regression", "5")
    assert proc.returncode == 0, proc.stdout
    proc = run_cli("compare", base, cur, "--metric", "idle_host_pct", "--metric", "step_wall_mean_ms", "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert set(doc["regressed"]) == {"idle_host_pct", "step_wall_mean_ms"}


def test_unreadable_input_exits_2(run_cli, tmp_path, base_report):
    good = _write(tmp_path, "base.json", base_report)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": "gpuutil.report/1", "steps": []}\nnot json\n')
    for other in (tmp_path / "missing.json", bad):
        proc = run_cli("compare", good, other)
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.startswith("gpuutil: error: cannot read")
    notreport = _write(tmp_path, "x.json", {"hello": 1})
    assert run_cli("compare", good, notreport).returncode == 2


def test_missing_gated_metric_exits_2(run_cli, tmp_path, base_report):
    base = _write(tmp_path, "base.json", base_report)
    proc = run_cli("compare", base, base, "--metric", "mfu_pct")
    assert proc.returncode == 2
    assert "mfu_pct is not available" in proc.stderr
