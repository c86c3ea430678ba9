"""Tests of the public Python API: gpuutil.analyze() and friends.

Every real trace goes through the installed C++ core; the tests pin the
schema id, the exact accounting identity (the nine breakdown buckets sum to
wall_ns, the six idle buckets to idle_ns, all integers), null instead of
NaN/Inf, multi-rank input, MFU with a user FLOP count, the error contract
(TraceError, a ValueError) and that the GIL is released during analysis.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import all_traces

BREAKDOWN_KEYS = [
    "compute", "communication", "memory",
    "idle_dataloader", "idle_host_sync", "idle_collective", "idle_launch", "idle_host", "idle_dependency",
    "idle_unattributed", "idle_kernel_gap",
]
IDLE_KEYS = [k for k in BREAKDOWN_KEYS if k.startswith("idle_")]
CAUSES = [k[len("idle_"):] for k in IDLE_KEYS]
H100 = "tracelens_h100_bert_small_inference.json.gz"
RANKS = ["hta_sampled_rank0.json.gz", "hta_sampled_rank1.json.gz"]


def _strict_loads(text: str):
    def reject(name: str):
        raise AssertionError(f"non-finite literal {name} in JSON")

    return json.loads(text, parse_constant=reject)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@pytest.fixture(scope="module")
def reports(installed_gpuutil):
    """Report text and dict per trace name, computed once."""
    cache = {}

    def get(path: Path):
        if path.name not in cache:
            text = installed_gpuutil.analyze_json(path)
            cache[path.name] = (text, _strict_loads(text))
        return cache[path.name]

    return get


def test_import_does_not_need_torch():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # any `import torch` now fails\n"
        "import gpuutil, gpuutil.cli\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print(gpuutil.REPORT_SCHEMA)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "gpuutil.report/1"


def test_public_names(installed_gpuutil):
    g = installed_gpuutil
    assert g.REPORT_SCHEMA == "gpuutil.report/1"
    assert g.__version__ == importlib.metadata.version("gpuutil")
    assert g.__version__ == g._core.version()
    assert issubclass(g.TraceError, ValueError)
    assert g.TraceError is g._core.TraceError
    for name in g.__all__:
        obj = getattr(g, name)
        if callable(obj):
            assert obj.__doc__, f"{name} has no docstring"
    assert g.analyze.__doc__ and "flops_per_step" in g.analyze.__doc__
    assert "bf16" in g.DTYPES


def test_diagnostics_registry(installed_gpuutil):
    reg = installed_gpuutil._core.diagnostics_registry()
    assert reg, "registry is empty"
    names = [d["name"] for d in reg]
    assert len(names) == len(set(names))
    assert "steps_missing" in names and "input_unreadable" in names
    for d in reg:
        assert set(d) == {"name", "severity", "description"}
        assert d["severity"] in ("info", "warning", "error")
        assert d["description"]
    assert [d["name"] for d in installed_gpuutil.DIAGNOSTICS] == names


def test_there_are_traces(traces):
    assert len(all_traces()) >= 10


@pytest.mark.parametrize("path", all_traces(), ids=lambda p: p.name)
def test_every_trace_accounts_exactly(path, reports, installed_gpuutil):
    text, rep = reports(path)
    assert "\n" not in text, "compact JSON must be one line"
    assert rep["schema"] == "gpuutil.report/1"
    assert list(rep) == ["schema", "sources", "flops_source", "workload", "loaders", "steps", "summary",
                         "findings", "diagnostics"]
    assert list(rep["workload"]) == ["kind", "evidence", "capture_ns"]
    assert rep["workload"]["kind"] in ("training", "inference", "capture", "unknown")
    assert _is_int(rep["workload"]["capture_ns"]) and rep["workload"]["capture_ns"] >= 0
    assert len(rep["sources"]) == 1
    assert rep["sources"][0]["path"].endswith(path.name)
    for step in rep["steps"]:
        for k in ("step", "start_ns", "end_ns", "wall_ns"):
            assert _is_int(step[k]), k
        assert step["end_ns"] - step["start_ns"] == step["wall_ns"]
        for dev in step["devices"]:
            b = dev["breakdown_ns"]
            assert list(b) == BREAKDOWN_KEYS
            assert all(_is_int(v) and v >= 0 for v in b.values()), b
            assert sum(b.values()) == dev["wall_ns"], (step["step"], dev["device"], b, dev["wall_ns"])
            assert sum(b[k] for k in IDLE_KEYS) == dev["idle_ns"]
            assert _is_int(dev["busy_ns"]) and _is_int(dev["wall_ns"])
            assert list(dev["culprits"]) == CAUSES
            for v in (dev["sm_efficiency_est"], dev["achieved_occupancy_est"], dev["mfu"]):
                assert v is None or math.isfinite(v)
    s = rep["summary"]
    for k in ("steps_wall_ns", "trace_span_ns", "outside_steps_ns"):
        assert _is_int(s[k]), k
    assert s["steps"] == len(rep["steps"])
    for dev in s["devices"]:
        assert sum(dev["breakdown_ns"].values()) == dev["wall_ns"]
    if rep["findings"]:
        assert s["top_finding"] == rep["findings"][0]
    else:
        assert s["top_finding"] is None
    # Diagnostics: only non-zero counters, registry names, registry order.
    order = [d["name"] for d in installed_gpuutil.DIAGNOSTICS]
    names = [d["name"] for d in rep["diagnostics"]]
    assert all(d["count"] > 0 for d in rep["diagnostics"])
    assert names == sorted(names, key=order.index)


def test_dict_equals_json_text(trace, installed_gpuutil):
    p = trace("hta_event_sync_a100.json.gz")
    assert installed_gpuutil.analyze(p) == json.loads(installed_gpuutil.analyze_json(p))
    pretty = installed_gpuutil.analyze_json(p, indent=2)
    assert "\n" in pretty and json.loads(pretty) == installed_gpuutil.analyze(p)


def test_path_forms(trace, installed_gpuutil):
    p = trace("hta_event_sync_a100.json.gz")
    a = installed_gpuutil.analyze(str(p))
    assert installed_gpuutil.analyze(p) == a
    assert installed_gpuutil.analyze([p]) == a
    assert installed_gpuutil.analyze((str(p),)) == a


def test_multi_rank(trace, installed_gpuutil):
    paths = [trace(n) for n in RANKS]
    rep = installed_gpuutil.analyze(paths)
    assert [s["rank"] for s in rep["sources"]] == [0, 1]
    assert {d["rank"] for d in rep["summary"]["devices"]} == {0, 1}
    ranks_in_steps = {d["rank"] for st in rep["steps"] for d in st["devices"]}
    assert ranks_in_steps == {0, 1}
    for st in rep["steps"]:
        for d in st["devices"]:
            assert sum(d["breakdown_ns"].values()) == d["wall_ns"]


def test_mfu_with_flops_per_step(trace, installed_gpuutil):
    rep = installed_gpuutil.analyze(trace(H100), flops_per_step=1e9)
    assert rep["flops_source"] == "user"
    mfus = [d["mfu"] for st in rep["steps"] for d in st["devices"] if d["kernels"] > 0]
    assert mfus, "no device steps with kernels"
    for m in mfus:
        assert m is not None and 0 < m <= 1, m
    for d in rep["summary"]["devices"]:
        if d["kernels"] > 0:
            assert d["mfu"] is not None and 0 < d["mfu"] <= 1


def test_peak_tflops_override(trace, installed_gpuutil):
    rep = installed_gpuutil.analyze(trace(H100), flops_per_step=1e9, peak_tflops=100)
    peaks = [d["peak_flops_per_s"] for st in rep["steps"] for d in st["devices"] if d["kernels"] > 0]
    assert peaks and all(p == pytest.approx(100e12) for p in peaks), peaks


def test_without_flops_mfu_is_null_or_trace(trace, installed_gpuutil):
    rep = installed_gpuutil.analyze(trace(H100))
    assert rep["flops_source"] in (None, "trace")
    if rep["flops_source"] is None:
        assert all(d["mfu"] is None for st in rep["steps"] for d in st["devices"])


def test_missing_file_raises_trace_error(tmp_path, installed_gpuutil):
    missing = tmp_path / "nope.json.gz"
    with pytest.raises(installed_gpuutil.TraceError) as ei:
        installed_gpuutil.analyze(missing)
    msg = str(ei.value)
    assert msg.startswith(f"cannot read {missing}: ")
    assert "\n" not in msg
    with pytest.raises(ValueError):  # TraceError is a ValueError
        installed_gpuutil.analyze(missing)


def test_truncated_gzip_raises(tmp_path, trace, installed_gpuutil):
    src = trace("kineto_resnet50_nw4_v100.json.gz").read_bytes()
    bad = tmp_path / "truncated.json.gz"
    bad.write_bytes(src[:4096])
    with pytest.raises(installed_gpuutil.TraceError, match=r"^cannot read .*truncated\.json\.gz: "):
        installed_gpuutil.analyze(bad)


def test_invalid_json_raises(tmp_path, installed_gpuutil):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", ')
    with pytest.raises(installed_gpuutil.TraceError, match=r"^cannot read .*bad\.json: "):
        installed_gpuutil.analyze(bad)
    gz = tmp_path / "bad.json.gz"
    gz.write_bytes(gzip.compress(b"this is not json"))
    with pytest.raises(installed_gpuutil.TraceError):
        installed_gpuutil.analyze(gz)


def test_first_unreadable_of_several_is_named(tmp_path, trace, installed_gpuutil):
    good = trace(RANKS[0])
    missing = tmp_path / "rank1.json.gz"
    with pytest.raises(installed_gpuutil.TraceError, match=r"rank1\.json\.gz"):
        installed_gpuutil.analyze([good, missing])


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"flops_per_step": -1.0}, ValueError),
        ({"flops_per_step": float("nan")}, ValueError),
        ({"flops_per_step": "1e12"}, TypeError),
        ({"peak_tflops": 0}, ValueError),
        ({"peak_tflops": float("inf")}, ValueError),
        ({"dtype": "float13"}, ValueError),
    ],
)
def test_bad_arguments(kwargs, exc, trace, installed_gpuutil):
    with pytest.raises(exc):
        installed_gpuutil.analyze(trace(H100), **kwargs)


def test_bad_paths(installed_gpuutil):
    with pytest.raises(ValueError):
        installed_gpuutil.analyze([])
    with pytest.raises(TypeError):
        installed_gpuutil.analyze(42)
    with pytest.raises(TypeError):
        installed_gpuutil.analyze([None])
    with pytest.raises(TypeError):
        installed_gpuutil.analyze("x.json", 1e9)  # options are keyword-only


def test_gil_released_during_analysis(traces, installed_gpuutil):
    """A Python thread keeps running while another thread is inside analyze.

    If the C++ call held the GIL, the main thread's counter could not advance
    at all for the whole call; with the GIL released it counts at (nearly)
    full speed on another core.
    """
    big = str(max(all_traces(), key=lambda p: p.stat().st_size))
    core = installed_gpuutil._core

    def count_while_alive(t: threading.Thread) -> int:
        n = 0
        t.start()
        while t.is_alive():
            n += 1
        t.join()
        return n

    # Baseline: the same loop while a thread merely sleeps (GIL free).
    baseline_s = 0.3
    t0 = time.perf_counter()
    n_base = count_while_alive(threading.Thread(target=time.sleep, args=(baseline_s,)))
    rate = n_base / (time.perf_counter() - t0)

    span = {}

    def work():
        start = time.perf_counter()
        for _ in range(3):  # one import thread per call; repeat to lengthen it
            core.analyze_files([big])
        span["s"] = time.perf_counter() - start

    counter = count_while_alive(threading.Thread(target=work))
    call_s = span["s"]
    assert call_s > 0.05, f"call too short to judge ({call_s:.3f} s)"
    expected = rate * call_s
    print(f"GIL check: calls {call_s:.3f} s, counter {counter} of ~{expected:.0f} at full speed")
    assert counter > 0.25 * expected, (counter, expected, call_s)
