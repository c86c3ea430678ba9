"""The mutation fuzzer (tests/fuzz/mutate_traces.py) keeps working: a fixed
set of seeds over the shared traces keeps the contract against the
installed tools, the same seed gives the same input, and a tool that
crashes, hangs, writes two error lines or a report whose identities break
(a second device entry in a step, issue 32 item 7) is reported with its
seed and input saved for --replay.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path
from typing import List

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "fuzz"))

import mutate_traces  # noqa: E402
from trace_mutations import Seed, make_mutant  # noqa: E402


def _installed(name: str) -> Path:
    for d in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent):
        if (d / name).is_file():
            return d / name
    pytest.skip(f"{name} is not installed (scripts/bootstrap.sh builds and installs it)")


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_fixed_seeds_over_the_shared_traces_keep_the_contract(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "fuzz"
    rc = mutate_traces.main(["--traces", str(traces), "--cli", str(_installed("gpuutil-analyze")),
                             "--python-cli", str(_installed("gpuutil")), "--python-share", "0.2",
                             "--seed", "0", "--cases", "40", "--out", str(out), "--quiet"])
    s = _summary(out)
    assert (rc, s["cases"], s["breach_cases"]) == (0, 40, 0), s["breach_seeds"]
    assert s["exit0"] > 0 and s["exit2"] > 0 and s["python_runs"] > 0  # both outcomes and both tools were tried
    # Resuming continues at the next seed and keeps the tallies.
    rc = mutate_traces.main(["--traces", str(traces), "--cli", str(_installed("gpuutil-analyze")),
                             "--python-share", "0", "--cases", "5", "--out", str(out), "--resume", "--quiet"])
    s = _summary(out)
    assert (rc, s["cases"], s["first_seed"], s["next_seed"]) == (0, 45, 0, 45)


# A small trace of our own, so the breach tests need no shared folder: one
# step, one kernel launched from it.
_TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
     "args": {"correlation": 7}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 30,
     "args": {"device": 0, "stream": 7, "correlation": 7}},
]}


def _tiny_traces(tmp_path: Path) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    (d / "tiny.json").write_text(json.dumps(_TRACE))
    return d


def test_the_same_seed_gives_the_same_input(tmp_path: Path) -> None:
    seeds = [Seed.load(_tiny_traces(tmp_path) / "tiny.json")]
    made: List[bytes] = [make_mutant(seeds, s)[1].data for s in range(30)]
    assert made == [make_mutant(seeds, s)[1].data for s in range(30)]
    assert len(set(made)) > 20


def _fake_tool(tmp_path: Path, name: str, body: str) -> Path:
    """An executable standing in for gpuutil-analyze, running the real one when it needs a report."""
    exe = tmp_path / name
    exe.write_text(f"#!{sys.executable}\nimport json, os, signal, subprocess, sys, time\n"
                   f"REAL = {str(_installed('gpuutil-analyze'))!r}\n{body}\n")
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("name, body, kind, message", [
    ("segv", "os.kill(os.getpid(), signal.SIGSEGV)", "crash", "killed by signal 11 (SIGSEGV)"),
    ("sanitizer", "sys.stderr.write('==1==ERROR: AddressSanitizer: heap-buffer-overflow\\n'); sys.exit(1)",
     "crash", "sanitizer report"),
    ("hang", "time.sleep(30)", "hang", "no exit within the timeout"),
    ("two_lines", "sys.stderr.write('gpuutil-analyze: error: a\\nsecond line\\n'); sys.exit(2)",
     "contract", "exactly one 'gpuutil-analyze: error:' line"),
    ("exit_1", "sys.exit(1)", "contract", "exit code 1"),
    ("duplicate_device", "r = json.loads(subprocess.run([REAL] + sys.argv[1:], capture_output=True).stdout)\n"
     "r['steps'][0]['devices'].append(dict(r['steps'][0]['devices'][0], wall_ns=1000 * r['steps'][0]['wall_ns']))\n"
     "print(json.dumps(r))", "contract", "is a second entry for this rank and device"),
    ("buckets", "r = json.loads(subprocess.run([REAL] + sys.argv[1:], capture_output=True).stdout)\n"
     "r['steps'][0]['devices'][0]['breakdown_ns']['compute'] += 1\nprint(json.dumps(r))",
     "contract", "buckets sum to"),
])
def test_a_breach_is_reported_with_its_seed_and_input(tmp_path: Path, name: str, body: str, kind: str,
                                                      message: str, capsys: pytest.CaptureFixture) -> None:
    traces = _tiny_traces(tmp_path)
    out = tmp_path / "fuzz"
    tool = _fake_tool(tmp_path, name, body)
    # Seed 0 leaves the tiny trace valid JSON (a step window moved), so a report is produced.
    common = ["--traces", str(traces), "--cli", str(tool), "--python-share", "0", "--stdin-share", "0",
              "--options-share", "0", "--multi-share", "0", "--timeout", "1", "--out", str(out), "--quiet"]
    assert mutate_traces.main(common + ["--seed", "0", "--cases", "1"]) == 1
    s = _summary(out)
    assert s["breach_seeds"] == [0]
    assert s[{"crash": "crashes", "hang": "hangs"}.get(kind, "contract_breaches")] == 1
    case = json.loads((out / "breaches" / "seed-0" / "case.json").read_text())
    assert case["seed"] == 0 and case["breaches"][0]["kind"] == kind
    assert message in case["breaches"][0]["message"]
    (saved,) = (out / "breaches" / "seed-0").glob("input*")
    assert saved.read_bytes() == make_mutant([Seed.load(traces / "tiny.json")], 0)[1].data
    capsys.readouterr()
    assert mutate_traces.main(common + ["--replay", "0"]) == 1
    assert f"BREACH ({kind}" in capsys.readouterr().out
