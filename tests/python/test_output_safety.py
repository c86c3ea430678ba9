"""Text output cannot be driven by the data it prints (issue 32, item 7):
a newline or an escape sequence in a device, kernel, thread or
record_function name neither splits a table line nor reaches the terminal,
in `gpuutil analyze`'s table, in `gpuutil.format()` of a live summary, and
in the CLI's error lines, whose file names come from the user's shell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gpuutil
from gpuutil._table import render_report

EVIL = "evil\x1b[2J\nsplit\r\x07\x9b31m\tname"


def _controls(text: str) -> list:
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]


def _trace(tmp_path: Path, kernel: str, device: str) -> Path:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
               "ts": 0, "dur": 1000}]
    for i in range(3):
        events += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": 10 + 300 * i, "dur": 5, "args": {"correlation": 100 + i}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 50 + 300 * i, "dur": 100,
             "args": {"correlation": 100 + i, "device": 0, "stream": 7}},
        ]
    doc = {"deviceProperties": [{"id": 0, "name": device, "computeMajor": 8, "computeMinor": 0,
                                 "numSms": 108, "totalGlobalMem": 1 << 34}],
           "traceEvents": events}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_newline_or_escape_in_a_kernel_or_device_name_never_splits_or_drives_the_table(tmp_path: Path) -> None:
    clean = render_report(gpuutil.analyze(str(_trace(tmp_path, "gemm_kernel", "A100"))))
    dirty = render_report(gpuutil.analyze(str(_trace(tmp_path, "gemm" + EVIL, "A100" + EVIL))))
    assert not _controls(dirty), repr(dirty)
    assert len(dirty.splitlines()) == len(clean.splitlines()), dirty
    assert "A100evil?[2J?split" in dirty


def test_format_of_a_live_summary_never_prints_control_characters() -> None:
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(2):
            with prof.step():
                pass
    summary = prof.summary()
    # What a summary carries from the job's own strings: thread names,
    # record_function names in findings, device names.
    summary["host"] = [{"rank": 0, "name": "loader" + EVIL, "wall_ns": 10,
                        "breakdown_ns": {"dataloader": 5, "other" + EVIL: 5}}]
    summary["devices"] = [{"rank": 0, "device": 0, "name": "H200" + EVIL, "wall_ns": 10,
                           "breakdown_ns": {"compute": 10}}]
    summary["findings"] = [{"title": "blocks in <script>" + EVIL, "evidence": EVIL, "fix": "remove " + EVIL,
                            "recoverable_ns": 1}]
    text = gpuutil.format(summary)
    assert not _controls(text), repr(text)
    assert len(text.splitlines()) == len(gpuutil.format(json.loads(json.dumps(summary).replace(
        json.dumps(EVIL)[1:-1], "x"))).splitlines())
    assert "<script>" in text  # text stays text: C++ template kernel names keep their '<'


def test_the_cli_error_line_never_prints_an_escape_from_a_file_name(tmp_path: Path) -> None:
    missing = str(tmp_path / "t\x1b]0;owned\x07.json")
    out = subprocess.run([sys.executable, "-m", "gpuutil", "analyze", missing], capture_output=True, text=True)
    assert out.returncode == 2
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("gpuutil: error: ")
    assert not _controls(out.stderr.rstrip("\n")), repr(out.stderr)


def test_the_native_cli_error_line_never_prints_an_escape_from_a_file_name(tmp_path: Path) -> None:
    native = Path(sys.executable).parent / "gpuutil-analyze"
    if not native.exists():
        import pytest

        pytest.skip(f"{native} not installed")
    missing = str(tmp_path / "t\x1b]0;owned\x07\u009b31m.json")
    out = subprocess.run([str(native), missing], capture_output=True, text=True)
    assert out.returncode == 2
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("gpuutil-analyze: error: ")
    assert not _controls(out.stderr.rstrip("\n")), repr(out.stderr)
