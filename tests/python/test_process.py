"""Processes and signals (issue 14): a forked child never touches the
parent's session (no duplicated reports, no deadlock, whichever way it
exits), a default SIGTERM (torchrun stopping workers) loses no finished
step, nested `with prof:` stops at the outermost exit, and steps are marked
from one thread."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import gpuutil

CHILD_EXIT = {
    "sys_exit": "sys.exit(0)",
    "os_exit": "os._exit(0)",
}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("how", sorted(CHILD_EXIT))
def test_a_forked_child_exits_cleanly_and_never_writes_the_parents_reports(tmp_path: Path, how: str) -> None:
    out = tmp_path / "steps.jsonl"
    script = textwrap.dedent(f"""
        import os, sys, time, gpuutil
        with gpuutil.profile({str(out)!r}, report_interval_ms=10_000) as prof:  # reports held back: pending at fork
            for i in range(5):
                with prof.step():
                    time.sleep(0.002)
            pid = os.fork()
            if pid == 0:
                {CHILD_EXIT[how]}
            _, status = os.waitpid(pid, 0)
            print("child", os.waitstatus_to_exitcode(status), flush=True)
            for i in range(3):
                with prof.step():
                    time.sleep(0.002)
        """)
    for attempt in range(5):  # the deadlock this pins happened in 4 of 10 runs
        out.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "child 0" in proc.stdout, proc.stdout + proc.stderr
        lines = out.read_text().splitlines()
        steps = [json.loads(line)["steps"][0]["step"] for line in lines]
        assert steps == list(range(8)), (attempt, steps)  # each once, none from the child


def test_default_sigterm_loses_no_finished_step(tmp_path: Path) -> None:
    out = tmp_path / "steps.jsonl"
    script = textwrap.dedent(f"""
        import sys, time, gpuutil
        with gpuutil.profile({str(out)!r}, report_interval_ms=60_000) as prof:  # nothing written before the end
            for i in range(10_000):
                with prof.step():
                    time.sleep(0.001)
                if i == 6:
                    print("ready", flush=True)
        """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout.readline().strip() == "ready"
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == -signal.SIGTERM, err  # still terminated by the signal, as without gpuutil
    steps = [json.loads(line)["steps"][0]["step"] for line in out.read_text().splitlines()]
    assert len(steps) >= 7 and steps == list(range(len(steps))), steps


def test_a_users_sigterm_handler_still_runs_after_the_flush(tmp_path: Path) -> None:
    out = tmp_path / "steps.jsonl"
    script = textwrap.dedent(f"""
        import os, signal, sys, time, gpuutil
        def mine(signum, frame):
            print("user handler, lines:", len(open({str(out)!r}).read().splitlines()), flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, mine)
        with gpuutil.profile({str(out)!r}, report_interval_ms=60_000) as prof:
            for i in range(4):
                with prof.step():
                    pass
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "user handler, lines: 4" in proc.stdout


def test_nested_with_blocks_stop_the_profile_only_at_the_outermost_exit() -> None:
    prof = gpuutil.profile(report_interval_ms=0)
    with prof:
        with prof:  # e.g. a helper that also wraps the loop
            with prof.step():
                pass
        with prof.step():  # still running after the inner exit
            pass
    assert len(prof.reports) == 2


def test_steps_are_marked_from_one_thread_and_another_thread_is_refused() -> None:
    errors = []
    with gpuutil.profile(report_interval_ms=0) as prof:
        with prof.step():
            pass

        def other() -> None:
            try:
                with prof.step():
                    pass
            except RuntimeError as e:
                errors.append(str(e))

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors and "one thread" in errors[0]
    assert len(prof.reports) == 1


def test_the_cupti_search_never_looks_in_the_working_directory(tmp_path: Path) -> None:
    planted = tmp_path / "nvidia" / "cu13" / "lib"
    planted.mkdir(parents=True)
    (planted / "libcupti.so.13").write_bytes(b"not a library")
    out = subprocess.run(
        [sys.executable, "-c", "import json; from gpuutil._live import cupti_wheel_dirs; print(json.dumps(cupti_wheel_dirs()))"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout
    dirs = json.loads(out)
    assert all(os.path.isabs(d) for d in dirs), dirs
    assert not any(d.startswith(str(tmp_path)) for d in dirs), dirs
