"""The offline fan-out (gpuutil.fanout, docs/distributed.md "Offline, at
scale"): one rank per task on a local process pool, a real Dask
LocalCluster (two worker processes) and a local Ray runtime give the same
report bytes; the report's cross-rank parts equal the combined in-process
analysis of the same traces; inputs (directories, globs, URLs) and rank
discovery; faults: a truncated file, a missing rank, a duplicate rank, a
file with no rank, an unreachable URL, and a worker killed mid-run
(retried once; killed again: the run fails naming the rank; never hangs).

Rank traces are copies of the shared HTA rank traces with
distributedInfo.rank rewritten (skipped without ../shared/traces).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import gpuutil
from gpuutil.fanout import FanoutError

SAMPLED = ("hta_sampled_rank0.json.gz", "hta_sampled_rank1.json.gz")


def _text(trace, name: str) -> str:
    return gzip.decompress(trace(name).read_bytes()).decode("utf-8")


def _with_rank(text: str, rank: Optional[int], world_size: int) -> str:
    info = "" if rank is None else f'"distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": {world_size}}}, '
    out, n = re.subn(r'"distributedInfo": \{[^}]*\}, ', info, text, count=1)
    assert n == 1
    return out


def make_ranks(trace, out: Path, n: int, world_size: Optional[int] = None) -> List[Path]:
    """n rank files: the sampled rank 0 and rank 1 traces alternately, rank rewritten."""
    texts = [_text(trace, name) for name in SAMPLED]
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(n):
        p = out / f"rank{r:03d}.json.gz"
        p.write_bytes(gzip.compress(_with_rank(texts[r % 2], r, world_size or n).encode(), mtime=0))
        paths.append(p)
    return paths


def cross_rank(report: Dict[str, Any]) -> Dict[str, Any]:
    """The parts of a report that must equal between the fan-out and the combined analysis."""
    return {"ranks": report["summary"]["ranks"], "cluster": report["summary"]["cluster"],
            "stragglers": [f for f in report["findings"] if f["id"] == "straggler"]}


@pytest.fixture(scope="module")
def four_ranks(trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("four")
    make_ranks(trace, d, 4)
    return d


@pytest.fixture(scope="module")
def local_bytes(four_ranks: Path) -> str:
    return json.dumps(gpuutil.analyze_ranks(str(four_ranks), jobs=2))


# --- equality with the combined analysis -------------------------------------------------------


def test_the_fanout_gives_the_combined_analysis_cross_rank_view_on_the_shared_rank_traces(trace) -> None:
    paths = [str(trace(name)) for name in SAMPLED]
    combined = gpuutil.analyze(paths)
    assert "ranks" in combined["summary"]
    fanned = gpuutil.analyze_ranks(paths, jobs=2, world_size=2)  # the traces say world_size 128
    assert fanned["kind"] == "cluster" and fanned["schema"] == gpuutil.REPORT_SCHEMA
    assert cross_rank(fanned) == cross_rank(combined)
    assert [d["rank"] for d in fanned["ranks_detail"]] == [0, 1]


def test_the_fanout_gives_the_combined_analysis_cross_rank_view_on_four_generated_ranks(four_ranks: Path) -> None:
    paths = sorted(str(p) for p in four_ranks.iterdir())
    combined = gpuutil.analyze(paths)
    fanned = gpuutil.analyze_ranks(paths, jobs=2)
    assert cross_rank(fanned) == cross_rank(combined)
    assert fanned["summary"]["cluster"]["world_size"] == 4 and fanned["summary"]["ranks_analyzed"] == 4
    assert "missing_reasons" not in fanned["summary"]["cluster"]


def test_gpuutil_analyze_routes_to_the_fanout_on_a_fanout_option_only(four_ranks: Path) -> None:
    paths = sorted(str(p) for p in four_ranks.iterdir())
    assert "kind" not in gpuutil.analyze(paths)  # 4 files: today's combined report
    assert gpuutil.analyze(paths, jobs=1)["kind"] == "cluster"
    with pytest.raises(TypeError, match="unexpected keyword argument 'jobz'"):
        gpuutil.analyze(paths, jobz=1)


# --- executors: byte-identical reports ---------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::ResourceWarning", "ignore::UserWarning")
def test_a_dask_localcluster_of_two_worker_processes_gives_the_local_pools_bytes(four_ranks: Path,
                                                                                 local_bytes: str) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        report = gpuutil.analyze_ranks(str(four_ranks), executor="dask", scheduler=cluster.scheduler_address)
    assert json.dumps(report) == local_bytes


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::ResourceWarning", "ignore::UserWarning",
                            "ignore::FutureWarning")
def test_a_local_ray_runtime_gives_the_local_pools_bytes(four_ranks: Path, local_bytes: str) -> None:
    try:
        import ray  # noqa: F401
    except ImportError as e:
        pytest.skip(f"ray is not installed for this Python ({e}); its wheel may be unavailable here")
    report = gpuutil.analyze_ranks(str(four_ranks), executor="ray", jobs=2)
    assert json.dumps(report) == local_bytes


def test_the_command_line_prints_the_reports_json_and_a_bounded_table(four_ranks: Path, tmp_path: Path, trace,
                                                                       run_cli, local_bytes: str) -> None:
    proc = run_cli("analyze", four_ranks, "--jobs", "2", "--indent", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(local_bytes)
    many = tmp_path / "many"
    make_ranks(trace, many, 12)
    out = tmp_path / "ranks.jsonl"
    proc = run_cli("analyze", str(many / "*.json.gz"), "--ranks-out", out)  # a glob: the fan-out
    assert proc.returncode == 0, proc.stderr
    assert "Slowest 5 ranks" in proc.stdout and "Fastest 5 ranks" in proc.stdout
    assert len([ln for ln in proc.stdout.splitlines() if re.match(r"^\s+\d+\s+rank\d+", ln)]) == 10
    rows = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert {r["rank"] for r in rows} == set(range(12))
    steps = {r["step"] for r in rows}
    assert len(rows) == 12 * len(steps)
    assert all(r["wall_ns"] == r["own_ns"] + r["collective_wait_ns"] for r in rows)


def test_ranks_out_parquet_holds_the_same_rows_as_jsonl(four_ranks: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    gpuutil.analyze_ranks(str(four_ranks), jobs=1, ranks_out=str(tmp_path / "r.jsonl"))
    gpuutil.analyze_ranks(str(four_ranks), jobs=1, ranks_out=str(tmp_path / "r.parquet"))
    rows = [json.loads(ln) for ln in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert pq.read_table(tmp_path / "r.parquet").to_pylist() == rows


# --- discovery and bad input sets: exit 2, one line naming the file or rank ---------------------


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.stdout[:300], proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuutil: error: "), proc.stderr
    return lines[0]


def test_a_duplicate_rank_fails_naming_both_files(trace, tmp_path: Path, run_cli) -> None:
    paths = make_ranks(trace, tmp_path, 3)
    dup = tmp_path / "rank_again.json.gz"
    dup.write_bytes(paths[1].read_bytes())
    line = _one_error_line(run_cli("analyze", tmp_path, "--jobs", "1"))
    assert "rank 1 is in both" in line and paths[1].name in line and dup.name in line


def test_a_missing_rank_fails_naming_it_and_is_named_with_its_reason_under_skip(trace, tmp_path: Path,
                                                                                run_cli) -> None:
    paths = make_ranks(trace, tmp_path, 4)
    paths[2].unlink()
    line = _one_error_line(run_cli("analyze", tmp_path, "--jobs", "1"))
    assert "missing rank 2 of world size 4" in line
    report = gpuutil.analyze_ranks(str(tmp_path), jobs=1, on_error="skip")
    cluster = report["summary"]["cluster"]
    assert cluster["missing_ranks"] == [2]
    assert cluster["missing_reasons"] == [{"rank": 2, "input": None, "reason": "no input file"}]
    assert [r["rank"] for r in report["summary"]["ranks"]] == [0, 1, 3]


def test_a_file_with_no_rank_fails_naming_it_unless_ranks_come_from_names(trace, tmp_path: Path, run_cli) -> None:
    text = _text(trace, SAMPLED[0])
    for r in range(3):
        (tmp_path / f"worker{r}.json.gz").write_bytes(gzip.compress(_with_rank(text, None, 3).encode()))
    line = _one_error_line(run_cli("analyze", tmp_path, "--jobs", "1"))
    assert "worker0.json.gz: no distributedInfo" in line and "--rank-from-name" in line
    proc = run_cli("analyze", tmp_path, "--jobs", "1", "--rank-from-name", r"worker(\d+)", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(r["rank"], r["host"]) for r in report["summary"]["ranks"]] == [
        (0, "worker0.json.gz"), (1, "worker1.json.gz"), (2, "worker2.json.gz")]


def test_a_truncated_file_fails_naming_it_and_is_skipped_with_its_reason_under_skip(trace, tmp_path: Path,
                                                                                     run_cli) -> None:
    paths = make_ranks(trace, tmp_path, 3)
    data = paths[1].read_bytes()
    paths[1].write_bytes(data[: len(data) // 2])  # the head (and its rank) still reads
    line = _one_error_line(run_cli("analyze", tmp_path, "--jobs", "2"))
    assert f"cannot read {paths[1]}" in line
    report = gpuutil.analyze_ranks(str(tmp_path), jobs=2, on_error="skip")
    cluster = report["summary"]["cluster"]
    assert cluster["missing_ranks"] == [1]
    (reason,) = cluster["missing_reasons"]
    assert reason["rank"] == 1 and reason["input"] == str(paths[1]) and str(paths[1]) in reason["reason"]


def test_an_unreachable_url_fails_naming_it(run_cli) -> None:
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/job/rank0.json.gz"
    line = _one_error_line(run_cli("analyze", url, timeout=120))
    assert f"cannot read {url}" in line
    with pytest.raises(FanoutError, match=re.escape(f"cannot read {url}")):
        gpuutil.analyze_ranks([url])


def test_bad_fanout_arguments_are_refused_before_any_work(four_ranks: Path, run_cli) -> None:
    with pytest.raises(ValueError, match="on_error must be one of fail, skip"):
        gpuutil.analyze_ranks(str(four_ranks), on_error="ignore")
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        gpuutil.analyze_ranks(str(four_ranks), jobs=0)
    with pytest.raises(FanoutError, match="must end in .jsonl or .parquet"):
        gpuutil.analyze_ranks(str(four_ranks), ranks_out="ranks.csv")
    line = _one_error_line(run_cli("analyze", four_ranks, "--jobs", "1", "--usd-per-gpu-hour", "2"))
    assert "--usd-per-gpu-hour applies to one job's report" in line


# --- a worker killed mid-run -----------------------------------------------------------------


def _descendants(pid: int) -> List[int]:
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _holds(pid: int, fifo: Path) -> bool:
    """Whether process `pid` has `fifo` open (a killed process with threads
    keeps its files until its last thread has exited)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")  # a zombie leader's own fd/ is gone while a thread lives on
    except OSError:
        return False
    for tid in tasks:
        where = f"/proc/{pid}/task/{tid}/fd"
        try:
            fds = os.listdir(where)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{where}/{fd}") == str(fifo):
                    return True
            except OSError:
                continue
    return False


def _reader_of(fifo: Path, root: int) -> Optional[int]:
    """The descendant of `root` that has `fifo` open."""
    return next((pid for pid in _descendants(root) if _holds(pid, fifo)), None)


def _kill_reader(fifo: Path, root: int, deadline: float, probe: bool = True) -> int:
    """Waits until a worker process below `root` is reading `fifo` (it opens
    the FIFO, and blocks there until a writer comes), SIGKILLs it; its pid.
    probe: find it by opening the FIFO's write end without blocking (a
    reader then exists); else by scanning /proc only."""
    while not probe and time.monotonic() < deadline:
        pid = _reader_of(fifo, root)
        if pid is None:
            time.sleep(0.02)
            continue
        os.kill(pid, signal.SIGKILL)
        while _holds(pid, fifo) and time.monotonic() < deadline:
            time.sleep(0.01)
        return pid
    while time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # succeeds once a reader has it open
        except OSError:
            time.sleep(0.02)
            continue
        try:
            pid = None
            while pid is None and time.monotonic() < deadline:
                pid = _reader_of(fifo, root)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            while _holds(pid, fifo) and time.monotonic() < deadline:  # until it has let go of the FIFO
                time.sleep(0.01)
            return pid
        finally:
            os.close(fd)
    raise AssertionError("no worker opened the FIFO in time")


def _fifo_rank_set(trace, tmp_path: Path) -> List[Path]:
    """rank0..rank3, rank 3 a FIFO (its worker blocks until the test writes it)."""
    paths = make_ranks(trace, tmp_path / "real", 4)
    fifo_dir = tmp_path / "set"
    fifo_dir.mkdir()
    inputs = []
    for p in paths[:3]:
        (fifo_dir / p.name).symlink_to(p)
        inputs.append(fifo_dir / p.name)
    fifo = fifo_dir / paths[3].name
    os.mkfifo(fifo)
    inputs.append(fifo)
    return inputs


def test_a_worker_killed_mid_run_is_retried_and_the_report_is_unchanged(trace, tmp_path: Path) -> None:
    inputs = _fifo_rank_set(trace, tmp_path)
    real = tmp_path / "real" / inputs[3].name
    want = gpuutil.analyze_ranks(sorted(str(p) for p in (tmp_path / "real").iterdir()), jobs=1)
    deadline = time.monotonic() + 120

    def killer() -> None:
        _kill_reader(inputs[3], os.getpid(), deadline)
        with open(inputs[3], "wb") as f:  # the retry's worker opens it: feed it the trace
            f.write(real.read_bytes())

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    got = gpuutil.analyze_ranks([str(p) for p in inputs], jobs=2, rank_from_name=r"rank(\d+)")
    t.join(timeout=10)
    assert cross_rank(got) == cross_rank(want)


def test_a_rank_whose_worker_dies_twice_fails_the_run_naming_it_and_nothing_hangs(trace, tmp_path: Path,
                                                                                  gpuutil_exe: str) -> None:
    import subprocess

    inputs = _fifo_rank_set(trace, tmp_path)
    proc = subprocess.Popen([gpuutil_exe, "analyze", *map(str, inputs), "--jobs", "2", "--rank-from-name",
                             r"rank(\d+)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        first = _kill_reader(inputs[3], proc.pid, deadline)
        second = _kill_reader(inputs[3], proc.pid, deadline)  # the retry, alone in a fresh pool
        assert first != second
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, (out[:300], err)
    assert err.count("\n") == 1 and err.startswith("gpuutil: error: ")
    assert f"rank 3 ({inputs[3]}) died" in err


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::ResourceWarning", "ignore::UserWarning")
def test_dask_retries_a_rank_whose_worker_was_killed(trace, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    inputs = _fifo_rank_set(trace, tmp_path)
    real = tmp_path / "real" / inputs[3].name
    want = gpuutil.analyze_ranks(sorted(str(p) for p in (tmp_path / "real").iterdir()), jobs=1)
    deadline = time.monotonic() + 120

    def killer() -> None:
        _kill_reader(inputs[3], os.getpid(), deadline, probe=False)
        with open(inputs[3], "wb") as f:  # the restarted worker's retry opens it
            f.write(real.read_bytes())

    # One worker process: its nanny restarts it, and the task runs again there.
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        t = threading.Thread(target=killer, daemon=True)
        t.start()
        got = gpuutil.analyze_ranks([str(p) for p in inputs], executor="dask", scheduler=cluster.scheduler_address,
                                    rank_from_name=r"rank(\d+)")
        t.join(timeout=10)
    assert cross_rank(got) == cross_rank(want)
