"""What gpuutil's live step path costs, piece by piece (µs per call, best
of 7 repeats, in-process; complements bench_torch_overhead.py, whose
whole-loop differences are at the mercy of a noisy machine):

  optimizer.step() of a tiny model, plain / under gpuutil (the step pre/post
      hooks, PyTorch's own record_function ranges seen by the LibTorch hook,
      and the automatic step boundary)
  Profile.auto_step_boundary()   the boundary alone (close the step, per-step collector work)
  Session.report_async()         the training thread's share of a report batch
                                 (take the worker's JSON lines, wake it), per step
  Session.collect()              the analysis + JSON of one host-only step, as the
                                 worker does it (here on this thread), per step

    python benchmarks/bench_step_path.py [--steps 20000]

With --instructions, only the last: the analysis + JSON of --steps planted
host-only steps in batches of 100, counted by callgrind (instructions in
Session::collect_batch and everything it calls, per step; exact and
repeatable, unlike the times above; needs valgrind):

    python benchmarks/bench_step_path.py --instructions [--steps 1000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import gpuutil
from gpuutil import _core

RANGES = (
    "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
    "nn.Module: Sequential",
    "## backward ##",
    "Optimizer.step#SGD.step",
    "Optimizer.zero_grad#SGD.zero_grad",
)


def best_us(fn, n: int) -> float:
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t) / n / 1000.0)
    return best


def feed(session, steps: int, t0: int, thread: int) -> int:
    """`steps` host-only steps of five ranges each (the small MLP loop's shape)."""
    t = t0
    for i in range(steps):
        start = t
        for k, name in enumerate(RANGES):
            session.add_range(name, t + k * 100_000, t + k * 100_000 + 90_000, thread, False)
        t += 600_000
        session.close_step(i, start, t)
    return t


def analysis_per_step(steps: int) -> "tuple[float, float]":
    """(synchronous collect µs per step, report_async µs per step on the calling thread)."""
    s = _core.Session(jsonl_path="", rank=0)
    s.set_steps_source("optimizer_step")
    th = s.thread_index(1, 1, "main")
    t, spent = 1_000_000_000, 0
    for _ in range(steps // 100):
        t = feed(s, 100, t, th)
        c = time.process_time_ns()
        s.collect(t)
        spent += time.process_time_ns() - c
    sync_us = spent / steps / 1000.0
    s = _core.Session(jsonl_path="", rank=0)
    s.start_worker()
    s.set_steps_source("optimizer_step")
    th = s.thread_index(1, 1, "main")
    t, spent = 1_000_000_000, 0
    for _ in range(steps // 100):
        t = feed(s, 100, t, th)
        time.sleep(0.003)  # the worker finishes the previous batch meanwhile
        c = time.perf_counter_ns()
        s.report_async(t)
        spent += time.perf_counter_ns() - c
    s.finish(t)
    return sync_us, spent / steps / 1000.0


def collect_batches(steps: int) -> None:
    """The worker's work, on this thread: `steps` planted steps, collected in batches of 100."""
    s = _core.Session(jsonl_path="", rank=0)
    s.set_steps_source("optimizer_step")
    th = s.thread_index(1, 1, "main")
    t = 1_000_000_000
    for _ in range(steps // 100):
        t = feed(s, 100, t, th)
        s.collect(t)


def instructions_per_step(steps: int) -> float:
    """collect_batches(steps) under callgrind, counting Session::collect_batch only."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=gpuutil::Session::collect_batch*",
               f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__), "--child-collect",
               "--steps", str(steps)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(out):
            sys.exit(f"bench_step_path: callgrind failed (is valgrind installed?):\n{done.stderr[-2000:]}")
        with open(out, errors="replace") as f:
            total = re.search(r"^(?:totals|summary):\s+(\d+)", f.read(), re.M)
    if total is None:
        sys.exit("bench_step_path: no instruction total in callgrind's output")
    return int(total.group(1)) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=None, help="planted steps (default 20000; 1000 with --instructions)")
    ap.add_argument("--instructions", action="store_true", help="count the analysis + JSON per step with callgrind")
    ap.add_argument("--child-collect", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_collect:
        collect_batches(args.steps)
        return
    if args.instructions:
        steps = args.steps or 1000
        if steps < 100 or steps % 100:
            ap.error("--steps must be a multiple of 100 with --instructions")
        per = instructions_per_step(steps)
        print(f"analysis + JSON of a host-only step        {per:10.0f} instructions per step "
              f"({steps} steps, callgrind)")
        return
    args.steps = args.steps or 20000
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    plain = best_us(opt.step, 5000)
    with gpuutil.profile(report_interval_ms=1e9) as prof:
        for _ in range(4):
            opt.step()  # past the first (discovery, detail) steps
        profiled = best_us(opt.step, 5000)
        boundary = best_us(prof.auto_step_boundary, 20000)
    sync_us, async_us = analysis_per_step(args.steps)
    print(f"optimizer.step() plain                     {plain:8.2f} us")
    print(f"optimizer.step() under gpuutil             {profiled:8.2f} us  (+{profiled - plain:.2f})")
    print(f"Profile.auto_step_boundary()               {boundary:8.2f} us")
    print(f"report batch on the training thread        {async_us:8.2f} us per step (Session.report_async)")
    print(f"analysis + JSON of a host-only step        {sync_us:8.2f} us per step (CPU; the worker's work)")


if __name__ == "__main__":
    main()
