"""One run, one OEE: gpuutil.finance, `gpuutil analyze` (its finance block)
and the Prometheus rules (deploy/prometheus/gpuutil-rules.yml, evaluated by
the real ``promtool``) give the same OEE and the same three factors for the
same run (the ResNet-50 trace, analysed with FLOPs so MFU is known).

The rules read the run as Prometheus would have scraped it: the exporter's
own counters for the run (PrometheusMetrics over the report, quality from
its useful-steps counter), replayed linearly over ten minutes (every time
counter scaled by ten minutes over the time the run held its GPU: ratios of
rates are what the rules compute, so a faster replay changes none of
them), and the GPU attached for those ten minutes (gpuutil_gpu_info and
the attached-seconds counter, which a live profile exports itself).
"""

from __future__ import annotations

import json

import pytest

from gpuutil.export.prometheus_families import ReportTotals
from gpuutil.finance import FinanceInputs, finance_figures

from fleet_promtool import rule_test, series

RESNET = "kineto_resnet50_nw4_v100.json.gz"
FLOPS, PEAK_TFLOPS, QUALITY = "3e12", "125", 0.75
REPLAY_S = 600  # ten one-minute samples


def _replayed(report, held_s: float):
    """promtool input series of the run's counters, replayed over REPLAY_S."""
    metrics = ReportTotals(host="n1", job_id="resnet", gpu_uuids=["GPU-0"])
    metrics.add(report)
    metrics.count(useful_steps=QUALITY * report["summary"]["steps"], rank=0)
    k = REPLAY_S / held_s
    out = []
    for name, kind, _, samples in metrics.families():
        for labels, value in samples:
            if kind == "counter":
                # steps and useful steps are counts, not time: scaled alike, their ratio is kept
                out.append({"series": series(name, labels), "values": f"0+{value * k / 10!r}x10"})
            elif name == "gpuutil_peak_flops":
                out.append({"series": series(name, labels), "values": f"{value!r}x10"})
    gpu = {"job_id": "resnet", "rank": "0", "host": "n1", "device": "0", "UUID": "GPU-0"}
    out.append({"series": series("gpuutil_gpu_info", {**gpu, "parent_UUID": ""}), "values": "1x10"})
    out.append({"series": series("gpuutil_gpu_attached_seconds_total", gpu), "values": "0+60x10"})
    return out


def _close_to(expr: str, value: float) -> dict:
    return {"expr": f"abs({expr} - {value!r}) < bool 1e-9", "eval_time": "10m",
            "exp_samples": [{"labels": '{job_id="resnet"}', "value": 1}]}


def test_finance_analyze_and_the_rules_give_the_same_oee_for_one_run(trace, installed_gpuutil, run_cli, tmp_path):
    path = trace(RESNET)
    report = installed_gpuutil.analyze(path, flops_per_step=float(FLOPS), peak_tflops=float(PEAK_TFLOPS))
    summary = report["summary"]
    held_s = (summary["steps_wall_ns"] + summary["outside_steps_ns"]) / 1e9
    assert summary["outside_steps_ns"] > 0  # availability below 1: the factor is exercised

    fin = finance_figures(report, FinanceInputs(quality=QUALITY))
    proc = run_cli("analyze", path, "--json", "--flops-per-step", FLOPS, "--peak-tflops", PEAK_TFLOPS,
                   "--quality", str(QUALITY))
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)["finance"]
    assert 0 < fin["availability"] < 1 and 0 < fin["performance"] < 1 and fin["quality"] == QUALITY
    for key in ("availability", "performance", "quality", "oee"):
        assert cli[key] == pytest.approx(fin[key], rel=1e-12), key
    text = run_cli("analyze", path, "--flops-per-step", FLOPS, "--peak-tflops", PEAK_TFLOPS,
                   "--quality", str(QUALITY)).stdout
    assert f"OEE {100 * fin['oee']:.1f}% = availability {100 * fin['availability']:.1f}%" in text

    rc, out = rule_test(tmp_path, [{
        "interval": "1m",
        "input_series": _replayed(report, held_s),
        "promql_expr_test": [
            _close_to("job_id:gpuutil_availability_ratio:rate5m", fin["availability"]),
            _close_to("job_id:gpuutil_performance_ratio:rate5m", fin["performance"]),
            _close_to("job_id:gpuutil_quality_ratio:rate5m", fin["quality"]),
            _close_to("job_id:gpuutil_oee_ratio:rate5m", fin["oee"]),
            # availability x performance is MFU over the time held
            _close_to("job_id:gpuutil_mfu_ratio:rate5m", fin["availability"] * fin["performance"]),
        ],
    }])
    assert rc == 0, out
