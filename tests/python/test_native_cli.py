"""The native `gpuutil-analyze`: the bytes of `gpuutil analyze --json`, without Python.

It is installed next to the `gpuutil` console script (CMakeLists.txt,
SKBUILD_SCRIPTS_DIR). Pinned here: for the same traces and options it
prints exactly what the Python command prints with --json (planted traces,
several ranks, standard input, every option, every shared trace when
../shared is there); bad arguments and unreadable inputs exit 2 with one
line, an unwritable output exits 1, and gpuutil's own reports are sent to
`gpuutil analyze` rather than imported.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO, all_traces


def _native_exe() -> Path:
    if os.environ.get("GPUUTIL_ANALYZE_EXE"):  # another build (a sanitizer build, an older one to compare)
        return Path(os.environ["GPUUTIL_ANALYZE_EXE"])
    for d in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent, REPO / "build"):
        exe = d / "gpuutil-analyze"
        if exe.is_file():
            return exe
    pytest.skip("gpuutil-analyze is not installed (scripts/bootstrap.sh builds and installs it)")


@pytest.fixture(scope="module")
def native() -> Path:
    return _native_exe()


def _run(cmd, stdin_bytes: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], input=stdin_bytes, capture_output=True, timeout=300,
                          stdin=None if stdin_bytes is not None else subprocess.DEVNULL)


def _python_json(gpuutil_exe: str, *args, stdin_bytes: bytes | None = None) -> bytes:
    proc = _run([gpuutil_exe, "analyze", "--json", *args], stdin_bytes)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _planted_gpu_trace(path: Path, steps: int = 4, rank: int | None = None) -> Path:
    """Kineto's layout: per step a DataLoader wait, a launch and its kernel, a sync."""
    events = []
    t = 1_000_000
    for s in range(steps):
        start = t
        events.append({"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                       "pid": 1, "tid": 1, "ts": t, "dur": 200.5})
        t += 201
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t, "dur": 5, "args": {"correlation": s + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7,
                       "ts": t + 8, "dur": 300.25,
                       "args": {"correlation": s + 1, "device": 0, "stream": 7, "grid": [80, 1, 1],
                                "block": [256, 1, 1], "registers per thread": 64, "shared memory": 0}})
        t += 320
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
                       "ts": t, "dur": 10})
        t += 12
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                       "ts": start, "dur": t - start})
        t += 3
    doc = {"schemaVersion": 1,
           "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
                                 "numSms": 108, "maxThreadsPerMultiprocessor": 2048,
                                 "regsPerMultiprocessor": 65536, "sharedMemPerMultiprocessor": 167936}],
           "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    text = json.dumps(doc, indent=1)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_native_report_is_the_python_commands_json(native, gpuutil_exe, tmp_path):
    t = _planted_gpu_trace(tmp_path / "planted.json")
    out = _run([native, t])
    assert out.returncode == 0, out.stderr
    assert out.stdout == _python_json(gpuutil_exe, t)
    report = json.loads(out.stdout)
    assert report["schema"] == "gpuutil.report/1"
    assert len(report["steps"]) == 4


@pytest.mark.parametrize("opts", [
    ["--indent", "2"],
    ["--indent=0"],
    ["--json", "--indent", "3"],
    ["--flops-per-step", "1e12", "--dtype", "fp16"],
    ["--peak-tflops=123.5", "--flops-per-step=2.5e11"],
    ["--flops-per-step", "5e-324"],  # a subnormal: both commands accept it (found by tests/fuzz)
])
def test_native_options_give_the_same_report(native, gpuutil_exe, tmp_path, opts):
    t = _planted_gpu_trace(tmp_path / "planted.json.gz")
    out = _run([native, t, *opts])
    assert out.returncode == 0, out.stderr
    assert out.stdout == _python_json(gpuutil_exe, t, *opts)


def test_native_multi_rank_and_output_file(native, gpuutil_exe, tmp_path):
    r0 = _planted_gpu_trace(tmp_path / "r0.json", rank=0)
    r1 = _planted_gpu_trace(tmp_path / "r1.json.gz", steps=5, rank=1)
    dest = tmp_path / "report.json"
    out = _run([native, "-o", dest, r0, r1])
    assert out.returncode == 0 and out.stdout == b"", out.stderr
    assert dest.read_bytes() == _python_json(gpuutil_exe, r0, r1)
    assert sorted({d["rank"] for d in json.loads(dest.read_bytes())["summary"]["devices"]}) == [0, 1]


def test_native_reads_standard_input(native, gpuutil_exe, tmp_path):
    t = _planted_gpu_trace(tmp_path / "planted.json.gz")
    data = t.read_bytes()
    out = _run([native, "-"], stdin_bytes=data)
    assert out.returncode == 0, out.stderr
    assert out.stdout == _python_json(gpuutil_exe, "-", stdin_bytes=data)
    assert b'"<stdin>"' in out.stdout


def test_native_cli_errors_are_one_line(native, tmp_path):
    missing = _run([native, tmp_path / "nope.json"])
    assert missing.returncode == 2 and missing.stdout == b""
    assert missing.stderr.decode().startswith(f"gpuutil-analyze: error: cannot read {tmp_path / 'nope.json'}")
    assert missing.stderr.count(b"\n") == 1

    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", ')
    invalid = _run([native, bad])
    assert invalid.returncode == 2 and b"cannot read" in invalid.stderr

    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(b'{"traceEvents": []}' * 100)[:30])
    assert _run([native, gz]).returncode == 2

    good = _planted_gpu_trace(tmp_path / "good.json")
    among = _run([native, good, tmp_path / "nope.json"])
    assert among.returncode == 2 and b"nope.json" in among.stderr and among.stdout == b""

    unwritable = _run([native, good, "-o", tmp_path / "no_dir" / "out.json"])
    assert unwritable.returncode == 1 and b"cannot write" in unwritable.stderr


def test_native_cli_refuses_gpuutil_reports(native, gpuutil_exe, tmp_path):
    t = _planted_gpu_trace(tmp_path / "planted.json")
    report = tmp_path / "report.json"
    report.write_bytes(_python_json(gpuutil_exe, t))
    out = _run([native, report])
    assert out.returncode == 2
    assert b"is a gpuutil report, not a trace" in out.stderr


@pytest.mark.parametrize("args", [
    [],
    ["--indent"],
    ["--indent", "17"],
    ["--indent", "-1"],
    ["--indent", "two"],
    ["--flops-per-step", "0"],
    ["--flops-per-step", "nan"],
    ["--peak-tflops", "-3"],
    ["--dtype", "fp4"],
    ["--frobnicate"],
    ["-", "-"],
])
def test_native_bad_arguments_exit_2(native, tmp_path, args):
    t = _planted_gpu_trace(tmp_path / "planted.json")
    full = args if not args or args == ["-", "-"] else [t, *args]
    out = _run([native, *full], stdin_bytes=b"" if "-" in full else None)
    assert out.returncode == 2, (args, out.stderr)
    assert out.stdout == b""
    assert b"gpuutil-analyze: error: " in out.stderr


def test_native_help_and_version(native, installed_gpuutil):
    h = _run([native, "--help"])
    assert h.returncode == 0 and b"usage: gpuutil-analyze" in h.stdout and b"--peak-tflops" in h.stdout
    v = _run([native, "--version"])
    assert v.returncode == 0 and v.stdout.decode().strip() == f"gpuutil {installed_gpuutil.__version__}"


@pytest.mark.parametrize("path", all_traces(), ids=lambda p: p.name)
def test_native_report_matches_on_every_shared_trace(native, installed_gpuutil, path):
    out = _run([native, path])
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode() == installed_gpuutil.analyze_json(str(path)) + "\n"
