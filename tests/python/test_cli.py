"""Tests of the `gpuutil` command line (the installed console script).

Pins the table output (step rows, summary, top finding, diagnostics lines),
--json/--indent/-o, multi-rank device labels, MFU with --flops-per-step, and
the error contract: an unreadable input gives exit code 2 and exactly one
stderr line "gpuutil: error: ...", bad arguments exit 2 through argparse.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import all_traces

H100 = "tracelens_h100_bert_small_inference.json.gz"
RESNET = "kineto_resnet50_nw4_v100.json.gz"
RANKS = ["hta_sampled_rank0.json.gz", "hta_sampled_rank1.json.gz"]
NO_STEPS = "hta_alexnet_a100_sync.json.gz"


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpuutil: error:"), lines[0]
    return lines[0]


def test_version(run_cli, installed_gpuutil):
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"gpuutil {installed_gpuutil.__version__}"


def test_table_output(run_cli, trace, installed_gpuutil):
    path = trace(RESNET)
    rep = installed_gpuutil.analyze(path)
    proc = run_cli("analyze", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress line when stderr is not a TTY
    out = proc.stdout
    header = next(line for line in out.splitlines() if line.lstrip().startswith("step"))
    for col in ("device", "wall ms", "compute %", "comm %", "memory %", "idle %", "kernels", "SM eff est", "MFU"):
        assert col in header, col
    assert rep["steps"], "the ResNet trace has ProfilerStep ranges"
    for st in rep["steps"]:
        for d in st["devices"]:
            row = re.compile(rf"^\s*{st['step']}\s+{d['device']}\s+{d['wall_ns'] / 1e6:.3f}\s", re.M)
            assert row.search(out), f"no row for step {st['step']} device {d['device']}\n{out}"
    assert "Summary device" in out
    assert "Time outside steps:" in out
    top = rep["summary"]["top_finding"]
    if top is None:
        assert "\nNo finding\n" in out
    else:
        assert f"Top finding: {top['title']} \u2014 {top['fix']}" in out
    assert "Top finding" in out or "No finding" in out


def test_table_names_the_workload_and_inference_gets_an_inference_fix(run_cli, trace):
    """BERT inference: the table says inference and leads with a batching /
    CUDA-graph fix, never the training optimizer fix."""
    out = run_cli("analyze", trace(H100)).stdout
    lines = out.splitlines()
    assert lines[1].startswith("workload: inference (no backward or optimizer ops"), lines[1]
    top = next(line for line in lines if line.startswith("Top finding:"))
    assert "CUDA graphs" in top or "batching" in top, top
    assert "optimizer" not in top.split("\u2014", 1)[1], top
    training = run_cli("analyze", trace(RESNET)).stdout.splitlines()
    assert training[1].startswith("workload: training ("), training[1]


def test_table_has_top_finding_for_some_trace(run_cli, traces, installed_gpuutil):
    """At least one real trace yields a finding, and the table prints it."""
    for path in all_traces():
        top = installed_gpuutil.analyze(path)["summary"]["top_finding"]
        if top is not None:
            proc = run_cli("analyze", path)
            assert proc.returncode == 0
            assert f"Top finding: {top['title']}" in proc.stdout
            return
    pytest.fail("no trace produced any finding")


def test_diagnostics_lines(run_cli, trace, installed_gpuutil):
    path = trace(NO_STEPS)
    rep = installed_gpuutil.analyze(path)
    proc = run_cli("analyze", path)
    assert proc.returncode == 0, proc.stderr
    for d in rep["diagnostics"]:
        assert f"{d['severity']}: {d['name']} ({d['count']}): {d['description']}" in proc.stdout
    assert re.search(r"^warning: steps_missing \(\d+\): no ProfilerStep#N ranges", proc.stdout, re.M)


def test_every_trace_renders(traces, installed_gpuutil):
    from gpuutil._table import render_report

    for path in all_traces():
        text = render_report(installed_gpuutil.analyze(path))
        assert text.endswith("\n")
        assert ("Top finding:" in text) or ("No finding" in text), path.name


def test_json_output(run_cli, trace, installed_gpuutil):
    path = trace(H100)
    proc = run_cli("analyze", path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1  # one JSON Lines record
    rep = json.loads(proc.stdout)
    assert rep["schema"] == "gpuutil.report/1"
    assert rep == installed_gpuutil.analyze(path)


def test_json_indent(run_cli, trace):
    proc = run_cli("analyze", trace(H100), "--json", "--indent", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('{\n  "schema": "gpuutil.report/1"')
    json.loads(proc.stdout)
    # --indent alone implies --json
    proc2 = run_cli("analyze", trace(H100), "--indent", "2")
    assert proc2.stdout == proc.stdout


def test_output_file(run_cli, trace, tmp_path):
    out = tmp_path / "report.json"
    proc = run_cli("analyze", trace(H100), "--json", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert json.loads(out.read_text())["schema"] == "gpuutil.report/1"
    table = tmp_path / "report.txt"
    proc = run_cli("analyze", trace(H100), "--output", table)
    assert proc.returncode == 0
    assert "Time outside steps:" in table.read_text()


def test_output_file_unwritable(run_cli, trace, tmp_path):
    proc = run_cli("analyze", trace(H100), "-o", tmp_path / "no" / "such" / "dir" / "r.txt")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuutil: error: cannot write ")


def test_multi_rank(run_cli, trace):
    paths = [trace(n) for n in RANKS]
    proc = run_cli("analyze", *paths, "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    ranks = {d["rank"] for st in rep["steps"] for d in st["devices"]}
    assert ranks == {0, 1}
    table = run_cli("analyze", *paths)
    assert table.returncode == 0
    assert re.search(r"^\s*\d+\s+0:\d+\s", table.stdout, re.M)
    assert re.search(r"^\s*\d+\s+1:\d+\s", table.stdout, re.M)


def test_flops_per_step_gives_mfu(run_cli, trace):
    proc = run_cli("analyze", trace(H100), "--json", "--flops-per-step", "1e9", "--dtype", "bf16")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    mfus = [d["mfu"] for st in rep["steps"] for d in st["devices"] if d["kernels"] > 0]
    assert mfus and all(m is not None and 0 < m <= 1 for m in mfus), mfus
    table = run_cli("analyze", trace(H100), "--flops-per-step", "1e9")
    rows = re.findall(r"^\s*\d+\s+\d+\s+\d+\.\d{3}\s.*$", table.stdout, re.M)
    assert rows, table.stdout
    assert all(re.search(r"\d+\.\d%$", r) for r in rows), rows  # the MFU column is filled


def test_missing_file(run_cli, tmp_path):
    missing = tmp_path / "missing.json.gz"
    line = _one_error_line(run_cli("analyze", missing))
    assert line.startswith(f"gpuutil: error: cannot read {missing}: ")


def test_truncated_gzip(run_cli, trace, tmp_path):
    bad = tmp_path / "truncated.json.gz"
    bad.write_bytes(trace(RESNET).read_bytes()[:4096])
    line = _one_error_line(run_cli("analyze", bad))
    assert f"cannot read {bad}: " in line


def test_invalid_json(run_cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ this is not json")
    line = _one_error_line(run_cli("analyze", bad))
    assert f"cannot read {bad}: " in line


def test_unreadable_among_several(run_cli, trace, tmp_path):
    missing = tmp_path / "rank1.json.gz"
    line = _one_error_line(run_cli("analyze", trace(RANKS[0]), missing, "--json"))
    assert str(missing) in line


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["analyze"],
        ["analyze", "x.json", "--dtype", "float13"],
        ["analyze", "x.json", "--flops-per-step", "-5"],
        ["analyze", "x.json", "--flops-per-step", "lots"],
        ["analyze", "x.json", "--peak-tflops", "0"],
        ["analyze", "x.json", "--indent", "-1"],
        ["frobnicate"],
    ],
)
def test_bad_arguments_exit_2(run_cli, args):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "usage:" in proc.stderr


def test_python_dash_m(trace):
    proc = subprocess.run(
        [sys.executable, "-m", "gpuutil", "analyze", trace(H100), "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "gpuutil.report/1"


def test_progress_line_only_on_tty(monkeypatch, capsys, tmp_path, trace):
    """Files over 5 MB announce themselves on stderr, but only on a TTY."""
    import gpuutil.cli as cli

    big = tmp_path / "big.json"
    big.write_bytes(b" " * (6 * 1024 * 1024))
    small = trace(H100)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    cli._progress([str(big), str(small)])
    err = capsys.readouterr().err
    assert err.splitlines() == [f"importing {big} (6 MB)..."]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    cli._progress([str(big)])
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- argv fast path

# Every form the fast path takes must parse to exactly argparse's attributes.
FAST_FORMS = [
    ["analyze", "t.json"],
    ["analyze", "a.json", "b.json.gz", "-"],
    ["analyze", "t.json", "--json"],
    ["analyze", "--json", "t.json"],
    ["analyze", "t.json", "--indent", "2", "-o", "out.json"],
    ["analyze", "t.json", "--indent=0", "--output=out.json", "--dtype", "fp8"],
    ["analyze", "t.json", "--flops-per-step", "1.5e12", "--peak-tflops=312"],
    ["analyze", "t.json", "--usd-per-gpu-hour", "2.5", "--samples-per-step", "256",
     "--tokens-per-step=1e6", "--quality", "0.9"],
    ["analyze", "--dtype", "fp32", "--json", "x.json", "y.json"],
]

# Forms it leaves to argparse: argparse either refuses them (exit 2) or
# parses them in a way the fast path does not reproduce (abbreviations).
ARGPARSE_FORMS = [
    ["analyze"],
    ["analyze", "t.json", "--js"],                # abbreviation
    ["analyze", "a.json", "--json", "b.json"],    # traces in two runs
    ["analyze", "t.json", "--json", "--json"],    # repeated
    ["analyze", "t.json", "-o", "a", "--output", "b"],
    ["analyze", "t.json", "-o=out.json"],         # short option with '='
    ["analyze", "t.json", "--indent", "17"],      # bad value
    ["analyze", "t.json", "--indent"],            # missing value
    ["analyze", "t.json", "--indent", "-1"],
    ["analyze", "t.json", "--dtype", "fp7"],
    ["analyze", "t.json", "--quality", "1.5"],
    ["analyze", "t.json", "--json=1"],
    ["analyze", "t.json", "--"],
    ["analyze", "-h"],
    ["analyze", "t.json", "--unknown"],
    ["--version"],
    ["compare", "a", "b"],
]


@pytest.mark.parametrize("argv", FAST_FORMS, ids=lambda a: " ".join(a))
def test_fast_analyze_args_equal_argparse(argv, installed_gpuutil):
    from gpuutil import cli

    fast = cli._fast_analyze_args(argv)
    assert fast is not None, argv
    assert vars(fast) == vars(cli.build_parser("analyze").parse_args(argv))


@pytest.mark.parametrize("argv", ARGPARSE_FORMS, ids=lambda a: " ".join(a))
def test_fast_analyze_args_leave_the_rest_to_argparse(argv, installed_gpuutil):
    from gpuutil import cli

    assert cli._fast_analyze_args(argv) is None


def test_analyze_starts_without_argparse(tmp_path, installed_gpuutil):
    # A whole `gpuutil analyze TRACE --json -o OUT` run imports no argparse
    # (its imports are ~12 ms of start-up); a bad value still gets
    # argparse's usage error.
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, '
                     '"ts": 10, "dur": 5}]}')
    out = tmp_path / "r.json"
    code = ("import sys; from gpuutil.cli import main; "
            f"rc = main(['analyze', {str(trace)!r}, '--json', '--indent', '1', '-o', {str(out)!r}]); "
            "print(rc, 'argparse' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["0", "False"], proc.stderr
    assert json.loads(out.read_text())["schema"].startswith("gpuutil.report/")
    bad = subprocess.run([sys.executable, "-m", "gpuutil", "analyze", str(trace), "--indent", "17"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "must be between 0 and 16" in bad.stderr


def test_the_largest_idle_cause_of_a_step_is_never_the_kernel_gap():
    # Issue 26: sub-20 us gaps between queued kernels (idle_kernel_gap) are
    # the device's own turnaround, never "the" cause of a step's idle.
    from gpuutil import _table

    b = {"compute": 900, "communication": 0, "memory": 0, "idle_dataloader": 0, "idle_host_sync": 0,
         "idle_collective": 0, "idle_launch": 20, "idle_host": 10, "idle_dependency": 0, "idle_unattributed": 0,
         "idle_kernel_gap": 70}
    report = {"steps": [{"step": 1, "devices": [{"device": 0, "rank": 0, "wall_ns": 1000, "idle_ns": 100,
                                                 "breakdown_ns": b, "kernels": 5, "sm_efficiency_est": None,
                                                 "mfu": None}]}],
              "summary": {"devices": []}, "sources": []}
    row = next(line for line in _table.step_table(report) if line.lstrip().startswith("1 "))
    assert "launch 2.0%" in row, row
    assert "kernel_gap" not in row
