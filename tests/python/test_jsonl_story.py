"""Every surface tells one story (issue 37, items 8 and 9): the JSONL a live
profile writes ends with a run record (``gpuutil.run/1``: the time outside
steps before the first and after the last step, named, and the steps kept
out of the figures), so ``gpuutil analyze steps.jsonl`` and ``gpuutil export
html steps.jsonl`` of a loop with a torch.compile warm-up step and an
evaluation after the last optimizer step give what ``prof.summary()`` gives."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch._dynamo")

import gpuutil  # noqa: E402


def _loop(path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    with gpuutil.profile(output=str(path)) as prof:
        compiled = torch.compile(model, backend="eager")  # step 0 compiles: a warm-up
        for _ in range(8):
            loss = torch.nn.functional.cross_entropy(compiled(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        # Evaluation after the last optimizer step: 60 ms no step report holds.
        with torch.no_grad():
            for _ in range(30):
                model(x)
                time.sleep(0.002)
    return prof.summary()


def test_analyze_of_the_jsonl_equals_prof_summary(tmp_path, installed_gpuutil):
    path = tmp_path / "steps.jsonl"
    s = _loop(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[-1]["schema"] == "gpuutil.run/1"
    assert s.get("compile_warmup_steps") == 1
    # What the summary knows and no step report holds: the evaluation after
    # the last step (outside time), and the warm-up kept out.
    assert s["outside_steps_ns"] >= 60_000_000
    proc = subprocess.run([sys.executable, "-m", "gpuutil", "analyze", str(path), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    a = json.loads(proc.stdout)["summary"]
    assert a["steps"] == s["steps"] == 7
    assert a["steps_wall_ns"] == s["steps_wall_ns"]
    assert a["outside_steps_ns"] == s["outside_steps_ns"]
    assert a["outside_steps_breakdown_ns"] == s["outside_steps_breakdown_ns"]
    assert a["trace_span_ns"] == s["steps_wall_ns"] + s["outside_steps_ns"]
    assert a.get("compile_warmup_steps") == 1
    top = s["top_finding"]
    assert (a["top_finding"] or {}).get("id") == (top or {}).get("id")
    assert (a["top_finding"] or {}).get("title") == (top or {}).get("title")
    # The HTML: the same top finding, and the warm-up step out of the shares.
    html = subprocess.run([sys.executable, "-m", "gpuutil", "export", "html", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert html.returncode == 0, html.stderr
    if top is not None:
        from html import escape

        assert escape(top["title"]) in html.stdout
    assert "7 steps, 1 kept out (compile warm-up or incomplete)" in html.stdout


def test_a_file_without_a_run_record_reads_as_before(tmp_path, installed_gpuutil):
    # Files written before the run record (or cut by a crash) merge their
    # steps' gaps; the warm-up step is still kept out of the figures.
    path = tmp_path / "steps.jsonl"
    s = _loop(path)
    lines = path.read_text().splitlines()
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(line for line in lines if '"gpuutil.run/' not in line) + "\n")
    proc = subprocess.run([sys.executable, "-m", "gpuutil", "analyze", str(old), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    a = json.loads(proc.stdout)["summary"]
    assert a["steps"] == s["steps"]
    assert a["steps_wall_ns"] == s["steps_wall_ns"]
    # Without the record the evaluation after the last step is unknown.
    assert a["outside_steps_ns"] < s["outside_steps_ns"]
