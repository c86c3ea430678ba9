"""Tests of the summary's lead and the finance block (``gpuutil analyze``).

Pins: the text report leads with the top finding (before the step table)
and lists the other findings with evidence and fix; with $/GPU-hour and
units per step it shows cost, idle GPU time and cost per unit computed from
the report's own numbers; OEE = availability x performance x quality with
performance = MFU while busy; bad finance inputs exit 2.
"""

from __future__ import annotations

import re

import pytest

from gpuutil.finance import FinanceInputs, finance_figures

RESNET = "kineto_resnet50_nw4_v100.json.gz"


def test_report_leads_with_the_top_finding(run_cli, trace, installed_gpuutil):
    path = trace(RESNET)
    rep = installed_gpuutil.analyze(path)
    out = run_cli("analyze", path).stdout
    top = rep["summary"]["top_finding"]
    assert top is not None
    lines = out.splitlines()
    top_idx = next(i for i, line in enumerate(lines) if line.startswith("Top finding:"))
    table_idx = next(i for i, line in enumerate(lines) if line.lstrip().startswith("step"))
    assert top_idx < table_idx
    assert top["title"] in lines[top_idx]
    if len(rep["findings"]) > 1:
        assert "Other findings:" in out
        assert rep["findings"][1]["fix"] in out


def test_finance_figures_follow_the_report(trace, installed_gpuutil):
    rep = installed_gpuutil.analyze(trace(RESNET), flops_per_step=3e12, peak_tflops=125)
    f = finance_figures(rep, FinanceInputs(usd_per_gpu_hour=3.0, samples_per_step=256, tokens_per_step=None,
                                           quality=0.9))
    dev = rep["summary"]["devices"][0]
    wall = dev["wall_ns"]
    idle = sum(v for k, v in dev["breakdown_ns"].items() if k.startswith("idle_"))
    assert f["gpu_hours"] == pytest.approx(wall / 3.6e12)
    assert f["idle_gpu_hours"] == pytest.approx(idle / 3.6e12)
    assert f["cost_usd"] == pytest.approx(3.0 * wall / 3.6e12)
    assert f["idle_cost_usd"] == pytest.approx(3.0 * idle / 3.6e12)
    steps = rep["summary"]["steps"]
    assert f["cost_per_sample_usd"] == pytest.approx(f["cost_usd"] / (steps * 256))
    assert f["availability"] == pytest.approx(1 - idle / wall)
    # performance is MFU while busy, so OEE = MFU x quality.
    assert f["performance_source"] == "MFU"
    assert f["oee"] == pytest.approx(dev["mfu"] * 0.9)


def test_cli_prints_the_finance_block(run_cli, trace):
    proc = run_cli("analyze", trace(RESNET), "--usd-per-gpu-hour", "2.5", "--tokens-per-step", "1e6",
                   "--quality", "0.98", "--flops-per-step", "3e12", "--peak-tflops", "125")
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout.split("Finance:")[1]
    assert re.search(r"GPU time [0-9.]+ GPU-h, idle [0-9.]+ GPU-h \([0-9.]+%\)", block)
    assert "effective cost per 1M tokens $" in block
    assert re.search(r"OEE [0-9.]+% = availability [0-9.]+% x performance [0-9.]+% \(MFU while busy\) "
                     r"x quality 0.98", block)


def test_no_finance_block_without_inputs(run_cli, trace):
    assert "Finance:" not in run_cli("analyze", trace(RESNET)).stdout


@pytest.mark.parametrize("args", [("--quality", "1.5"), ("--usd-per-gpu-hour", "-1"), ("--samples-per-step", "x")])
def test_bad_finance_inputs_exit_2(run_cli, trace, args):
    proc = run_cli("analyze", trace(RESNET), *args)
    assert proc.returncode == 2


def test_summary_shows_nvml_duty_cycle_next_to_exact_busy(trace, installed_gpuutil):
    from gpuutil._table import render_report

    rep = installed_gpuutil.analyze(trace(RESNET))
    for step in rep["steps"]:
        for d in step["devices"]:
            d["health"] = {"nvml_utilization_pct": 97.0}
    busy = rep["summary"]["devices"][0]["busy_pct"]
    line = next(x for x in render_report(rep).splitlines() if "NVML utilization.gpu" in x)
    assert f"NVML utilization.gpu 97.0% (duty cycle; exact busy {busy:.1f}%)" in line
