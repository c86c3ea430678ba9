"""Reading a run from a file (python/gpuutil/_run_file.py), as `gpuutil
analyze`, `compare` and `export html|prometheus` do.

Pins: a steps JSONL whose final line was torn by a crash is read (the good
lines used, one stderr warning, a `torn_final_line` diagnostic in the
merged report), while a bad line in the middle or a torn line with nothing
before it still fails naming the line; JSON nested too deeply for Python's
parser is one error line, never a traceback; a report written with
`--indent` is read whole; and a trace is handed to the C++ analyzer by
path, never parsed in Python (peak RSS close to `analyze`'s).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from gpuutil import compare

RESNET = "kineto_resnet50_nw4_v100.json.gz"
LARGEST = "hta_train_v100_dataloader_nccl_rank1.json.gz"


@pytest.fixture(scope="module")
def report(trace, installed_gpuutil) -> Dict[str, Any]:
    return installed_gpuutil.analyze(trace(RESNET))


def _lines(report: Dict[str, Any]) -> List[str]:
    """The run as a live run's steps.jsonl lines: one report per step."""
    return [json.dumps(dict(report, steps=[step])) for step in report["steps"]]


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpuutil: error: "), proc.stderr
    return proc.stderr


def test_a_torn_final_line_is_skipped_with_one_warning_and_a_diagnostic(run_cli, tmp_path, report):
    lines = _lines(report)
    torn = tmp_path / "steps.jsonl"
    torn.write_text("\n".join(lines) + "\n" + lines[0][:57])  # a crash mid-write: no final newline
    whole = tmp_path / "whole.jsonl"
    whole.write_text("\n".join(lines) + "\n")
    n = len(lines) + 1
    warning = f"gpuutil: warning: {torn}: skipped the torn final line {n} (57 bytes, no final newline; it is not JSON"

    proc = run_cli("analyze", "--json", torn)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(warning), proc.stderr
    merged = json.loads(proc.stdout)
    assert len(merged["steps"]) == len(lines)
    diag = next(d for d in merged["diagnostics"] if d["name"] == "torn_final_line")
    assert diag["severity"] == "warning" and diag["count"] == 1
    assert diag["example"].startswith(f"{torn} line {n}: 57 bytes, no final newline; it is not JSON")
    assert set(diag) == {"name", "severity", "count", "description", "example"}  # the registry's shape
    without = json.loads(run_cli("analyze", "--json", whole).stdout)
    assert merged["steps"] == without["steps"] and merged["summary"] == without["summary"]

    table = run_cli("analyze", torn)
    assert table.returncode == 0 and table.stderr.startswith(warning)
    assert "warning: torn_final_line (1):" in table.stdout

    proc = run_cli("compare", whole, torn)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(warning) and proc.stderr.count("\n") == 1
    assert compare.run_metrics(compare.load_run(str(torn))) == compare.run_metrics(compare.load_run(str(whole)))
    for fmt in ("html", "prometheus"):
        proc = run_cli("export", fmt, torn, "-o", tmp_path / f"out.{fmt}")
        assert proc.returncode == 0 and proc.stderr.startswith(warning), (fmt, proc.stderr)
    assert "torn_final_line" in (tmp_path / "out.html").read_text()


def test_a_bad_line_in_the_middle_or_a_torn_line_alone_still_fails(run_cli, tmp_path, report):
    lines = _lines(report)
    middle = tmp_path / "middle.jsonl"
    middle.write_text(lines[0] + "\n" + lines[1][:57] + "\n" + lines[2] + "\n")
    alone = tmp_path / "alone.jsonl"
    alone.write_text(lines[0][:57])
    garbage_last = tmp_path / "garbage_last.jsonl"  # complete (newline-terminated) but not JSON
    garbage_last.write_text(lines[0] + "\n" + "not json\n")
    for path, line in ((middle, 2), (alone, 1), (garbage_last, 2)):
        for argv in (("compare", path, path), ("analyze", path), ("export", "prometheus", path)):
            err = _one_error_line(run_cli(*argv))
            assert f"cannot read {path}: line {line} is not JSON" in err, (argv, err)


@pytest.mark.parametrize("kind", ["report", "report-parseable", "trace"])
def test_json_nested_too_deeply_is_one_error_line_not_a_traceback(run_cli, tmp_path, report, kind):
    """Deeper than Python's parser goes (100,000), or parseable (900 levels
    in a key no reader checks) but deep enough for the readers after it,
    which recurse in Python, to overflow."""
    path = tmp_path / f"deep-{kind}.json"
    if kind == "report":  # looks like gpuutil's own output from its first bytes
        path.write_text(_lines(report)[0] + "\n" + '{"schema": "gpuutil.report/1", "steps": ' + "[" * 100_000 + "\n")
    elif kind == "report-parseable":
        path.write_text(_lines(report)[0] + "\n" + _lines(report)[1][:-1] + ', "extra": ' + "[" * 900 + "]" * 900
                        + "}\n")
    else:
        path.write_text("[" * 100_000)
    for argv in (("compare", path, path), ("analyze", path), ("analyze", "--json", path),
                 ("export", "html", path, "-o", tmp_path / "o.html"), ("export", "prometheus", path)):
        err = _one_error_line(run_cli(*argv))
        assert f"cannot read {path}" in err, (argv, err)
        if kind.startswith("report"):
            assert "line 2 is nested too deeply (over 100 levels of objects and arrays)" in err


def test_a_report_written_with_an_indent_is_read_whole(run_cli, tmp_path, trace, report):
    pretty = tmp_path / "pretty.json"
    assert run_cli("analyze", trace(RESNET), "--indent", "2", "-o", pretty).returncode == 0
    assert compare.load_run(str(pretty)) == [report]
    cut = tmp_path / "cut.json"
    text = pretty.read_text()
    cut.write_text(text[: len(text) // 2])
    err = _one_error_line(run_cli("compare", pretty, cut))
    assert f"cannot read {cut}: invalid JSON at line" in err


def test_a_trace_is_recognised_from_its_first_bytes(tmp_path, trace, report):
    from gpuutil import _run_file

    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(trace(RESNET).read_bytes()))
    assert not _run_file.is_reports_file(str(plain))
    assert not _run_file.is_reports_file(str(trace(RESNET)))
    own = tmp_path / "r.json"
    own.write_text(json.dumps(report))
    assert _run_file.is_reports_file(str(own))
    with pytest.raises(compare.RunError, match=r"^cannot read .*missing\.json: No such file or directory$"):
        compare.load_run(str(tmp_path / "missing.json"))


# Linux keeps a process's peak RSS across fork and exec, so a child forked
# from this (large) test process would report at least this process's RSS;
# a small Python process starts each measured command and reports it.
_MEASURE = ("import os, subprocess, sys\n"
            "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
            "err = p.stderr.read()\n"
            "_, status, usage = os.wait4(p.pid, 0)\n"
            "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n"
            "sys.stderr.buffer.write(err)\n")


def _peak_rss_mb(argv: List[str]) -> float:
    """Peak RSS of one command that exits 0 or 1 (compare: a regression)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, check=True)
    code, maxrss_kb = map(int, out.stdout.split())
    assert code in (0, 1), (argv, out.stderr)
    return maxrss_kb / 1024


def test_compare_and_exports_of_an_uncompressed_trace_need_about_what_analyze_needs(tmp_path, trace, report):
    """The trace goes to the C++ analyzer by path: no Python parse of the
    whole document on top (that was ~5x the trace's size;
    benchmarks/bench_compare_rss.py measures a 131 MB trace)."""
    big = tmp_path / "big.json"
    big.write_bytes(gzip.decompress(trace(LARGEST).read_bytes()))
    size_mb = big.stat().st_size / 2**20
    assert size_mb > 25
    own = tmp_path / "r.json"
    own.write_text(json.dumps(report))
    gpuutil = [sys.executable, "-m", "gpuutil"]
    analyze = _peak_rss_mb([*gpuutil, "analyze", str(big), "-o", os.devnull])
    for argv in (["compare", str(big), str(own), "--metric", "busy_pct"],
                 ["export", "prometheus", str(big), "-o", os.devnull],
                 ["export", "html", str(big), "-o", os.devnull]):
        rss = _peak_rss_mb([*gpuutil, *argv])
        assert rss < analyze + size_mb / 2, (argv, rss, analyze, size_mb)
