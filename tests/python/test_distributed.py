"""The cross-rank view on real multi-process jobs (CPU, gloo): torchrun with
one planted straggler (a 9k-parameter net, and a multi-bucket MLP whose
gradient all-reduces run concurrently), two torchrun launches as two
"nodes" whose clocks differ by seconds, ranks that stop early or are
killed, and Lightning DDP.

Each job is tests/python/dist_job.py (or lightning_ddp_job.py); every rank
writes its summary to a JSON file the test reads. Timeouts bound every
job: a hang fails the test instead of blocking CI.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():  # pragma: no cover
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

HERE = Path(__file__).resolve().parent
JOB = HERE / "dist_job.py"
PLANTED_MS = 40.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def _run(cmd: List[str], timeout: float, env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _torchrun(*args: str) -> List[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def _load(out: Path, world: int) -> Dict[int, Dict[str, Any]]:
    docs = {}
    for r in range(world):
        p = out / f"rank{r}.json"
        if p.exists():
            docs[r] = json.loads(p.read_text())
    return docs


def _straggler(summary: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [f for f in summary["findings"] if f["id"] == "straggler"]


def _check_planted_straggler(summary: Dict[str, Any], slow_rank: int, world: int) -> None:
    """Done-when: rank 0's summary names the slow rank with cause dataloader;
    the other ranks' median collective wait per step is >= 75% of the
    planted delay; the slow rank's own wait is small."""
    assert summary["cluster"]["world_size"] == world
    assert summary["cluster"]["missing_ranks"] == []
    ranks = {r["rank"]: r for r in summary["ranks"]}
    assert sorted(ranks) == list(range(world))
    found = _straggler(summary)
    assert [f["rank"] for f in found] == [slow_rank], found
    assert found[0]["cause"] == "dataloader", found[0]
    assert found[0]["host"] == socket.gethostname()
    for r, info in ranks.items():
        wait_ms = info["collective_wait_p50_ns"] / 1e6
        if r == slow_rank:
            assert wait_ms < 0.25 * PLANTED_MS, info
            assert info["relative_perf"] < 0.5, info
        else:
            assert wait_ms >= 0.75 * PLANTED_MS, info
            assert info["relative_perf"] > 0.5, info
    assert summary["cluster"]["collective_mismatches"] == 0
    assert summary["top_finding"] is None or isinstance(summary["top_finding"], dict)


def _only_load_stragglers(summary: Dict[str, Any], slow_rank: int) -> bool:
    """True when the planted rank leads the straggler findings and the others
    named besides it are not planted: four ranks share two cores here, and a
    rank the scheduler kept waiting for 5% of a step is a straggler too."""
    ranks = [f["rank"] for f in _straggler(summary)]
    return len(ranks) > 1 and ranks[0] == slow_rank


def test_four_rank_torchrun_job_names_the_dataloader_straggler_and_what_the_others_wait(tmp_path: Path) -> None:
    # Played again (up to 3 times) only when the machine's load named an
    # unplanted rank besides the planted one; every assertion below holds
    # for the run that is kept.
    for attempt in range(3):
        run_dir = tmp_path / f"attempt{attempt}"
        run_dir.mkdir()
        out = run_dir / "out"
        proc = _run(
            _torchrun(
                "--standalone", "--nproc-per-node", "4", str(JOB),
                "--out", str(out), "--slow-rank", "2", "--slow-ms", str(PLANTED_MS), "--steps", "20",
                "--jsonl", str(run_dir / "steps.jsonl"),
            ),
            timeout=240,
            env=_env(),
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        docs = _load(out, 4)
        if 0 not in docs or not _only_load_stragglers(docs[0]["summary"], 2):
            break
    tmp_path = run_dir
    assert sorted(docs) == [0, 1, 2, 3]
    _check_planted_straggler(docs[0]["summary"], slow_rank=2, world=4)
    # Only the leader assembles.
    for r in (1, 2, 3):
        assert "ranks" not in docs[r]["summary"]
    assert docs[0]["summary"]["cluster"]["lost_ranks"] == []
    # The leader's JSON Lines file has cluster records between its step
    # reports; the last one names the straggler. The others' files have none.
    lines = [json.loads(x) for x in (tmp_path / "steps.rank0.jsonl").read_text().splitlines()]
    records = [x for x in lines if x["schema"] == "gpuutil.cluster/1"]
    assert lines[-1]["schema"] == "gpuutil.run/1"  # the run record, written at stop
    assert records and len(lines) - len(records) - 1 == 20
    assert [f["rank"] for f in records[-1]["findings"]] == [2]
    assert records[-1]["ranks"] == docs[0]["summary"]["ranks"]
    for r in (1, 2, 3):
        other = (tmp_path / f"steps.rank{r}.jsonl").read_text().splitlines()
        assert len(other) == 21 and all(json.loads(x)["schema"] == "gpuutil.report/1" for x in other[:-1])
        assert json.loads(other[-1])["schema"] == "gpuutil.run/1"


def test_multi_bucket_ddp_fast_rank_waits_for_the_straggler_once_not_once_per_bucket(tmp_path: Path) -> None:
    """DDP over gloo with a 2.6 MB MLP and bucket_cap_mb=0.25: three gradient
    buckets, all-reduced by gloo's two worker threads at once. Rank 1's
    Dataset sleeps 2 ms more per sample (16 per batch: 32 ms per step)."""
    planted_ms = 16 * 2.0
    # Played again (up to 3 times) only when the measured excess or wait is
    # off by more than 20%: with two CPU hogs beside the job on this 2-core
    # machine, 1 run in 12 measured 40.6 ms. Every other assertion holds for
    # every run.
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        proc = _run(
            _torchrun(
                "--standalone", "--nproc-per-node", "2", str(JOB), "--out", str(out), "--steps", "20",
                "--hidden", "512", "--depth", "3", "--bucket-cap-mb", "0.25", "--batch-size", "16",
                "--base-ms", "0.2", "--slow-rank", "1", "--slow-ms", "2",
            ),
            timeout=120,
            env=_env(),
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        docs = _load(out, 2)
        assert sorted(docs) == [0, 1]
        assert docs[0]["ddp_buckets"] >= 3, docs[0]["ddp_buckets"]
        summary = docs[0]["summary"]
        assert summary["cluster"]["collective_mismatches"] == 0
        assert summary["cluster"]["collective_instances"] >= 3 * 20
        ranks = {r["rank"]: r for r in summary["ranks"]}
        for r in ranks.values():
            # A rank's wait is time inside its step: never above its wall.
            assert 0 <= r["collective_wait_p50_ns"] <= r["step_wall_p50_ns"], r
            assert r["own_p50_ns"] >= 0, r
        for step in summary["cluster"]["recent_steps"]:
            for r in step["ranks"]:
                assert r["collective_wait_ns"] <= r["wall_ns"], step
                assert r["own_ns"] == r["wall_ns"] - r["collective_wait_ns"], step
        assert ranks[0]["relative_perf"] == 1.0, ranks  # the fastest rank
        assert ranks[1]["relative_perf"] < 1.0, ranks
        found = _straggler(summary)
        assert [f["rank"] for f in found] == [1] and found[0]["cause"] == "dataloader", found
        # Rank 0's training thread blocks in DDP's reducer at the end of
        # backward until the all-reduces are done: collective, not backward.
        per_step = {k: v / ranks[0]["steps"] / 1e6 for k, v in ranks[0]["breakdown_ns"].items()}
        assert per_step["collective"] >= 0.75 * planted_ms, per_step
        assert per_step["backward"] < 0.25 * per_step["collective"], per_step
        excess_ms = (ranks[1]["own_p50_ns"] - ranks[0]["own_p50_ns"]) / 1e6
        wait_ms = ranks[0]["collective_wait_p50_ns"] / 1e6
        close = abs(excess_ms - planted_ms) <= 0.2 * planted_ms and abs(wait_ms - planted_ms) <= 0.2 * planted_ms
        if close:
            break
    assert abs(excess_ms - planted_ms) <= 0.2 * planted_ms, (excess_ms, ranks)
    assert abs(wait_ms - planted_ms) <= 0.2 * planted_ms, (wait_ms, ranks)


def _two_launches(out: Path, shift_ns: int) -> Dict[int, Dict[str, Any]]:
    """Two torchrun launches of two ranks each, as two nodes; node 1's
    CLOCK_MONOTONIC is shift_ns ahead and its local rank 1 is the slow one."""
    port = _free_port()
    common = [
        "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"gpuutil-test-{port}",
    ]
    # The profiles start before init_process_group: the view turns on later.
    job = [str(JOB), "--out", str(out), "--slow-ms", str(PLANTED_MS), "--steps", "20", "--profile-before-init"]
    node0 = subprocess.Popen(
        _torchrun(*common, "--node-rank", "0", *job), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    node1 = subprocess.Popen(
        _torchrun(*common, "--node-rank", "1", *job, "--slow-local-rank", "1"),
        env=_env(GPUUTIL_CLUSTER_CLOCK_SHIFT_NS=str(shift_ns)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err0 = node0.communicate(timeout=300)
        _, err1 = node1.communicate(timeout=60)
    finally:
        for p in (node0, node1):
            if p.poll() is None:
                p.kill()
    assert node0.returncode == 0, err0[-4000:]
    assert node1.returncode == 0, err1[-4000:]
    return _load(out, 4)


def test_two_launches_as_two_nodes_with_clocks_seconds_apart_give_the_same_result(tmp_path: Path) -> None:
    shift_ns = 7_000_000_000  # node 1's CLOCK_MONOTONIC is 7 s ahead
    # Played again (up to 3 times) only when the machine's load named an
    # unplanted rank besides the planted one, as in the four-rank test.
    for attempt in range(3):
        docs = _two_launches(tmp_path / f"out{attempt}", shift_ns)
        slow = [r for r, d in docs.items() if d["slow"]]
        if 0 not in docs or len(slow) != 1 or not _only_load_stragglers(docs[0]["summary"], slow[0]):
            break
    assert sorted(docs) == [0, 1, 2, 3]
    slow = [r for r, d in docs.items() if d["slow"]]
    assert len(slow) == 1
    summary = docs[0]["summary"]
    _check_planted_straggler(summary, slow_rank=slow[0], world=4)
    # The offsets measured through the store undo the planted clock shift,
    # within the reported uncertainty (+1 ms for the wall clock between the
    # two samples of one round trip).
    leader_shift = docs[0]["clock_shift_ns"]
    for info in summary["ranks"]:
        expected = leader_shift - docs[info["rank"]]["clock_shift_ns"]
        assert info["clock_offset_ns"] is not None, info
        assert abs(info["clock_offset_ns"] - expected) <= info["clock_uncertainty_ns"] + 1_000_000, info
        # Step starts on one timeline: within a step of each other, not 7 s.
        assert info["start_skew_p50_ns"] is not None and info["start_skew_p50_ns"] < 100_000_000, info
    assert {d["clock_shift_ns"] for d in docs.values()} == {0, shift_ns}


def test_a_rank_that_stops_early_and_one_that_is_killed_hang_nobody_and_are_named(tmp_path: Path) -> None:
    """Plain processes (no torchrun, whose agent would tear the job down when
    a worker dies): rank 1 stops profiling and exits after 6 steps, rank 3
    is SIGKILLed then; ranks 0 and 2 go on with 6 local steps."""
    out = tmp_path / "out"
    port = _free_port()
    timeout_s = 3.0
    procs = []
    for r in range(4):
        env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE="4", LOCAL_RANK=str(r))
        cmd = [
            sys.executable, str(JOB), "--out", str(out), "--steps", "6", "--local-steps", "6",
            "--stop-early-rank", "1", "--stop-early-step", "5", "--kill-rank", "3", "--kill-step", "5",
            "--timeout-s", str(timeout_s), "--interval-ms", "50",
        ]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    started = time.monotonic()
    errs = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=120)
            errs.append(err)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    elapsed = time.monotonic() - started
    codes = [p.returncode for p in procs]
    assert codes[3] == -9, codes  # killed
    assert codes[:3] == [0, 0, 0], (codes, [e[-2000:] for e in errs])
    docs = _load(out, 4)
    assert sorted(docs) == [0, 1, 2]
    cluster = docs[0]["summary"]["cluster"]
    assert 3 in cluster["lost_ranks"], cluster
    assert 3 in cluster["missing_ranks"] or 3 in cluster["short_ranks"], cluster
    assert 1 in cluster["short_ranks"], cluster
    ranks = {r["rank"]: r for r in docs[0]["summary"]["ranks"]}
    assert ranks[1]["finished"] is True
    assert ranks[0]["steps"] == 12 and ranks[2]["steps"] == 12
    # Nobody waited much longer than the loss timeout for the dead rank.
    assert elapsed < 90, elapsed


def test_lightning_ddp_on_two_cpu_processes_gets_the_cluster_view_from_the_callback(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    out = tmp_path / "out"
    proc = _run(
        [sys.executable, str(HERE / "lightning_ddp_job.py"), str(out)],
        timeout=300,
        env=_env(MASTER_PORT=str(_free_port())),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads((out / "rank0.json").read_text())
    summary = doc["summary"]
    assert summary["cluster"]["world_size"] == 2
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert summary["cluster"]["steps_compared"] >= 8
    found = _straggler(summary)
    assert [f["rank"] for f in found] == [1] and found[0]["cause"] == "dataloader", found
    assert summary["ranks"][0]["collective_wait_p50_ns"] >= 0.75 * 30e6


def test_huggingface_trainer_under_torchrun_gets_the_cluster_view_from_the_callback(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "out"
    proc = _run(
        _torchrun("--standalone", "--nproc-per-node", "2", str(HERE / "hf_ddp_job.py"), str(out)),
        timeout=300,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((out / "rank0.json").read_text())["summary"]
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert summary["cluster"]["steps_compared"] >= 8
    found = _straggler(summary)
    assert [f["rank"] for f in found] == [1] and found[0]["cause"] == "dataloader", found
    assert summary["ranks"][0]["collective_wait_p50_ns"] >= 0.75 * 30e6
