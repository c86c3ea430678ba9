"""What the CLI and exporters print, checked as issue 14 asked: trace
strings cannot drive the terminal, an impossible MFU is flagged with its
likely causes, hints name the CLI's flags, finance figures are in --json,
and every Prometheus HELP says whether the value is whole-run or last-step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuutil._table import render_report, sanitize
from gpuutil.export import prometheus

ROOT = Path(__file__).resolve().parents[2]
RESNET = ROOT.parent / "shared" / "traces" / "kineto_resnet50_nw4_v100.json.gz"


def _needs_resnet() -> None:
    if not RESNET.exists():
        pytest.skip(f"the shared real traces are not at {RESNET.parent} (a clone without ../shared)")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuutil", *args], capture_output=True, text=True, cwd=ROOT)


def test_control_characters_from_trace_strings_never_reach_the_terminal():
    evil = "aten::evil\x1b[2J\x1b]0;owned\x07\r\x9b31m"
    assert sanitize(evil) == "aten::evil?[2J?]0;owned???31m"
    report = {
        "sources": [{"path": "t\x1b[31m.json", "rank": 0, "steps_source": "ProfilerStep"}],
        "steps": [], "summary": {"steps": 0, "devices": [], "trace_span_ns": 0, "outside_steps_ns": 0},
        "findings": [{"id": "host_sync", "title": "blocks in " + evil, "evidence": evil, "fix": "remove " + evil,
                      "recoverable_ns": 1, "share_of_wall": 0.1}],
        "diagnostics": [{"name": "event_malformed", "severity": "warning", "count": 1,
                         "description": "x", "example": evil}],
    }
    text = render_report(report)
    assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) < 0xA0 for c in text), repr(text)
    assert "aten::evil?[2J" in text


def test_an_mfu_above_100_percent_is_a_warning_naming_the_inputs_to_check():
    _needs_resnet()
    out = _cli("analyze", str(RESNET), "--flops-per-step", "1e16", "--dtype", "fp32")
    assert out.returncode == 0, out.stderr
    assert "warning: mfu_above_peak" in out.stdout
    assert "FLOPs per step, the dtype or the peak is wrong" in out.stdout
    assert "pass --peak-tflops" in out.stdout  # the CLI's flag, not the Python keyword


def test_a_peak_hint_on_the_command_line_names_the_flag():
    _needs_resnet()
    out = _cli("analyze", str(RESNET), "--flops-per-step", "1e12", "--dtype", "fp8")  # no fp8 peak on a V100
    assert out.returncode == 0, out.stderr
    assert "info: peak_unknown" in out.stdout and "(pass --peak-tflops)" in out.stdout
    assert "pass peak_tflops" not in out.stdout


def test_finance_figures_are_in_the_json_output():
    _needs_resnet()
    out = _cli("analyze", str(RESNET), "--json", "--usd-per-gpu-hour", "2.5", "--samples-per-step", "256")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["finance"]["gpu_hours"] > 0 and doc["finance"]["idle_gpu_hours"] >= 0
    plain = json.loads(_cli("analyze", str(RESNET), "--json").stdout)
    assert "finance" not in plain  # only when asked for


def test_every_prometheus_help_says_what_the_value_covers():
    pytest.importorskip("prometheus_client", reason="prometheus_client not installed (requirements-dev.txt)")
    report = {
        "schema": "gpuutil.report/1", "sources": [{"rank": 0}],
        "steps": [{"step": 0, "wall_ns": 10_000_000, "devices": [{
            "device": 0, "rank": 0, "wall_ns": 10_000_000, "busy_ns": 5_000_000, "kernels": 3, "mfu": 0.3,
            "breakdown_ns": {"compute": 5_000_000, "idle_dataloader": 5_000_000}, "health": {"power_w": 300.0}}]}],
        "findings": [{"id": "host_dataloader", "recoverable_ns": 5_000_000}],
    }
    metrics = prometheus.PrometheusMetrics(host="h")
    metrics.add(report)
    helps = [line for line in metrics.exposition().splitlines() if line.startswith("# HELP")]
    assert helps
    for line in helps:
        assert line.endswith(("[whole run]", "[last step]", "[newest cross-rank view]",
                              "[whole run, newest cross-rank view]")), line
    assert any("gpuutil_steps_total" in h and h.endswith("[whole run]") for h in helps)
    assert any("gpuutil_mfu_ratio" in h and h.endswith("[last step]") for h in helps)


def test_dash_reads_a_trace_from_standard_input_plain_or_gzip():
    trace = ROOT.parent / "shared" / "traces" / "hta_event_sync_a100.json.gz"
    if not trace.exists():
        pytest.skip(f"the shared real traces are not at {trace.parent} (a clone without ../shared)")
    import gzip

    gz = trace.read_bytes()
    direct = json.loads(_cli("analyze", "--json", str(trace)).stdout)
    for data in (gz, gzip.decompress(gz)):
        out = subprocess.run([sys.executable, "-m", "gpuutil", "analyze", "--json", "-"], input=data,
                             capture_output=True, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["sources"][0]["path"] == "<stdin>"
        assert doc["steps"] == direct["steps"]
