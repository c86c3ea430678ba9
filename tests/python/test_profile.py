"""The live session from Python: gpuutil.profile() and prof.step() on this
machine, which has no GPU, so every report is host-only and says why."""

import json
import time

import pytest

import gpuutil


def test_profile_reports_each_step_in_the_report_schema(tmp_path):
    out = tmp_path / "steps.jsonl"
    with gpuutil.profile(output=str(out)) as prof:
        for _ in range(3):
            with prof.step():
                time.sleep(0.002)
    assert len(prof.reports) == 3
    for i, r in enumerate(prof.reports):
        assert r["schema"] == gpuutil.REPORT_SCHEMA
        assert r["steps"][0]["step"] == i
        assert r["steps"][0]["wall_ns"] >= 2_000_000
    lines = out.read_text().splitlines()[:-1]  # the last is the run record (gpuutil.run/1)
    assert [json.loads(l)["steps"][0]["step"] for l in lines] == [0, 1, 2]
    # The file says how steps were found, like prof.reports does.
    assert {json.loads(l)["sources"][0]["steps_source"] for l in lines} == {"user"}


def test_every_report_says_gpu_collection_is_off_and_why():
    with gpuutil.profile() as prof:
        with prof.step():
            pass
    diags = {d["name"]: d for d in prof.reports[0]["diagnostics"]}
    assert "gpu_collection_off" in diags
    assert diags["gpu_collection_off"]["example"]
    assert prof.gpu_collection_off


def test_summary_counts_every_step_even_beyond_kept_reports():
    with gpuutil.profile(keep_reports=2) as prof:
        for _ in range(5):
            with prof.step():
                pass
    assert len(prof.reports) == 2
    s = prof.summary()
    assert s["steps"] == 5
    assert s["steps_wall_ns"] > 0
    assert s["outside_steps_ns"] >= 0


def test_step_outside_a_running_profile_is_a_clear_error():
    prof = gpuutil.profile()
    with pytest.raises(RuntimeError, match="not running"):
        with prof.step():
            pass


def test_exception_in_the_loop_still_reports_the_step(tmp_path):
    out = tmp_path / "s.jsonl"
    with pytest.raises(ZeroDivisionError):
        with gpuutil.profile(output=str(out)) as prof:
            with prof.step():
                1 / 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["schema"] for x in lines] == ["gpuutil.report/1", "gpuutil.run/1"]


def test_bad_arguments_fail_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="flops_per_step"):
        gpuutil.profile(flops_per_step=-1)
    with pytest.raises(OSError, match="cannot open"):
        gpuutil.profile(output=str(tmp_path / "missing-dir" / "x.jsonl"))


def test_output_name_carries_the_rank_in_a_multi_rank_job(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    with gpuutil.profile(output=str(tmp_path / "steps.jsonl")) as prof:
        with prof.step():
            pass
    assert prof.output.endswith("steps.rank3.jsonl")
    assert (tmp_path / "steps.rank3.jsonl").exists()
    assert prof.reports[0]["sources"][0]["rank"] == 3


def test_on_step_callback_gets_each_report():
    seen = []
    with gpuutil.profile(on_step=seen.append) as prof:
        for _ in range(2):
            with prof.step():
                pass
    assert [r["steps"][0]["step"] for r in seen] == [0, 1]


def test_batched_reports_are_complete_when_read(tmp_path):
    """With a long report interval nothing is analysed at the step ends, yet
    reading prof.reports reports every finished step first, in order."""
    with gpuutil.profile(output=str(tmp_path / "s.jsonl"), report_interval_ms=60_000) as prof:
        for _ in range(5):
            with prof.step():
                pass
        steps = [r["steps"][0]["step"] for r in prof.reports]
        assert steps == [0, 1, 2, 3, 4]
        assert prof.summary()["steps"] == 5
    lines = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [x["steps"][0]["step"] for x in lines[:-1]] == [0, 1, 2, 3, 4]
    assert lines[-1]["schema"] == "gpuutil.run/1" and lines[-1]["steps"] == 5  # the run record, at stop


def test_on_step_gets_every_report_in_order_by_stop_when_batched():
    seen = []
    with gpuutil.profile(on_step=seen.append, report_interval_ms=60_000) as prof:
        for _ in range(4):
            with prof.step():
                pass
        # The first step went to the background worker at its end; what it
        # made is delivered at the next batch, and the rest wait for the interval.
        assert len(seen) == 0
    assert [r["steps"][0]["step"] for r in seen] == [0, 1, 2, 3]


def test_background_reports_reach_on_step_one_batch_later_in_order(tmp_path):
    """With batching on, the session's worker analyses each batch off the
    training thread: the JSON Lines file gets it as soon as the worker is
    done, on_step at the next batch, and nothing is lost or reordered."""
    import time

    seen = []
    out = tmp_path / "bg.jsonl"
    with gpuutil.profile(str(out), on_step=seen.append, report_interval_ms=20) as prof:
        assert prof._background
        for _ in range(12):
            with prof.step():
                time.sleep(0.005)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(out.read_text().splitlines()) < 2:
            time.sleep(0.01)  # the worker writes the file itself
        assert len(out.read_text().splitlines()) >= 2
        assert 0 < len(seen) < 12
    assert [r["steps"][0]["step"] for r in seen] == list(range(12))
    lines = out.read_text().splitlines()
    assert [json.loads(x)["steps"][0]["step"] for x in lines[:-1]] == list(range(12))
    assert json.loads(lines[-1])["schema"] == "gpuutil.run/1"


def test_report_interval_zero_reports_at_every_step_end():
    seen = []
    with gpuutil.profile(on_step=seen.append, report_interval_ms=0) as prof:
        for i in range(3):
            with prof.step():
                pass
            assert len(seen) == i + 1


def test_reports_parse_once_and_behave_as_a_bounded_sequence():
    with gpuutil.profile(keep_reports=3, report_interval_ms=0) as prof:
        for _ in range(5):
            with prof.step():
                pass
    reports = prof.reports
    assert len(reports) == 3
    assert reports[0] is reports[0]  # parsed once, the same dict afterwards
    assert [r["steps"][0]["step"] for r in reports] == [2, 3, 4]
    assert [r["steps"][0]["step"] for r in reports[1:]] == [3, 4]
    assert reports[-1]["steps"][0]["step"] == 4
    assert reports == list(reports)
    with pytest.raises(IndexError):
        reports[3]


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "10"])
def test_bad_report_interval_is_refused(bad):
    with pytest.raises(ValueError, match="report_interval_ms"):
        gpuutil.profile(report_interval_ms=bad)


def test_summary_sums_exactly_over_every_step():
    with gpuutil.profile(keep_reports=1) as prof:
        for _ in range(6):
            with prof.step():
                pass
    s = prof.summary()
    assert s["steps"] == 6
    assert s["steps_wall_ns"] > 0
    for h in s["host"]:
        assert sum(h["breakdown_ns"].values()) == h["wall_ns"]
        assert h["steps"] == 6


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "8e8"])
def test_bad_hardware_flops_are_refused(bad):
    with pytest.raises(ValueError, match="hardware_flops_per_step"):
        gpuutil.profile(hardware_flops_per_step=bad)
