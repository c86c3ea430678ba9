#!/usr/bin/env python3
"""Offline cross-rank analysis at scale (issue 30): wall, rate and memory of
gpuutil.analyze_ranks on many synthetic rank traces, its scaling with
workers, and 8 ranks side by side with HTA's multi-rank TraceAnalysis.

The ranks come from benchmarks/make_rank_traces.py (the shared
hta_nccl_a100_rank0.json.gz repeated to ~2 MB compressed per rank, one
DataLoader straggler); they are written under --work (default /tmp), never
into the repository. Every analysis runs in its own child process:

  gpuutil  .venv/bin/python: gpuutil.analyze_ranks([DIR or files], jobs=W)
           (the local process pool); the child reports its own peak RSS
           (getrusage RUSAGE_SELF: the parent of the pool), RUSAGE_CHILDREN
           (0 when the pool's workers are not its own children, e.g. a
           forkserver's) and both CPU times
  HTA      .venv-hta/bin/python (benchmarks/setup_hta_venv.sh): hta_compare.py's
           child, TraceAnalysis(trace_dir=DIR) + get_idle_time_breakdown(ranks)
           (HTA's own multi-rank load, a process per rank; analyze_s times
           both), then the same rusage figures
Besides, this script samples the child's whole process tree every 20 ms
(psutil): the peak of the summed RSS, and each descendant's own peak RSS
(/proc/PID/status VmHWM, a high-water mark, so sampling misses nothing
while the worker lives): the largest is the worker's peak; and their CPU
seconds (the last sample before each exits, so a lower bound). It reads the
load average before and after each run (the machine may be shared).

Usage (repo root):
  .venv/bin/python benchmarks/bench_fanout.py                 # everything
  .venv/bin/python benchmarks/bench_fanout.py --only big      # 1,024 ranks, jobs 2
  .venv/bin/python benchmarks/bench_fanout.py --only scaling  # 1 and 2 workers, --small-ranks and --scaling-ranks
  .venv/bin/python benchmarks/bench_fanout.py --only dask     # the same on a Dask LocalCluster (2 workers)
  .venv/bin/python benchmarks/bench_fanout.py --only hta      # 8 ranks vs HTA
Results: one JSON object per run on stdout (and appended to --log), a
summary at the end on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import hta_compare  # noqa: E402
import make_rank_traces  # noqa: E402

GPUUTIL_CHILD = r"""
import json, resource, sys, time
inputs, jobs, kw, out_path = json.loads(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
t0 = time.perf_counter()
import gpuutil
analyze_ranks = gpuutil.analyze_ranks
t1 = time.perf_counter()
report = analyze_ranks(inputs, jobs=jobs, **kw) if jobs > 0 else gpuutil.analyze(inputs)
t2 = time.perf_counter()
s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
found = [(f["rank"], f.get("cause")) for f in report["findings"] if f["id"] == "straggler"]
with open(out_path, "w") as f:
    json.dump({"import_s": t1 - t0, "analyze_s": t2 - t1,
               "self_maxrss_kb": s.ru_maxrss, "children_maxrss_kb": c.ru_maxrss,
               "self_cpu_s": s.ru_utime + s.ru_stime, "children_cpu_s": c.ru_utime + c.ru_stime,
               "ranks": len(report["summary"]["ranks"]), "stragglers": found}, f)
"""

# HTA's run exactly as benchmarks/hta_compare.py times it (TraceAnalysis on
# the directory + get_idle_time_breakdown), then this process's rusage.
HTA_CHILD = hta_compare.HTA_CHILD.replace("import json, sys, time", "import json, resource, sys, time", 1) + r"""
s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out_path) as f:
    res = json.load(f)
res.update({"self_maxrss_kb": s.ru_maxrss, "children_maxrss_kb": c.ru_maxrss,
            "self_cpu_s": s.ru_utime + s.ru_stime, "children_cpu_s": c.ru_utime + c.ru_stime})
res.pop("streams", None)
res.pop("idle", None)
with open(out_path, "w") as f:
    json.dump(res, f)
"""


def _hwm_bytes(pid: int) -> int:
    """The process's own peak RSS so far (VmHWM), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def sample_tree(proc: psutil.Process, hwm: Dict[int, int], cpu: Dict[int, float]) -> int:
    """Summed RSS of the process and its descendants now; records each one's
    VmHWM in hwm and its CPU seconds so far in cpu."""
    total = 0
    try:
        procs = [proc] + proc.children(recursive=True)
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
            hwm[p.pid] = max(hwm.get(p.pid, 0), _hwm_bytes(p.pid))
            t = p.cpu_times()
            cpu[p.pid] = max(cpu.get(p.pid, 0.0), t.user + t.system)
        except psutil.Error:
            pass
    return total


def run_child(python: Path, code: str, args: List[str], label: str, log_dir: Path) -> Dict[str, Any]:
    out = Path(tempfile.mkstemp(prefix="bench_fanout_", suffix=".json")[1])
    load_before = os.getloadavg()
    log_path = log_dir / f"{label}.log"
    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(python), "-c", code, *args, str(out)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, cwd=str(REPO))
        ps = psutil.Process(proc.pid)
        peak_tree, hwm, cpu = 0, {}, {}
        while proc.poll() is None:
            peak_tree = max(peak_tree, sample_tree(ps, hwm, cpu))
            time.sleep(0.02)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_fanout: error: {label} exited {proc.returncode}; see {log_path}")
    res = json.loads(out.read_text())
    out.unlink()
    others = [v for pid, v in hwm.items() if pid != proc.pid]
    res.update({"label": label, "process_wall_s": wall, "peak_tree_rss_mb": peak_tree / 1e6,
                "descendants": len(others), "max_descendant_hwm_mb": max(others, default=0) / 1e6,
                "descendants_cpu_s": sum(v for pid, v in cpu.items() if pid != proc.pid),
                "load_before": load_before, "load_after": os.getloadavg()})
    return res


def ensure_ranks(work: Path, ranks: int, target_mb: float, straggler: int, delay_ms: float) -> Dict[str, Any]:
    """Generates the ranks once; a stamp beside the directory records what is in it."""
    d = work / f"ranks{ranks}_{target_mb:g}mb"
    stamp = work / f"ranks{ranks}_{target_mb:g}mb.stamp.json"
    want = {"ranks": ranks, "target_mb": target_mb, "straggler": straggler, "delay_ms": delay_ms}
    if stamp.is_file():
        info = json.loads(stamp.read_text())
        if info.get("want") == want and all(Path(p).is_file() for p in info["paths"]):
            return info
    info = make_rank_traces.make_rank_traces(d, ranks, straggler, delay_ms, target_mb=target_mb)
    info["want"] = want
    stamp.write_text(json.dumps(info))
    print(f"bench_fanout: generated {ranks} ranks in {d} in {info['seconds']:.1f} s "
          f"({sum(info['compressed_bytes']) / 1e9:.2f} GB compressed)", file=sys.stderr)
    return info


def report_line(res: Dict[str, Any], ranks: int, nbytes: int) -> str:
    return (f"{res['label']}: {ranks} ranks ({nbytes / 1e9:.2f} GB gz) in {res['analyze_s']:.1f} s "
            f"({ranks / res['analyze_s']:.1f} ranks/s; process {res['process_wall_s']:.1f} s), "
            f"parent peak RSS {res['self_maxrss_kb'] / 1024:.0f} MiB, largest child {res['children_maxrss_kb'] / 1024:.0f} MiB, "
            f"tree peak {res['peak_tree_rss_mb']:.0f} MB, largest of {res['descendants']} descendants (VmHWM) "
            f"{res['max_descendant_hwm_mb']:.0f} MB; CPU parent {res['self_cpu_s']:.1f} s, descendants "
            f"{max(res['children_cpu_s'], res['descendants_cpu_s']):.1f} s; load {res['load_before'][0]:.2f} -> {res['load_after'][0]:.2f}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "gpuutil_fanout_bench"))
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--target-mb", type=float, default=2.0)
    ap.add_argument("--jobs", type=int, default=2, help="workers of the big run")
    ap.add_argument("--scaling-ranks", type=int, default=128)
    ap.add_argument("--hta-ranks", type=int, default=8)
    ap.add_argument("--small-ranks", type=int, default=16, help="the scaling runs' second size (fixed costs)")
    ap.add_argument("--only", choices=("big", "scaling", "dask", "hta"), action="append")
    ap.add_argument("--log", default=None, help="append each run's JSON to this file")
    args = ap.parse_args(argv)
    parts = set(args.only or ("big", "scaling", "dask", "hta"))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    py = REPO / ".venv" / "bin" / "python"
    results: List[Dict[str, Any]] = []
    lines: List[str] = []

    def emit(res: Dict[str, Any], ranks: int, nbytes: int) -> None:
        results.append(res)
        print(json.dumps(res), flush=True)
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps(res) + "\n")
        lines.append(report_line(res, ranks, nbytes))

    if parts & {"big", "scaling", "dask"}:
        big = ensure_ranks(work, args.ranks, args.target_mb, straggler=args.ranks // 3, delay_ms=25.0)
        if "big" in parts:
            d = str(Path(big["paths"][0]).parent)
            emit(run_child(py, GPUUTIL_CHILD, [json.dumps([d]), str(args.jobs), "{}"], f"gpuutil_{args.ranks}_jobs{args.jobs}", work),
                 args.ranks, sum(big["compressed_bytes"]))
        # wall(N, W) = fixed_W + N x per_rank_W: two sizes give both terms
        runs = []
        if "scaling" in parts:
            runs += [("local", 1), ("local", 2)]
        if "dask" in parts:
            runs += [("dask", 2)]  # a LocalCluster of 2 worker processes, started inside the call
        for executor, jobs in runs:
            for n in (args.small_ranks, args.scaling_ranks):
                kw = {"world_size": n, "executor": executor}
                emit(run_child(py, GPUUTIL_CHILD, [json.dumps(big["paths"][:n]), str(jobs), json.dumps(kw)],
                               f"gpuutil_{n}_{executor}_jobs{jobs}", work), n, sum(big["compressed_bytes"][:n]))
    if "hta" in parts:
        hta_py = REPO / ".venv-hta" / "bin" / "python"
        if not hta_py.exists():
            raise SystemExit("bench_fanout: error: .venv-hta missing: run bash benchmarks/setup_hta_venv.sh")
        small = ensure_ranks(work, args.hta_ranks, args.target_mb, straggler=1, delay_ms=25.0)
        d = str(Path(small["paths"][0]).parent)
        nbytes = sum(small["compressed_bytes"])
        emit(run_child(hta_py, HTA_CHILD, [d], f"hta_{args.hta_ranks}", work), args.hta_ranks, nbytes)
        emit(run_child(py, GPUUTIL_CHILD, [json.dumps([d]), "2", "{}"], f"gpuutil_{args.hta_ranks}_jobs2", work),
             args.hta_ranks, nbytes)
        emit(run_child(py, GPUUTIL_CHILD, [json.dumps(small["paths"]), "0", "{}"], f"gpuutil_{args.hta_ranks}_combined", work),
             args.hta_ranks, nbytes)
    for line in lines:
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
