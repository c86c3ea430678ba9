"""A small DDP training job on CPU (gloo) with a planted straggler, for the
cross-rank tests (test_distributed.py) and the overhead benchmark
(benchmarks/bench_cluster_overhead.py). Run it under torchrun, or as
plain processes with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set.

    torchrun --nproc-per-node 4 tests/python/dist_job.py --out DIR \\
        --slow-rank 2 --slow-ms 40 --steps 20

Each rank writes DIR/rank<R>.json: its summary (the leader's has ``ranks``,
``cluster`` and the straggler findings) and its mean step time.

Faults: ``--stop-early-rank R --stop-early-step N`` stops R's profile and
exits after step N (the others go on with local-only steps, no
collectives); ``--kill-rank R --kill-step N`` SIGKILLs R after step N.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import gpuutil


class SleepyDataset(torch.utils.data.Dataset):
    def __init__(self, n: int, sleep_s: float, d_in: int = 64, d_out: int = 8) -> None:
        self.n = n
        self.sleep_s = sleep_s
        self.d_in, self.d_out = d_in, d_out

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.sleep_s > 0:
            time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.d_in, generator=g), torch.randn(self.d_out, generator=g)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=40.0)
    ap.add_argument("--slow-local-rank", type=int, default=-1, help="slow by LOCAL_RANK (one launch of several)")
    ap.add_argument("--base-ms", type=float, default=2.0, help="every rank's per-batch dataset time")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--jsonl", default=None, help="the profile's JSON Lines output (steps.rank<R>.jsonl per rank)")
    ap.add_argument("--profile-before-init", action="store_true",
                    help="start the profile before init_process_group (the view must turn on later)")
    ap.add_argument("--no-cluster", action="store_true")
    ap.add_argument(
        "--hidden", type=int, default=0,
        help="an MLP 256-H-...-H-10 with --depth hidden layers instead of the 9k-parameter net",
    )
    ap.add_argument("--depth", type=int, default=2, help="hidden layers of the --hidden MLP")
    ap.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP's bucket_cap_mb")
    ap.add_argument("--batch-size", type=int, default=1, help="samples per step (each sleeps the per-sample time)")
    ap.add_argument("--timeout-s", type=float, default=20.0)
    ap.add_argument("--interval-ms", type=float, default=200.0)
    ap.add_argument("--stop-early-rank", type=int, default=-1)
    ap.add_argument("--stop-early-step", type=int, default=-1)
    ap.add_argument("--kill-rank", type=int, default=-1)
    ap.add_argument("--kill-step", type=int, default=-1)
    ap.add_argument("--local-steps", type=int, default=0, help="steps without collectives after the DDP ones")
    ap.add_argument(
        "--ab-blocks", type=int, default=0,
        help="benchmark: 2 x N blocks of --steps steps, each under its own profile, with and without the "
        "cluster view in ABBA order; writes the per-block loop times",
    )
    args = ap.parse_args()

    torch.set_num_threads(1)
    prof = _start_profile(args) if args.profile_before_init else None
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = rank == args.slow_rank or int(os.environ.get("LOCAL_RANK", "-2")) == args.slow_local_rank
    sleep_s = (args.base_ms + (args.slow_ms if slow else 0.0)) / 1e3
    torch.manual_seed(0)
    if args.hidden > 0:
        layers: list = []
        d = 256
        for _ in range(args.depth):
            layers += [torch.nn.Linear(d, args.hidden), torch.nn.ReLU()]
            d = args.hidden
        net = torch.nn.Sequential(*layers, torch.nn.Linear(d, 10))
        dims = (256, 10)
    else:
        net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
        dims = (64, 8)
    ddp_kw = {} if args.bucket_cap_mb is None else {"bucket_cap_mb": args.bucket_cap_mb}
    model = torch.nn.parallel.DistributedDataParallel(net, **ddp_kw)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(
        SleepyDataset(10_000 * args.batch_size, sleep_s, *dims), batch_size=args.batch_size, num_workers=0,
        shuffle=False,
    )

    if args.ab_blocks > 0:
        return _ab_blocks(args, rank, model, opt, iter(loader))

    if prof is None:
        prof = _start_profile(args)
    it = iter(loader)
    t0 = time.perf_counter()
    for step in range(args.steps):
        _train_step(model, opt, it)
        if rank == args.kill_rank and step == args.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == args.stop_early_rank and step == args.stop_early_step:
            if prof is not None:
                prof.stop()
            _write(args.out, rank, prof, t0, step + 1, 0.0, slow, model)
            return 0
    ddp_s = time.perf_counter() - t0
    for step in range(args.local_steps):  # no collectives: ranks may have left
        _train_step(net, opt, it)
    if prof is not None:
        prof.stop()
    _write(args.out, rank, prof, t0, args.steps, ddp_s, slow, model)
    if args.local_steps == 0 and args.kill_rank < 0 and args.stop_early_rank < 0:
        dist.destroy_process_group()
    return 0


def _start_profile(args: argparse.Namespace):
    if args.no_profile:
        return None
    return gpuutil.profile(
        args.jsonl,
        cluster=not args.no_cluster,
        cluster_interval_ms=args.interval_ms,
        cluster_timeout_s=args.timeout_s,
    ).start()


def _train_step(model, opt, it) -> None:
    x, y = next(it)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def _ab_blocks(args: argparse.Namespace, rank: int, model, opt, it) -> int:
    times = {"cluster": [], "no_cluster": []}
    cost = {"cpu_s": [], "sync_cpu_s": [], "wall_s": []}
    for b in range(2 * args.ab_blocks):
        with_cluster = (b % 4) in (0, 3)  # ABBA: neither variant always runs first or warm
        prof = gpuutil.profile(
            cluster=with_cluster, cluster_interval_ms=args.interval_ms, cluster_timeout_s=args.timeout_s
        ).start()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            _train_step(model, opt, it)
        wall_s = time.perf_counter() - t0
        times["cluster" if with_cluster else "no_cluster"].append(wall_s)
        prof.stop()
        for c in prof._collectors:
            if c.name == "cluster":  # what the view itself cost this rank, in CPU seconds
                cost["cpu_s"].append(c.training_thread_s + (c.exchange_thread_cpu_s or 0.0))
                cost["sync_cpu_s"].append(c.clock_sync_cpu_s or 0.0)
                cost["wall_s"].append(wall_s)
        dist.barrier()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "ab_times_s": times, "cluster_cost": cost}, f)
    dist.destroy_process_group()
    return 0


def _buckets(model) -> int:
    """The gradient buckets DDP all-reduced in its last iteration."""
    try:
        return int(model._get_ddp_logging_data().get("num_buckets_reduced", 0))
    except Exception:  # noqa: BLE001 - a private API; the count is informative only
        return 0


def _write(out: str, rank: int, prof, t0: float, steps: int, ddp_s: float, slow: bool, model) -> None:
    summary = prof.summary() if prof is not None else None
    doc = {
        "ddp_buckets": _buckets(model),
        "rank": rank,
        "steps": steps,
        "slow": slow,
        "clock_shift_ns": int(os.environ.get("GPUUTIL_CLUSTER_CLOCK_SHIFT_NS", "0")),
        "node": int(os.environ.get("GROUP_RANK", "0")),
        "ddp_s": ddp_s or time.perf_counter() - t0,
        "exit_s": time.time(),
        "summary": summary,
    }
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, f"rank{rank}.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, os.path.join(out, f"rank{rank}.json"))


if __name__ == "__main__":
    sys.exit(main())
