"""Users name their own communication kernels (issue 37, item 5;
docs/accounting.md, "Communication"): the ``--comm-kernels`` flag, the
``GPUUTIL_COMM_KERNELS`` environment variable, ``profile(communication_kernels=)``
and ``gpuutil.set_communication_kernels`` all turn a kernel no built-in
family knows into communication; bad values are refused in one line."""

import json
import os
import subprocess
import sys

import pytest


def _trace(tmp_path):
    """One step: a compute kernel [0, 1000) us and a custom shuffle kernel
    [500, 1500) us on another stream, neither launched inside a collective."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 2000},
        {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 0, "dur": 1000,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "void team_x::ExpertShuffleKernel<128>(float*)", "pid": 0, "tid": 20,
         "ts": 500, "dur": 1000, "args": {"device": 0, "stream": 20, "correlation": 2}},
    ]
    p = tmp_path / "shuffle.json"
    p.write_text(json.dumps({"traceEvents": events}))
    return p


def _communication(report):
    d = report["summary"]["devices"][0]
    return d["breakdown_ns"]["communication"]


def _analyze_cli(args, env=None):
    proc = subprocess.run([sys.executable, "-m", "gpuutil", "analyze", *map(str, args), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_kernel_no_family_knows_is_compute_until_the_user_names_it(tmp_path, installed_gpuutil):
    trace = _trace(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "GPUUTIL_COMM_KERNELS"}
    assert _communication(_analyze_cli([trace], env)) == 0
    # The flag: [1000, 1500) us is communication nothing overlaps.
    assert _communication(_analyze_cli([trace, "--comm-kernels", "nothing_else, expertshuffle"], env)) == 500_000
    # The environment variable, read once by the core.
    env_var = dict(env, GPUUTIL_COMM_KERNELS="ExpertShuffle")
    assert _communication(_analyze_cli([trace], env_var)) == 500_000


def test_set_communication_kernels_applies_to_analyze_in_process(tmp_path, installed_gpuutil):
    trace = _trace(tmp_path)
    code = (
        "import gpuutil, json, sys; "
        "gpuutil.set_communication_kernels(['expertshuffle']); "
        f"r = gpuutil.analyze({str(trace)!r}); "
        "print(r['summary']['devices'][0]['breakdown_ns']['communication']); "
        "p = gpuutil.profile(communication_kernels=[]); "
        "from gpuutil import _core; print(_core.communication_kernel_patterns())"
    )
    env = {k: v for k, v in os.environ.items() if k != "GPUUTIL_COMM_KERNELS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["500000", "[]"]


@pytest.mark.parametrize("bad, exc", [("expertshuffle", TypeError), ([1], TypeError)])
def test_bad_patterns_are_refused(bad, exc, installed_gpuutil):
    with pytest.raises(exc):
        installed_gpuutil.set_communication_kernels(bad)
    with pytest.raises(exc):
        installed_gpuutil.profile(communication_kernels=bad)
