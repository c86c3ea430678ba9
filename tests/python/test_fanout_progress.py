"""The fan-out's progress line (python/gpuutil/fanout/_progress.py, issue 30):
on a terminal, ranks done / total, bytes read and their rate, ranks per
second and the ETA, redrawn in place (at most every 0.2 s; the last rank
always), within the terminal's width, ended by a newline; nothing at all
when the stream is not a terminal. Driven by a fake clock and a StringIO
that says it is a terminal; end to end, `gpuutil analyze GLOB --jobs 2`
with stderr on a pseudo-terminal shows the bar there while stdout's report
is byte-identical to a run without one.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import termios
import threading
from pathlib import Path
from typing import List

import pytest

from conftest import rank_trace_generator, traces_dir
from gpuutil.fanout._progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _segments(text: str) -> List[str]:
    """The lines drawn, in order (each starts with \\r and ends by erasing the rest of the line)."""
    assert text.startswith("\r"), text[:80]
    parts = text.split("\r")[1:]
    assert all(p.endswith("\x1b[K") or p.endswith("\x1b[K\n") or p in ("\n",) for p in parts), parts
    return [p.replace("\x1b[K", "").rstrip("\n") for p in parts if p != "\n"]


def test_on_a_terminal_each_line_shows_done_total_bytes_rate_and_eta():
    out, clock = _Terminal(), _Clock(100.0)
    bar = Progress(4, stream=out, clock=clock, columns=200)
    clock.t = 102.0
    bar.update(4_000_000)
    clock.t = 102.1
    bar.update(4_000_000)  # within 0.2 s of the last line: not redrawn
    clock.t = 106.0
    bar.update(4_000_000)
    clock.t = 106.05
    bar.update(4_000_000)  # the last rank: always drawn
    clock.t = 107.0
    bar.close()
    assert _segments(out.getvalue()) == [
        "[........................] 0/4 ranks  0.0 MB read (0.0 MB/s)  0.0 ranks/s  0:00 elapsed",
        "[######..................] 1/4 ranks  4.0 MB read (2.0 MB/s)  0.5 ranks/s  ETA 0:06",
        "[##################......] 3/4 ranks  12 MB read (2.0 MB/s)  0.5 ranks/s  ETA 0:02",
        "[########################] 4/4 ranks  16 MB read (2.6 MB/s)  0.7 ranks/s  done in 0:06",
        "[########################] 4/4 ranks  16 MB read (2.3 MB/s)  0.6 ranks/s  done in 0:07",
    ]


def test_the_final_line_ends_with_a_newline_and_close_twice_writes_it_once():
    out, clock = _Terminal(), _Clock(0.0)
    bar = Progress(2, stream=out, clock=clock, columns=200)
    clock.t = 1.0
    bar.update(1)
    clock.t = 2.0
    bar.update(1)
    bar.close()
    bar.close()
    text = out.getvalue()
    assert text.endswith("\x1b[K\n") and text.count("\n") == 1


def test_a_run_that_fails_before_any_rank_still_ends_its_line():
    out = _Terminal()
    bar = Progress(8, stream=out, clock=_Clock(5.0), columns=200)
    bar.close()
    assert _segments(out.getvalue())[-1].startswith("[........................] 0/8 ranks")
    assert out.getvalue().endswith("\n")


def test_not_a_terminal_nothing_is_written():
    out, clock = io.StringIO(), _Clock(0.0)
    bar = Progress(3, stream=out, clock=clock)
    for t in (1.0, 2.0, 3.0):
        clock.t = t
        bar.update(10_000_000)
    bar.close()
    assert out.getvalue() == ""
    assert not bar.enabled and bar.done == 3 and bar.bytes == 30_000_000
    # Disabled explicitly (--no-progress) on a terminal: nothing either.
    tty = _Terminal()
    quiet = Progress(3, enabled=False, stream=tty, clock=clock)
    quiet.update(1)
    quiet.close()
    assert tty.getvalue() == ""


def test_a_narrow_terminal_gets_a_shorter_bar_fewer_rates_and_never_a_wrapped_line():
    expected = {
        100: "[############............] 512/1024 ranks  1024.0 GB read (275 MB/s)  0.1 ranks/s  ETA 1:02:05",
        80: "[####.....] 512/1024 ranks  1024.0 GB read (275 MB/s)  0.1 ranks/s  ETA 1:02:05",
        70: "[######......] 512/1024 ranks  1024.0 GB read (275 MB/s)  ETA 1:02:05",
        40: "[####.....] 512/1024 ranks  ETA 1:02:05",
        30: "512/1024 ranks  ETA 1:02:05",
        20: "512/1024 ranks  ETA",
    }
    for columns, want in expected.items():
        out, clock = _Terminal(), _Clock(0.0)
        bar = Progress(1024, stream=out, clock=clock, columns=columns)
        clock.t = 3725.0  # 1:02:05: 512 ranks done, as many to go
        for _ in range(512):
            bar.update(2_000_000_000)  # redrawn once (0.2 s apart at most), then by close()
        bar.close()
        lines = _segments(out.getvalue())
        assert all(len(line) <= columns - 1 for line in lines), (columns, lines)
        assert lines[-1] == want



@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory) -> Path:
    base = traces_dir() / "hta_nccl_a100_rank0.json.gz"
    if not base.is_file():
        pytest.skip(f"base trace {base} not found (set GPUUTIL_TRACES_DIR)")
    out = tmp_path_factory.mktemp("ranks4")
    rank_trace_generator().make_rank_traces(out, 4, 2, 25.0, base=base)
    return out


def _run_on_pty(argv: List[str], columns: int) -> "tuple[int, bytes, bytes]":
    """Runs argv with stderr on a pseudo-terminal `columns` wide: (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    got: List[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child and the parent's copy of the slave are closed
                return
            if not chunk:
                return
            got.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    try:
        stdout, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(30)
    os.close(master)
    return proc.returncode, stdout, b"".join(got)


def test_analyze_on_a_terminal_draws_the_bar_on_stderr_and_leaves_stdout_unchanged(ranks_dir: Path, gpuutil_exe):
    argv = [gpuutil_exe, "analyze", str(ranks_dir / "rank*.json.gz"), "--jobs", "2"]
    code, stdout, terminal = _run_on_pty(argv, columns=100)
    assert code == 0, terminal.decode(errors="replace")
    plain = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    assert plain.returncode == 0 and plain.stderr == b""  # not a terminal: no progress at all
    assert stdout == plain.stdout and stdout.startswith(b"Cluster: 4 of 4 ranks analysed")
    text = terminal.decode()
    assert text.endswith("\x1b[K\r\n")  # the terminal turns the final \n into \r\n
    lines = _segments(text.replace("\r\n", "\n"))
    assert lines[0].startswith("[........................] 0/4 ranks  0.0 MB read")
    assert re.fullmatch(r"\[#{24}\] 4/4 ranks  3\.\d MB read \(\d+(\.\d)? MB/s\)  \d+\.\d ranks/s  done in 0:\d\d",
                        lines[-1]), lines[-1]
    assert all(len(line) <= 99 for line in lines)
    # --no-progress: the terminal gets nothing.
    code, quiet_out, quiet_terminal = _run_on_pty(argv + ["--no-progress"], columns=100)
    assert code == 0 and quiet_terminal == b"" and quiet_out == plain.stdout
