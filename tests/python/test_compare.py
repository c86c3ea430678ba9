"""Tests of the regression gate, ``gpuutil compare`` (python/gpuutil/compare.py).

Pins the exit-code contract a CI job relies on: 1 on a 10% step-time
regression, 0 on differences under the threshold, 2 on unreadable input or
a gated metric that cannot be compared (missing, NaN or infinite, a 0 ms
time) - the gate fails closed, never `n/a` or `+nan ... ok` with exit 0;
that a report JSON and a steps JSONL of the same run give the same metrics;
the percentage-point rule for ratio metrics; and that the table names the
regressed metric.
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


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpuutil: error: "), proc.stderr
    return proc.stderr


def test_zero_ms_steps_on_either_side_fail_the_gate_with_exit_2(run_cli, tmp_path, base_report):
    zero = copy.deepcopy(base_report)
    for step in zero["steps"]:
        step["wall_ns"] = 0
    good = _write(tmp_path, "good.json", base_report)
    bad = _write(tmp_path, "zero.json", zero)
    err = _one_error_line(run_cli("compare", bad, good))
    assert f"gated metric step_wall_p50_ms is 0 ms in BASE ({bad})" in err
    err = _one_error_line(run_cli("compare", good, bad))
    assert f"gated metric step_wall_p50_ms is 0 ms in CURRENT ({bad})" in err
    # Not gated, the same metric is only shown without a change.
    proc = run_cli("compare", bad, good, "--metric", "busy_pct")
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("step_wall_p50_ms"))
    assert row.split()[1:] == ["0.000", f"{compare.run_metrics([base_report])['step_wall_p50_ms']:.3f}", "-"]


def test_a_nan_literal_in_a_report_fails_instead_of_passing_the_gate(run_cli, tmp_path, base_report):
    nan = copy.deepcopy(base_report)
    for step in nan["steps"]:
        for d in step["devices"]:
            d["sm_efficiency_est"] = float("nan")  # json.dumps writes NaN; JSON has no such value
    good = _write(tmp_path, "good.json", base_report)
    bad = _write(tmp_path, "nan.json", nan)
    err = _one_error_line(run_cli("compare", good, bad, "--metric", "sm_efficiency_pct"))
    assert f"cannot read {bad}: line 1 is not JSON (NaN is not a JSON value)" in err


def test_a_metric_that_overflows_to_nan_or_infinity_fails_the_gate(run_cli, tmp_path, base_report):
    """Finite numbers a report may hold whose pooling overflows: the change
    is never printed as +nan/+inf, and the gate exits 2 naming the metric."""
    for values, word in (((1e308, 1e308), "inf"), ((1e308, -1e308), "nan")):
        cur = copy.deepcopy(base_report)
        devices = [d for step in cur["steps"] for d in step["devices"]]
        for d, v in zip(devices, values * len(devices)):
            d["sm_efficiency_est"] = v
        good = _write(tmp_path, "good.json", base_report)
        bad = _write(tmp_path, f"{word}.json", cur)
        err = _one_error_line(run_cli("compare", good, bad, "--metric", "sm_efficiency_pct"))
        assert f"gated metric sm_efficiency_pct is {word} in CURRENT ({bad}), not a finite number" in err
        proc = run_cli("compare", good, bad)  # not gated: shown as '-', never as a change
        assert proc.returncode == 0, proc.stderr
        row = next(line for line in proc.stdout.splitlines() if line.startswith("sm_efficiency_pct"))
        assert row.split()[2:] == ["-", "-"]
        assert "nan" not in proc.stdout and "inf" not in proc.stdout


def test_the_library_verdict_fails_closed_on_every_metric_it_cannot_compare():
    base = {m: 50.0 for m in compare.METRICS}
    cur = dict(base)
    cases = {"step_wall_p50_ms": (0.0, 10.0), "step_wall_mean_ms": (10.0, -1.0), "busy_pct": (float("nan"), 50.0),
             "idle_pct": (50.0, float("inf")), "mfu_pct": (None, 50.0), "compute_pct": (50.0, None)}
    for m, (b, c) in cases.items():
        base[m], cur[m] = b, c
    diffs = compare.diff_metrics(base, cur, tuple(cases), 5.0)
    by = {d.metric: d for d in diffs}
    for m in cases:
        assert by[m].change is None and by[m].problem and not by[m].regressed, by[m]
    assert by["busy_pct"].problem == "is nan in BASE, not a finite number"
    assert by["mfu_pct"].problem == "is not available in BASE"
    assert by["step_wall_p50_ms"].problem.startswith("is 0 ms in BASE")
    assert by["step_wall_mean_ms"].problem.startswith("is -1 ms in CURRENT")
    assert sorted(p.split()[2] for p in compare.gate_problems(diffs)) == sorted(cases)
    text = compare.render_diff(diffs, 5.0)
    assert text.splitlines()[-1].startswith("FAIL: gated metric step_wall_p50_ms is 0 ms in BASE")
    assert "PASS" not in text and "nan" not in text.splitlines()[2] and "+inf" not in text
    doc = compare.diffs_to_json(diffs, 5.0)
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN or Infinity in it
    assert sorted(doc["cannot_compare"]) == sorted(cases)
    with pytest.raises(ValueError, match="max_regression_pct"):
        compare.diff_metrics(base, cur, (), float("nan"))


def test_a_baseline_written_before_idle_kernel_gap_gates_without_a_false_regression(tmp_path, base_report):
    # A CI baseline from before issue 26 has no idle_kernel_gap: the time was
    # in idle_dependency. Comparing a current run against it must not read
    # kernel gaps as a new regression (the metric is unavailable in BASE).
    old = copy.deepcopy(base_report)
    for d in [d for s in old["steps"] for d in s["devices"]]:
        d["breakdown_ns"]["idle_dependency"] += d["breakdown_ns"].pop("idle_kernel_gap")
    assert base_report["summary"]["devices"][0]["breakdown_ns"]["idle_kernel_gap"] > 0  # ResNet has some
    base_m, cur_m = compare.run_metrics([old]), compare.run_metrics([base_report])
    assert base_m["idle_kernel_gap_pct"] is None
    assert cur_m["idle_kernel_gap_pct"] > 0
    diffs = {d.metric: d for d in compare.diff_metrics(base_m, cur_m, ["step_wall_p50_ms"], 5.0)}
    assert diffs["idle_kernel_gap_pct"].problem == "is not available in BASE"
    assert not diffs["idle_kernel_gap_pct"].regressed
    assert compare.gate_problems(list(diffs.values())) == []
    assert not any(d.regressed for d in diffs.values())
