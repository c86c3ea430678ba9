"""Tests of ``gpuutil export perfetto`` (the C++ Chrome-trace exporter via Python).

Structural: valid JSON in Chrome Trace Event Format, slices nest per track
(pid, tid), a process per GPU, a thread per stream, an idle-cause thread
whose slices add up to the report's idle time per cause.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

RESNET = "kineto_resnet50_nw4_v100.json.gz"
RANKS = ["hta_sampled_rank0.json.gz", "hta_sampled_rank1.json.gz"]


def _assert_nested(doc):
    tracks = defaultdict(list)
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M", "C"), e
        if e["ph"] == "X":
            assert e["dur"] >= 0
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for key, slices in tracks.items():
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for s, e in slices:
            while stack and stack[-1] <= s + 1e-6:
                stack.pop()
            assert not stack or e <= stack[-1] + 1e-6, f"partial overlap on track {key} at {s}"
            stack.append(e)
    return tracks


def test_export_perfetto_is_nested_chrome_trace(run_cli, trace, tmp_path, installed_gpuutil):
    out = tmp_path / "t.json"
    proc = run_cli("export", "perfetto", trace(RESNET), "-o", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    tracks = _assert_nested(doc)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "idle causes" in names.values() and "steps" in names.values()
    assert any(n.startswith("stream ") for n in names.values())
    assert all(k in names for k in tracks), "every track with slices is named"
    # Idle slices add up to the report, per cause.
    report = installed_gpuutil.analyze(trace(RESNET))
    want = defaultdict(int)
    for step in report["steps"]:
        for d in step["devices"]:
            for k, v in d["breakdown_ns"].items():
                if k.startswith("idle_"):
                    want[k[5:]] += v
    got = defaultdict(int)
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e.get("cat") == "idle":
            got[e["name"]] += round(e["dur"] * 1000)
    for cause, ns in want.items():
        assert got[cause] == pytest.approx(ns, abs=len(report["steps"]) * 50), cause


def test_one_process_per_gpu_per_rank(run_cli, trace, tmp_path):
    out = tmp_path / "t.json"
    proc = run_cli("export", "perfetto", *(trace(n) for n in RANKS), "-o", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    _assert_nested(doc)
    procs = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert len(procs) == len(set(procs)) >= 2
    assert any(p.startswith("rank 0 GPU") for p in procs) and any(p.startswith("rank 1 GPU") for p in procs)


def test_unreadable_trace_exits_2(run_cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run_cli("export", "perfetto", bad)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpuutil: error: cannot read")
