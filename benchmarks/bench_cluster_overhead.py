"""Overhead of the cross-rank view on a real 4-rank job (docs/distributed.md):
one torchrun DDP job (tests/python/dist_job.py, CPU/gloo, balanced ranks)
runs blocks of steps, each under its own gpuutil profile, alternately with
the cluster view and without it (ABBA order, in the same processes, so
launch-to-launch placement noise cancels), and the ratio of the medians of
the block times is reported. Each cluster block pays its own start-up
(store prefix, clock sync), so this is an upper bound for a long run.

    .venv/bin/python benchmarks/bench_cluster_overhead.py [--blocks 8] [--steps 150] [--launches 3]

Prints a markdown table for benchmarks/RESULTS.md (block times of rank 0;
DDP keeps the ranks in lockstep).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "python" / "dist_job.py"


def launch(blocks: int, steps: int, ranks: int, interval_ms: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), str(JOB),
            "--out", d, "--steps", str(steps), "--base-ms", "1", "--slow-ms", "0",
            "--interval-ms", str(interval_ms), "--ab-blocks", str(blocks),
        ]
        proc = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                              timeout=1200)
        if proc.returncode != 0:
            raise SystemExit(f"the job failed:\n{proc.stderr[-3000:]}")
        docs = [json.loads((Path(d) / f"rank{r}.json").read_text()) for r in range(ranks)]
        return {"times": docs[0]["ab_times_s"], "cost": [doc["cluster_cost"] for doc in docs]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=8, help="blocks per variant and launch")
    ap.add_argument("--steps", type=int, default=150, help="steps per block")
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--interval-ms", type=float, default=1000.0)
    args = ap.parse_args()
    times = {"no_cluster": [], "cluster": []}
    # CPU s of the view, of which its clock sync, and wall s of the blocks
    cpu = {"leader": [0.0, 0.0, 0.0], "follower": [0.0, 0.0, 0.0]}
    for i in range(args.launches):
        res = launch(args.blocks, args.steps, args.ranks, args.interval_ms)
        t = res["times"]
        for r, c in enumerate(res["cost"]):
            role = cpu["leader" if r == 0 else "follower"]
            role[0] += sum(c["cpu_s"])
            role[1] += sum(c["sync_cpu_s"])
            role[2] += sum(c["wall_s"])
        for k in times:
            times[k] += t[k]
        print(f"launch {i + 1}/{args.launches}: " + ", ".join(f"{k} {statistics.median(v):.3f} s" for k, v in t.items()),
              file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["cluster"] / med["no_cluster"]
    n = len(times["cluster"])
    print(f"{args.ranks} ranks (torchrun, gloo, CPU), {args.launches} launches x {args.blocks} blocks per variant "
          f"(ABBA), {args.steps} steps per block, cluster_interval_ms={args.interval_ms:g}\n")
    print("| variant | blocks | median block s | per step ms | min..max s |")
    print("|---|---|---|---|---|")
    for k in ("no_cluster", "cluster"):
        v = times[k]
        print(f"| profile, {k.replace('_', ' ')} | {len(v)} | {med[k]:.3f} | {med[k] / args.steps * 1e3:.2f} "
              f"| {min(v):.3f}..{max(v):.3f} |")
    print(f"\ncluster / no cluster (ratio of medians over {n} blocks each): {ratio:.4f} ({(ratio - 1) * 100:+.2f}%)")
    print("\nWhat the view itself used (CPU seconds of its exchange thread plus its time on the training thread while profiling, "
          "per block, over the block's wall time; the stop-time wait for the other ranks excluded):\n")
    print("| rank | view CPU / block wall | of which clock sync (once per profile) | the rest |")
    print("|---|---|---|---|")
    for role, (c, sync, w) in cpu.items():
        print(f"| {role} | {100 * c / w:.2f}% | {100 * sync / w:.2f}% | {100 * (c - sync) / w:.2f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
