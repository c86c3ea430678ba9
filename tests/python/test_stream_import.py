"""The streaming import, seen from Python: the same report, and the big-trace maker.

Documents of 64 MiB or more are streamed (docs/trace-import.md,
"Streaming"). GPUUTIL_IMPORT_STREAM_MIN_MB moves the threshold, so these
tests stream small traces (=0) and read them whole (=a huge value) in one
process and require byte-identical reports: on every shared trace, and on a
planted trace replicated by benchmarks/make_big_trace.py (whose copies must
add up: N copies, N times the steps, shifted times).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, all_traces

gpuutil = pytest.importorskip("gpuutil")


def _report(path: Path, stream: bool, monkeypatch) -> str:
    monkeypatch.setenv("GPUUTIL_IMPORT_STREAM_MIN_MB", "0" if stream else "1000000")
    return gpuutil.analyze_json(str(path))


def _planted_trace(path: Path, steps: int = 6) -> None:
    """A small CPU trace in Kineto's layout: steps, ops, a DataLoader wait, a sync."""
    events = []
    t = 1_000_000
    for s in range(steps):
        step_start = t
        events.append(("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 300.5))
        t += 301
        for k in range(20):
            events.append(("cpu_op", f"aten::op{k % 5}", t, 12.25))
            t += 13
        events.append(("cpu_op", "aten::item", t, 40))
        t += 41
        events.append(("user_annotation", f"ProfilerStep#{s}", step_start, t - step_start))
        t += 5
    lines = []
    for i, (cat, name, ts, dur) in enumerate(events):
        lines.append(
            "  {\n"
            f'    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 7, "tid": 7,\n'
            f'    "ts": {ts}, "dur": {dur},\n'
            f'    "args": {{\n      "External id": {i + 1}, "Input Dims": [[], []]\n    }}\n'
            "  }"
        )
    doc = '{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + ",\n".join(lines) + '\n  ],\n  "traceName": "planted"\n}\n'
    path.write_text(doc)


def test_every_shared_trace_reports_the_same_streamed_and_whole(monkeypatch):
    paths = all_traces()
    if not paths:
        pytest.skip("no shared traces (../shared/traces); the planted trace below still runs")
    for path in paths:
        assert _report(path, True, monkeypatch) == _report(path, False, monkeypatch), path.name


def test_replicated_planted_trace_streams_to_the_same_report(tmp_path, monkeypatch):
    source = tmp_path / "planted.json"
    _planted_trace(source)
    big = tmp_path / "big.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "make_big_trace.py"), str(source), str(big), "--copies", "40"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "copy 40/40" in done.stderr  # progress, one line per copy
    assert big.stat().st_size > 40 * 4096  # several streaming windows at the minimum window
    one = json.loads(_report(source, False, monkeypatch))
    streamed = _report(big, True, monkeypatch)
    assert streamed == _report(big, False, monkeypatch)
    many = json.loads(streamed)
    assert len(many["steps"]) == 40 * len(one["steps"])
    numbers = [s["step"] for s in many["steps"]]
    assert numbers == sorted(set(numbers))  # renumbered, no duplicates
    # Each copy is the first shifted in time: the same step walls.
    first_walls = [s["end_ns"] - s["start_ns"] for s in one["steps"]]
    walls = [s["end_ns"] - s["start_ns"] for s in many["steps"]]
    assert walls == first_walls * 40


def test_gzip_of_the_replicated_trace_streams_too(tmp_path, monkeypatch):
    source = tmp_path / "planted.json"
    _planted_trace(source, steps=3)
    big = tmp_path / "big.json.gz"
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "make_big_trace.py"), str(source), str(big), "--copies", "30"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert big.read_bytes()[:2] == b"\x1f\x8b"
    assert _report(big, True, monkeypatch) == _report(big, False, monkeypatch)


def test_stream_threshold_variable_is_only_a_default(monkeypatch):
    # The variable applies only while the option is left at its default; a
    # bad value must not break an import (it reads as 0: stream everything).
    monkeypatch.setenv("GPUUTIL_IMPORT_STREAM_MIN_MB", "not-a-number")
    paths = all_traces()
    if not paths:
        pytest.skip("no shared traces")
    report = json.loads(gpuutil.analyze_json(str(paths[0])))
    assert report["steps"]
