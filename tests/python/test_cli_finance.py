"""Tests of the summary's lead and the finance block (``gpuutil analyze``).

Pins: the text report leads with the top finding (before the step table)
and lists the other findings with evidence and fix; with $/GPU-hour and
units per step it shows cost, idle GPU time and cost per unit computed from
the report's own numbers; OEE = availability x performance x quality with
the playbook's definitions (availability = share of the time held in steps,
performance = MFU in steps; the Prometheus rules' definitions, pinned to
the same numbers in test_fleet_oee.py); bad finance inputs exit 2, and the
finance block is shown for gpuutil's own reports (a steps JSONL) too.
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
    summary = rep["summary"]
    held = summary["steps_wall_ns"] + summary["outside_steps_ns"]
    assert summary["outside_steps_ns"] > 0  # this trace has time outside steps: availability < 1
    assert f["availability"] == pytest.approx(summary["steps_wall_ns"] / held)
    # performance is MFU in steps, so availability x performance = MFU over the time held.
    assert f["performance_source"] == "MFU"
    assert f["performance"] == pytest.approx(dev["mfu"])
    assert f["oee"] == pytest.approx(dev["mfu"] * summary["steps_wall_ns"] / held * 0.9)


def test_cli_prints_the_finance_block(run_cli, trace):
    proc = run_cli("analyze", trace(RESNET), "--usd-per-gpu-hour", "2.5", "--tokens-per-step", "1e6",
                   "--quality", "0.98", "--flops-per-step", "3e12", "--peak-tflops", "125")
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout.split("Finance:")[1]
    assert re.search(r"GPU time [0-9.]+ GPU-h, idle [0-9.]+ GPU-h \([0-9.]+%\)", block)
    assert "effective cost per 1M tokens $" in block
    assert re.search(r"OEE [0-9.]+% = availability [0-9.]+% \(time held in steps\) x performance [0-9.]+% "
                     r"\(MFU in steps\) x quality 0.98", block)


def test_finance_block_is_shown_for_a_steps_jsonl(run_cli, trace, installed_gpuutil, tmp_path):
    """gpuutil's own reports get the finance block the trace gets (it was
    silently left out), with the same figures."""
    import json

    rep = installed_gpuutil.analyze(trace(RESNET), flops_per_step=3e12, peak_tflops=125)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(rep))
    args = ("--usd-per-gpu-hour", "2.5", "--quality", "0.5")
    from_report = run_cli("analyze", path, *args)
    assert from_report.returncode == 0, from_report.stderr
    assert "Finance:" in from_report.stdout
    doc = json.loads(run_cli("analyze", path, "--json", *args).stdout)
    expected = finance_figures(rep, FinanceInputs(usd_per_gpu_hour=2.5, quality=0.5))
    assert doc["finance"]["oee"] == pytest.approx(expected["oee"])
    assert doc["finance"]["cost_usd"] == pytest.approx(expected["cost_usd"])


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
