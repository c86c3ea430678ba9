"""The Python API as a careless user meets it (issue 14): prof.reports is
a list that json.dumps takes, on_step takes one sink or a list and a failing
sink never breaks training, gpuutil.format renders what gpuutil hands out,
and analyze/export accept gpuutil's own reports and JSONL."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings

import pytest

import gpuutil


def _three_steps(**kwargs):
    with gpuutil.profile(report_interval_ms=0, **kwargs) as prof:
        for _ in range(3):
            with prof.step():
                time.sleep(0.002)
    return prof


def test_reports_is_a_list_that_json_dumps_takes():
    prof = _three_steps(keep_reports=2)
    reports = prof.reports
    assert isinstance(reports, list) and reports.maxlen == 2
    assert [r["steps"][0]["step"] for r in reports] == [1, 2]  # the most recent two
    assert json.loads(json.dumps(prof.reports)) == reports


def test_on_step_takes_a_list_of_sinks_and_each_gets_every_report():
    a, b = [], []
    _three_steps(on_step=[a.append, b.append])
    assert len(a) == len(b) == 3


def test_a_sink_that_raises_is_counted_and_warned_and_training_goes_on():
    seen = []

    def broken(report):
        raise KeyError("no such metric")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = _three_steps(on_step=[broken, seen.append])
    assert len(seen) == 3  # the sink after the broken one still got every report
    assert [w for w in caught if "on_step sink raised" in str(w.message)], [str(w.message) for w in caught]
    failed = prof.summary()["on_step_failed"]
    assert failed["count"] == 3 and "KeyError" in failed["example"] and "broken" in failed["example"]


@pytest.mark.parametrize("bad", [1, "wandb", [print, None]])
def test_on_step_of_the_wrong_type_is_refused_when_the_profile_is_made(bad):
    with pytest.raises(TypeError, match="on_step must be a callable or a list of callables"):
        gpuutil.profile(on_step=bad)


def test_format_renders_a_summary_a_step_report_and_refuses_other_things():
    prof = _three_steps()
    text = gpuutil.format(prof.summary())
    assert text.startswith("3 steps (steps from user):") and "in steps" in text
    assert gpuutil.format(prof.reports[0]).startswith("Trace live (rank 0")
    with pytest.raises(TypeError):
        gpuutil.format([1, 2])
    with pytest.raises(ValueError, match="not a gpuutil report"):
        gpuutil.format({"a": 1})


def test_analyze_takes_gpuutil_own_jsonl_and_report_and_perfetto_says_why_not(tmp_path):
    out = tmp_path / "steps.jsonl"
    with gpuutil.profile(str(out), report_interval_ms=0) as prof:
        for _ in range(3):
            with prof.step():
                time.sleep(0.002)
    run = [sys.executable, "-m", "gpuutil"]
    table = subprocess.run([*run, "analyze", str(out)], capture_output=True, text=True)
    assert table.returncode == 0, table.stderr
    assert "(3 steps, no device activity" in table.stdout
    merged = json.loads(subprocess.run([*run, "analyze", "--json", str(out)], capture_output=True, text=True,
                                       check=True).stdout)
    assert merged["summary"]["steps"] == 3 and len(merged["steps"]) == 3
    one = tmp_path / "report.json"
    one.write_text(json.dumps(merged))
    again = subprocess.run([*run, "analyze", "--json", str(one)], capture_output=True, text=True, check=True)
    assert json.loads(again.stdout) == merged
    html = subprocess.run([*run, "export", "html", str(out), "-o", str(tmp_path / "r.html")], capture_output=True,
                          text=True)
    assert html.returncode == 0, html.stderr
    perfetto = subprocess.run([*run, "export", "perfetto", str(out)], capture_output=True, text=True)
    assert perfetto.returncode == 2
    assert perfetto.stderr.count("\n") == 1 and "holds gpuutil reports, not a trace" in perfetto.stderr


def test_merged_jsonl_findings_state_the_run_in_words_not_one_steps_share():
    """A JSONL's findings are the run's (the C++ rules over the run's
    totals, as prof.summary() makes them): the title is words with the run's
    share, never a raw id; the evidence says in how many steps the step's
    own rule fired."""
    from gpuutil import _merge

    def report(step: int, wall: int, loader: int):
        main = {"rank": 0, "thread": 0, "tid": 1, "name": "main", "wall_ns": wall,
                "breakdown_ns": {"dataloader": loader, "forward": 0, "backward": 0, "optimizer": 0, "host_sync": 0,
                                 "collective": 0, "other": wall - loader},
                "culprits": {"dataloader": [{"name": "enumerate(DataLoader)#__next__", "ns": loader, "count": 1}]}}
        f = {"id": "host_dataloader", "title": f"The training thread waits for the next batch {100 * loader / wall:.1f}%"
             " of step time", "evidence": f"{loader} ns", "fix": "more workers", "recoverable_ns": loader}
        return {"schema": "gpuutil.report/1", "steps": [{"step": step, "start_ns": step * wall,
                "end_ns": (step + 1) * wall, "wall_ns": wall, "devices": [], "host": [main]}],
                "summary": {"devices": []}, "findings": [f] if loader >= wall // 20 else [], "diagnostics": []}

    merged = _merge.merge_reports([report(0, 1000, 800), report(1, 1000, 100), report(2, 1000, 0)])
    f = merged["findings"][0]
    assert f["id"] == "host_dataloader"
    assert f["title"] == "The training thread waits for the next batch 30.0% of step time"
    assert "host_dataloader" not in f["title"]
    assert "in 2 of 3 steps" in f["evidence"] and "enumerate(DataLoader)#__next__" in f["evidence"]
    assert f["share_of_wall"] == 0.3 and f["recoverable_ns"] == 900
    assert merged["summary"]["top_finding"] == f
