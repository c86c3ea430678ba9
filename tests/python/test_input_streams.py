"""Standard input, pipes and FIFOs in both CLIs, and the import's memory budget.

`gpuutil analyze` and the native `gpuutil-analyze` hand `-`, `/dev/stdin`,
`<(...)` paths and FIFOs to the importer's one streaming reader
(docs/trace-import.md, "Standard input, pipes and FIFOs"), under one memory
budget (`--max-memory`, default 768 MiB; "Memory budget"). Pinned here,
for both CLIs, each run in a fresh process whose peak RSS is read with
getrusage(RUSAGE_CHILDREN) in a wrapper process:

- 3 GB offered on standard input by a generator process (a valid header,
  then kernel events without end) exits 2 with one stderr line naming the
  budget and `--max-memory`, at a peak RSS under 1 GB; 3 GB of bytes that
  are not a trace are refused from their first bytes;
- a 1 GiB-of-kernel-events `.json.gz` of a few MB is refused by the
  default budget, at a peak RSS under 1 GB;
- `/dev/stdin`, `<(gzip -dc t.json.gz)` (bash process substitution), a
  gzip file on standard input and a pipe give the file's report;
- a FIFO without a writer exits 2 within the bounded wait; an empty
  standard input is one line naming `<stdin>`; `--max-memory` is checked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from test_native_cli import _native_exe

# Writes a valid Kineto header then kernel events ("events"), or binary
# bytes ("binary"), to stdout until LIMIT bytes or the reader goes away.
GENERATOR = r'''
import os, sys
limit, kind = int(float(sys.argv[1])), sys.argv[2]
if kind == "events":
    head = b'{\n  "schemaVersion": 1,\n  "traceEvents": [\n'
    ev = ('  {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": %d, '
          '"dur": 2, "args": {"device": 0, "stream": 7, "correlation": %d}},\n')
    block = "".join(ev % (1000 + 3 * i, i) for i in range(8000)).encode()
else:
    head, block = b"", bytes(range(256)) * 4096
sent = os.write(1, head)
try:
    while sent < limit:
        sent += os.write(1, block)
except OSError:
    pass
'''

# Runs argv[1:] with this process's stdin; prints its exit code, stderr,
# peak RSS (RUSAGE_CHILDREN: the command alone) and wall time as JSON.
MEASURE = r'''
import json, resource, subprocess, sys, time
start = time.monotonic()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
print(json.dumps({"rc": p.returncode, "stderr": p.stderr.decode(errors="replace"),
                  "peak_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
                  "seconds": time.monotonic() - start}))
'''

GB = 1_000_000_000


@pytest.fixture(params=["native", "python"])
def cli(request, gpuutil_exe):
    """The analyze command of each CLI, as an argv prefix (JSON output)."""
    if request.param == "native":
        return [str(_native_exe())]
    return [gpuutil_exe, "analyze", "--json"]


def _measured(cmd, stdin, env=None, timeout=600) -> dict:
    """`cmd` run with `stdin` (a file object, or "generator:LIMIT:KIND")."""
    gen = None
    if isinstance(stdin, str):
        _, limit, kind = stdin.split(":")
        gen = subprocess.Popen([sys.executable, "-c", GENERATOR, limit, kind], stdout=subprocess.PIPE)
        stdin = gen.stdout
    proc = subprocess.Popen([sys.executable, "-c", MEASURE, *map(str, cmd)], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    if gen is not None:
        gen.stdout.close()  # the command's copy only: it ends the generator when it stops reading
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if gen is not None:
            gen.kill()
            gen.wait()
    assert proc.returncode == 0, err
    result = json.loads(out)
    print(f"{' '.join(map(str, cmd))}: rc {result['rc']}, peak RSS {result['peak_rss'] / 1e6:.0f} MB, "
          f"{result['seconds']:.1f} s: {result['stderr'].strip()}")
    return result


def _one_error_line(result: dict, prog: str) -> str:
    assert result["rc"] == 2, result
    lines = result["stderr"].splitlines()
    assert len(lines) == 1, result["stderr"]
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


def _prog(cli) -> str:
    return "gpuutil-analyze" if len(cli) == 1 else "gpuutil"


def test_3_gb_of_kernel_events_on_stdin_stop_at_the_budget(cli):
    result = _measured([*cli, "-"], f"generator:{3 * GB}:events")
    line = _one_error_line(result, _prog(cli))
    assert "cannot read <stdin>: over the import's memory budget of 768 MiB after" in line
    assert "pass --max-memory (e.g. 2G) to raise it" in line
    assert result["peak_rss"] < 1 * GB


def test_3_gb_of_bytes_that_are_not_a_trace_are_refused_at_once(cli):
    result = _measured([*cli, "-"], f"generator:{3 * GB}:binary")
    line = _one_error_line(result, _prog(cli))
    assert "cannot read <stdin>: not a JSON trace: it starts with byte 0x00 at byte 0" in line
    assert result["peak_rss"] < 200_000_000
    assert result["seconds"] < 30


@pytest.fixture(scope="module")
def gigabyte_of_events_gz(tmp_path_factory) -> Path:
    """1 GiB of compact kernel events (15 million; the device and stream from
    pid and tid), gzip: a few MB. Closed, so that it is a valid trace."""
    ev = '  {"ph":"X","cat":"kernel","name":"sgemm_128x64_nn","pid":0,"tid":7,"ts":%d,"dur":2},\n'
    block = "".join(ev % (1000 + 3 * i) for i in range(4)).encode()
    mib = block * ((1 << 20) // len(block))
    path = tmp_path_factory.mktemp("gz") / "events_1gib.json.gz"
    deflate = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip framing
    with open(path, "wb") as f:
        f.write(deflate.compress(b'{\n  "traceEvents": [\n'))
        for _ in range(1024):
            f.write(deflate.compress(mib))
        f.write(deflate.compress(b'  {"ph": "i", "name": "end", "pid": 0, "tid": 7, "ts": 0}\n  ]\n}\n'))
        f.write(deflate.flush())
    return path


def test_a_gigabyte_of_events_in_a_small_gzip_is_refused_by_the_default_budget(cli, gigabyte_of_events_gz):
    assert gigabyte_of_events_gz.stat().st_size < 16_000_000
    result = _measured([*cli, gigabyte_of_events_gz], subprocess.DEVNULL)
    line = _one_error_line(result, _prog(cli))
    assert f"cannot read {gigabyte_of_events_gz}: over the import's memory budget of 768 MiB" in line
    assert result["peak_rss"] < 1 * GB


def _report_without_paths(stdout: bytes) -> dict:
    doc = json.loads(stdout)
    for source in doc["sources"]:
        source.pop("path")
    return doc


def test_dev_stdin_process_substitution_and_pipes_read_like_the_file(cli, trace):
    if shutil.which("bash") is None:
        pytest.skip("no bash for process substitution")
    path = trace("hta_train_v100_dataloader_nccl_rank1.json.gz")  # 32 MB inflated: the largest shared trace
    direct = subprocess.run([*cli, path], capture_output=True, stdin=subprocess.DEVNULL, timeout=300)
    assert direct.returncode == 0, direct.stderr
    expected = _report_without_paths(direct.stdout)
    command = " ".join(map(str, cli))
    for shell, name in [
        (f"{command} <(gzip -dc {path})", "/dev/fd/"),
        (f"gzip -dc {path} | {command} /dev/stdin", "/dev/stdin"),
        (f"{command} /dev/stdin < {path}", "/dev/stdin"),
        (f"cat {path} | {command} -", "<stdin>"),
        (f"{command} - < {path}", "<stdin>"),
    ]:
        out = subprocess.run(["bash", "-c", shell], capture_output=True, timeout=300)
        assert out.returncode == 0, (shell, out.stderr)
        assert out.stderr == b"", shell
        assert json.loads(out.stdout)["sources"][0]["path"].startswith(name), shell
        assert _report_without_paths(out.stdout) == expected, shell


def test_a_fifo_without_a_writer_fails_within_the_wait(cli, tmp_path):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    env = dict(os.environ, GPUUTIL_INPUT_WAIT_S="1")
    start = time.monotonic()
    out = subprocess.run([*cli, fifo], capture_output=True, stdin=subprocess.DEVNULL, timeout=60, env=env)
    seconds = time.monotonic() - start
    line = _one_error_line({"rc": out.returncode, "stderr": out.stderr.decode()}, _prog(cli))
    assert f"no writer opened the FIFO {fifo} within 1 s" in line
    assert 0.9 < seconds < 20


def test_a_fifo_whose_writer_comes_imports(cli, tmp_path, trace):
    path = trace("hta_event_sync_a100.json.gz")
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"sleep 0.5; cat {path} > {fifo}"])
    out = subprocess.run([*cli, fifo], capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    writer.wait(timeout=60)
    assert out.returncode == 0, out.stderr
    direct = subprocess.run([*cli, path], capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    assert _report_without_paths(out.stdout) == _report_without_paths(direct.stdout)


def test_empty_standard_input_is_one_line_naming_stdin(cli):
    out = subprocess.run([*cli, "-"], input=b"", capture_output=True, timeout=120)
    line = _one_error_line({"rc": out.returncode, "stderr": out.stderr.decode()}, _prog(cli))
    assert "cannot read <stdin>: " in line
    assert "gpuutil-stdin" not in line and "/tmp" not in line


def test_max_memory_is_checked_and_named_in_the_refusal(cli, trace):
    path = trace("hta_train_v100_dataloader_nccl_rank1.json.gz")
    bad = subprocess.run([*cli, path, "--max-memory", "2X"], capture_output=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    assert bad.returncode == 2 and b"not a memory size: '2X'" in bad.stderr
    small = subprocess.run([*cli, path, "--max-memory", "4M"], capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=120)
    line = _one_error_line({"rc": small.returncode, "stderr": small.stderr.decode()}, _prog(cli))
    assert "over the import's memory budget of 4 MiB" in line and "pass --max-memory (e.g. 1G)" in line
    roomy = subprocess.run([*cli, path, "--max-memory=1.5G"], capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=120)
    assert roomy.returncode == 0, roomy.stderr


def test_export_perfetto_reads_standard_input(gpuutil_exe, trace):
    path = trace("hta_event_sync_a100.json.gz")
    with open(path, "rb") as stdin:
        out = subprocess.run([gpuutil_exe, "export", "perfetto", "-"], stdin=stdin, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    direct = subprocess.run([gpuutil_exe, "export", "perfetto", path], capture_output=True, timeout=120)
    assert json.loads(out.stdout) == json.loads(direct.stdout)
    empty = subprocess.run([gpuutil_exe, "export", "perfetto", "-"], input=b"", capture_output=True, timeout=120)
    assert empty.returncode == 2 and empty.stderr.count(b"\n") == 1 and b"cannot read <stdin>" in empty.stderr


def test_the_python_api_takes_max_memory(installed_gpuutil, trace):
    from gpuutil import _api

    path = str(trace("hta_train_v100_dataloader_nccl_rank1.json.gz"))
    with pytest.raises(installed_gpuutil.TraceError, match=r"memory budget of 4 MiB .*pass max_memory \(e\.g\. 1G\)"):
        installed_gpuutil.analyze(path, max_memory="4M")
    assert installed_gpuutil.analyze(path, max_memory=2 << 30)["steps"]
    assert installed_gpuutil.analyze(path, max_memory="unlimited")["steps"]
    with pytest.raises(ValueError, match="not a memory size"):
        installed_gpuutil.analyze(path, max_memory="lots")
    with pytest.raises(TypeError):
        installed_gpuutil.analyze(path, max_memory=1.5)
    assert _api.DEFAULT_MAX_MEMORY == 768 << 20
