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
from typing import List

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
        steps = [json.loads(line)["steps"][0]["step"] for line in lines if '"gpuutil.report/' in line]
        assert steps == list(range(8)), (attempt, steps)  # each once, none from the child
        assert sum('"gpuutil.run/' in line for line in lines) == 1  # the parent's run record only


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
    steps = [json.loads(line)["steps"][0]["step"] for line in out.read_text().splitlines() if '"gpuutil.report/' in line]
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


# A training script that stops the usual way under a scheduler's preemption:
# its SIGTERM handler only sets a flag, the loop trains a few more steps,
# saves a checkpoint and exits 0 (issue 32, item 1).
_FLAG_ONLY_SCRIPT = """
import os, signal, sys, contextlib, torch, gpuutil
out, ckpt, explicit = sys.argv[1], sys.argv[2], sys.argv[3] == "explicit"
stop = False
def say(line):
    # One write per line: the SIGTERM handler runs between two bytecodes,
    # and print() writes its pieces one by one ("step" + handler's line).
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()
def on_term(signum, frame):
    global stop
    stop = True
    say("sigterm")
signal.signal(signal.SIGTERM, on_term)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
after = 0
# report_interval_ms: nothing is written on the way, only by the SIGTERM flush and the end.
with gpuutil.profile(out, report_interval_ms=600_000) as prof:
    for i in range(100_000):
        with (prof.step() if explicit else contextlib.nullcontext()):
            loss = model(torch.randn(16, 32)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        say(f"step {i}")
        if stop:
            after += 1
            if after == 5:
                torch.save(model.state_dict(), ckpt)
                break
say(f"trained {i + 1}")
"""


def _steps_in(path: Path) -> List[int]:
    # The step reports (the run record written at stop is not one).
    return [json.loads(line)["steps"][0]["step"] for line in path.read_text().splitlines() if '"gpuutil.report/' in line]


@pytest.mark.parametrize("steps", ["explicit", "automatic"])
def test_a_flag_only_sigterm_handler_trains_on_checkpoints_and_exits_0_with_every_step_reported(
        tmp_path: Path, steps: str) -> None:
    pytest.importorskip("torch")
    out, ckpt = tmp_path / "steps.jsonl", tmp_path / "model.pt"
    with subprocess.Popen([sys.executable, "-c", _FLAG_ONLY_SCRIPT, str(out), str(ckpt), steps],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            while proc.stdout.readline().strip() != "step 6":
                assert proc.poll() is None, proc.stderr.read()
            proc.send_signal(signal.SIGTERM)
            stdout, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert "sigterm" in stdout and ckpt.is_file(), stdout + err
    trained = int(stdout.split("trained")[-1])
    assert trained >= 11  # 7 before the signal (at least), the rest after it
    assert _steps_in(out) == list(range(trained)), err


@pytest.mark.parametrize("steps", ["explicit", "automatic"])
def test_a_sigkill_after_the_sigterm_loses_no_step_finished_before_it(tmp_path: Path, steps: str) -> None:
    pytest.importorskip("torch")
    out, ckpt = tmp_path / "steps.jsonl", tmp_path / "model.pt"
    finished: List[int] = []
    with subprocess.Popen([sys.executable, "-c", _FLAG_ONLY_SCRIPT, str(out), str(ckpt), steps],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = ""
            while not line.startswith("step 6"):
                line = proc.stdout.readline().strip()
                assert line or proc.poll() is None, proc.stderr.read()
                if line.startswith("step "):
                    finished.append(int(line.split()[1]))
            proc.send_signal(signal.SIGTERM)
            # The user's handler runs after gpuutil's flush: kill as soon as it
            # says so, as a scheduler's grace period running out would.
            while (line := proc.stdout.readline().strip()) != "sigterm":
                assert line, proc.stderr.read()
                finished.append(int(line.split()[1]))
            proc.kill()
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == -signal.SIGKILL
    reported = _steps_in(out)
    assert set(finished) <= set(reported), (finished, reported)
    assert reported == list(range(len(reported)))


def test_a_sigterm_flush_inside_a_report_batch_runs_when_the_batch_ends_and_never_deadlocks() -> None:
    # A signal handler runs between two bytecodes of the main thread, so the
    # SIGTERM flush can interrupt gpuutil's own report batch, e.g. inside an
    # on_step sink, which may itself read prof.reports.
    seen: List[int] = []
    prof = gpuutil.profile(report_interval_ms=0)

    def sink(report: dict) -> None:
        seen.append(report["steps"][0]["step"])
        if len(seen) == 2:
            prof.flush_finished()  # what the handler calls; re-entered: run after the batch
            assert len(prof.reports) >= 1  # nested on one thread: no deadlock

    prof._on_step = [sink]
    with prof:
        for _ in range(4):
            with prof.step():
                pass
        assert not prof._flush_pending
    assert seen == [0, 1, 2, 3]


def test_nested_with_blocks_stop_the_profile_only_at_the_outermost_exit() -> None:
    prof = gpuutil.profile(report_interval_ms=0)
    with prof:
        with prof:  # e.g. a helper that also wraps the loop
            with prof.step():
                pass
        with prof.step():  # still running after the inner exit
            pass
    assert len(prof.reports) == 2


def _step_on_another_thread(prof: gpuutil.Profile) -> List[str]:
    """Marks a step from a new thread; the errors it got."""
    errors: List[str] = []

    def other() -> None:
        try:
            with prof.step():
                pass
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    return errors


def test_steps_are_marked_from_one_thread_and_another_thread_is_refused() -> None:
    with gpuutil.profile(report_interval_ms=0) as prof:
        with prof.step():
            pass
        errors = _step_on_another_thread(prof)
    assert errors and "the thread that started the profile" in errors[0]
    assert len(prof.reports) == 1


def test_a_step_refused_on_another_thread_does_not_advance_the_step_numbers() -> None:
    with gpuutil.profile(report_interval_ms=0) as prof:
        for i in range(3):
            with prof.step():
                pass
            if i == 0:
                assert len(_step_on_another_thread(prof)) == 1
    assert [r["steps"][0]["step"] for r in prof.reports] == [0, 1, 2]


def test_the_thread_that_started_the_profile_owns_its_steps_even_if_another_marks_first() -> None:
    with gpuutil.profile(report_interval_ms=0) as prof:
        errors = _step_on_another_thread(prof)
        with prof.step():  # the training loop's thread: never refused
            pass
    assert len(errors) == 1
    assert [r["steps"][0]["step"] for r in prof.reports] == [0]


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
