"""A 2-rank DDP job on CPU (gloo) recorded twice at once, for
test_fanout_live_equiv.py: every rank runs gpuutil.profile() (the live
cross-rank view, assembled on rank 0) AND torch.profiler, which writes one
Chrome trace per rank (with its distributedInfo) for the offline view. The
slow rank's Dataset sleeps --slow-ms more per batch: a DataLoader straggler.

    torchrun --standalone --nproc-per-node 2 tests/python/fanout_live_job.py \\
        --out DIR --slow-rank 1 --slow-ms 30 --steps 12

Writes DIR/traces/rank<R>.json (torch.profiler) and DIR/summary<R>.json
(the rank's gpuutil summary; rank 0's has `ranks`, `cluster` and the
straggler findings).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

import gpuutil
from dist_job import SleepyDataset  # this directory: the script's own sys.path[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--slow-ms", type=float, default=30.0)
    ap.add_argument("--base-ms", type=float, default=2.0)
    args = ap.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    sleep_s = (args.base_ms + (args.slow_ms if rank == args.slow_rank else 0.0)) / 1e3
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SleepyDataset(10_000, sleep_s), batch_size=1, num_workers=0)
    it = iter(loader)

    traces = os.path.join(args.out, "traces")
    os.makedirs(traces, exist_ok=True)
    trace_path = os.path.join(traces, f"rank{rank}.json")
    live = gpuutil.profile(cluster_interval_ms=200, cluster_timeout_s=20).start()
    # A schedule makes tprof.step() record ProfilerStep#N ranges: one warm-up
    # step (not recorded), then --steps active ones, written when they end.
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=args.steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(trace_path),
    ) as tprof:
        for _ in range(args.steps + 1):
            x, y = next(it)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tprof.step()
    live.stop()
    tmp = os.path.join(args.out, f"summary{rank}.json.tmp")
    with open(tmp, "w") as f:
        json.dump(live.summary(), f)
    os.replace(tmp, os.path.join(args.out, f"summary{rank}.json"))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
