"""Reading gpuutil's own reports back (report JSON, steps JSONL): every
reader (analyze, compare, export html and prometheus, the OpenTelemetry
recorder) accepts what gpuutil writes, and a report with a wrongly typed or
missing field (NaN, infinity and integers beyond int64 included) fails with
one line naming that field, never a traceback.
The mutations are fuzzed over every field of real reports."""

from __future__ import annotations

import copy
import io
import json
import random
import re
import contextlib
import pytest

import gpuutil
from gpuutil import cli
from gpuutil._buckets import BREAKDOWN_KEYS as _BREAKDOWN_KEYS
from gpuutil._report_check import check_report

from conftest import traces_dir

TRACES = traces_dir()
DEVICE_TRACE = TRACES / "hta_train_v100_dataloader_nccl_rank1.json.gz"


def live_report() -> dict:
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(2):
            with prof.step():
                pass
    return prof.reports[0]


def device_report() -> dict:
    if not DEVICE_TRACE.is_file():
        pytest.skip(f"the shared real GPU traces are not at {TRACES} (a clone without ../shared)")
    return gpuutil.analyze(str(DEVICE_TRACE))


def test_every_real_trace_report_and_a_live_report_pass_the_check():
    check_report(live_report())
    if not TRACES.is_dir():
        pytest.skip(f"the shared real GPU traces are not at {TRACES} (a clone without ../shared)")
    for path in sorted(TRACES.glob("*.json*")):
        check_report(gpuutil.analyze(str(path)), path.name)


def test_a_wrongly_typed_field_is_named_in_one_line():
    r = live_report()
    r["steps"][0]["wall_ns"] = "12"
    with pytest.raises(ValueError, match=r"^report\.steps\[0\]\.wall_ns is a string, not an integer$"):
        check_report(r)
    r = live_report()
    del r["summary"]
    with pytest.raises(ValueError, match=r"^report\.summary is missing$"):
        check_report(r)
    r = live_report()
    r["steps"][0]["detail"] = 1
    with pytest.raises(ValueError, match="detail is a number, not a boolean"):
        check_report(r)


def test_nan_infinity_and_integers_beyond_int64_are_named_in_one_line():
    """Python's json reads NaN, Infinity, 1e400 (as infinity) and 10**400;
    no gpuutil writer does, and each would reach a reader as a NaN
    verdict or an OverflowError."""
    cases = [
        (("sm_efficiency_est",), float("nan"), "sm_efficiency_est is NaN, not a number or null"),
        (("mfu",), float("inf"), "mfu is infinite, not a number or null"),
        (("flops",), "1e9", "flops is a string, not a number or null"),
        (("peak_flops_per_s",), float("-inf"), "peak_flops_per_s is infinite, not a number or null"),
        (("wall_ns",), 10**400, "wall_ns is an integer outside the int64 range, not an integer"),
        (("busy_ns",), -(2**63) - 1, "busy_ns is an integer outside the int64 range, not an integer"),
    ]
    for path, value, message in cases:
        r = live_report()
        r["steps"][0].setdefault("devices", []).append(
            {"device": 0, "rank": 0, "wall_ns": 10, "busy_ns": 0, "idle_ns": 10, "kernels": 0, "mfu": None,
             "sm_efficiency_est": None, "breakdown_ns": {k: 0 for k in _BREAKDOWN_KEYS}})
        r["steps"][0]["devices"][-1][path[0]] = value
        with pytest.raises(ValueError, match=rf"^report\.steps\[0\]\.devices\[\d+\]\.{message}$"):
            check_report(r)
    r = live_report()
    r["steps"][0]["devices"] = [{"device": 0, "rank": 0, "wall_ns": 2**63 - 1, "busy_ns": -(2**63), "idle_ns": 0,
                                 "kernels": 0, "mfu": 1.5, "sm_efficiency_est": None,
                                 "breakdown_ns": {k: 0 for k in _BREAKDOWN_KEYS}}]
    check_report(r)  # the int64 bounds themselves and finite floats pass


def _paths(value, prefix=()):
    """Every (path, value) in a JSON document, containers included."""
    yield prefix, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _set(doc, path, value):
    """Sets the value at path (nothing when an earlier mutation replaced a container on it)."""
    try:
        for p in path[:-1]:
            doc = doc[p]
        doc[path[-1]] = value
    except (TypeError, KeyError, IndexError):
        pass


def _run_cli(*argv: str) -> "tuple[int, str]":
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(list(argv))
    return code, err.getvalue()


@pytest.mark.parametrize("source", ["live", "device"])
def test_fuzzed_reports_never_make_a_reader_raise(tmp_path, source):
    base = live_report() if source == "live" else device_report()
    paths = [p for p, _ in _paths(base) if p]
    rng = random.Random(1234)
    wrong = ["x", 1.5, None, [], {}, True, -7, {"a": 1}, ["y"]]
    out = tmp_path / "o"
    otel = pytest.importorskip("gpuutil.export.otel") if _have_otel() else None
    for trial in range(200):
        doc = json.loads(json.dumps(base))
        for _ in range(rng.choice((1, 1, 2))):
            _set(doc, rng.choice(paths), copy.deepcopy(rng.choice(wrong)))
        f = tmp_path / f"r{trial}.json"
        f.write_text(json.dumps(doc))
        for argv in (("analyze", str(f)), ("analyze", "--json", str(f)), ("compare", str(f), str(f)),
                     ("export", "html", str(f), "-o", str(out)), ("export", "prometheus", str(f), "-o", str(out))):
            code, err = _run_cli(*argv)  # an exception here fails the test
            assert code in (0, 1, 2), (argv, code)
            if code == 2:  # unreadable, or (compare) a gated metric it does not have
                assert err.count("\n") == 1 and err.startswith("gpuutil: error: "), (argv, err)
        if otel is not None:
            try:
                otel.record_reports([doc])
            except ValueError as e:
                assert "\n" not in str(e)


def _have_otel() -> bool:
    try:
        import opentelemetry  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_report_written_before_idle_kernel_gap_is_still_read_by_every_reader(tmp_path):
    # gpuutil.report/1 is additive: reports written before idle_kernel_gap
    # (issue 26) lack it, and every reader takes them as 0.
    old = copy.deepcopy(device_report())
    for d in [d for s in old["steps"] for d in s["devices"]] + old["summary"]["devices"]:
        d["breakdown_ns"]["idle_dependency"] += d["breakdown_ns"].pop("idle_kernel_gap")
        d.get("culprits", {}).pop("kernel_gap", None)
    old["summary"].pop("last_step_backlog_ns", None)
    old["summary"].pop("last_step_unrecorded_ns", None)
    check_report(old)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["analyze", str(path)]) == 0
    assert re.search(r"idle kernel_gap\s+0\.000\s", out.getvalue()), out.getvalue()
