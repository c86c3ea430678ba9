"""What gpuutil's live step path costs, piece by piece (µs per call, best
of 7 repeats, in-process; complements bench_torch_overhead.py, whose
whole-loop differences are at the mercy of a noisy machine):

  optimizer.step() of a tiny model, plain / under gpuutil (the step pre/post
      hooks, PyTorch's own record_function ranges seen by the LibTorch hook,
      and the automatic step boundary)
  model(x) of a tiny model, plain / under gpuutil, with grad and under
      no_grad (the outermost-forward wrapper and its range, and with
      automatic steps the evaluation check at its end: grad mode and
      module.training), and under gpuutil with steps marked by prof.step()
      (no evaluation check: the difference is its cost)
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

With --hook-instructions, the instructions of the step path's hooks per
training step (a forward with grad, one under no_grad, a backward and an
optimizer step with its automatic boundary of a tiny model), counted by
callgrind inside the C++ hooks (PyStepPath's forward_exit, backward_enter,
optimizer_post and what they call), with automatic steps and with
prof.step(): the slope over 200 and 400 steps (needs valgrind and a
_core built with symbols: the installed one is stripped, so build one with
CMAKE_BUILD_TYPE=RelWithDebInfo and put it first on PYTHONPATH):

    python benchmarks/bench_step_path.py --hook-instructions
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


# The hooks as callgrind names them in an unstripped build (the optimizer
# post-hook is the second 3-handle lambda of bind_step_path).
HOOKS = ("*PyStepPath::forward_exit*", "*PyStepPath::backward_enter*",
         "*callback_fn<bind_step_path*PyStepPath&, pybind11::handle, pybind11::handle, pybind11::handle)#2}>*")


def hook_loop(steps: int, marked: bool) -> None:
    """`steps` steps of a tiny model: a forward with grad, a backward, an
    optimizer step and a forward under no_grad (the callgrind child)."""
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randn(1, 4)

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        with torch.no_grad():
            model(x)

    with gpuutil.profile(report_interval_ms=1e9) as prof:
        for _ in range(steps):
            if marked:
                with prof.step():
                    step()
            else:
                step()


def hook_instructions(steps: int, marked: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        cmd += [f"--toggle-collect={h}" for h in HOOKS]
        cmd += [sys.executable, os.path.abspath(__file__), "--child-hooks", "marked" if marked else "auto",
                "--steps", str(steps)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(out):
            sys.exit(f"bench_step_path: callgrind failed (is valgrind installed?):\n{done.stderr[-2000:]}")
        with open(out, errors="replace") as f:
            total = re.search(r"^(?:totals|summary):\s+(\d+)", f.read(), re.M)
    if total is None:
        sys.exit("bench_step_path: no instruction total in callgrind's output")
    return int(total.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=None, help="planted steps (default 20000; 1000 with --instructions)")
    ap.add_argument("--instructions", action="store_true", help="count the analysis + JSON per step with callgrind")
    ap.add_argument("--hook-instructions", action="store_true",
                    help="count the step path's C++ hooks per step with callgrind (automatic vs marked steps)")
    ap.add_argument("--child-collect", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-hooks", choices=("auto", "marked"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_collect:
        collect_batches(args.steps)
        return
    if args.child_hooks:
        hook_loop(args.steps, args.child_hooks == "marked")
        return
    if args.hook_instructions:
        for marked in (False, True):
            lo, hi = hook_instructions(200, marked), hook_instructions(400, marked)
            what = "marked steps (prof.step())" if marked else "automatic steps"
            print(f"step path hooks, {what:27s} {(hi - lo) / 200:10.0f} instructions per step "
                  f"(callgrind, 200 and 400 steps)")
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
    x = torch.randn(1, 4)
    plain = best_us(opt.step, 5000)
    fwd_plain = best_us(lambda: model(x), 5000)
    with torch.no_grad():
        fwd_plain_ng = best_us(lambda: model(x), 5000)
    with gpuutil.profile(report_interval_ms=1e9) as prof:
        for _ in range(4):
            model(x)
            opt.step()  # past the first (discovery, detail) steps
        profiled = best_us(opt.step, 5000)
        boundary = best_us(prof.auto_step_boundary, 20000)
        fwd = best_us(lambda: model(x), 5000)
        with torch.no_grad():
            fwd_ng = best_us(lambda: model(x), 5000)
    with gpuutil.profile(report_interval_ms=1e9) as prof:
        with prof.step():
            model(x)  # the discovery step
        with prof.step():
            fwd_user = best_us(lambda: model(x), 5000)
            with torch.no_grad():
                fwd_user_ng = best_us(lambda: model(x), 5000)
    sync_us, async_us = analysis_per_step(args.steps)
    print(f"optimizer.step() plain                     {plain:8.2f} us")
    print(f"optimizer.step() under gpuutil             {profiled:8.2f} us  (+{profiled - plain:.2f})")
    print(f"Profile.auto_step_boundary()               {boundary:8.2f} us")
    print(f"model(x) plain                             {fwd_plain:8.2f} us")
    print(f"model(x) under gpuutil                     {fwd:8.2f} us  (+{fwd - fwd_plain:.2f})")
    print(f"model(x) under no_grad, plain              {fwd_plain_ng:8.2f} us")
    print(f"model(x) under no_grad, under gpuutil      {fwd_ng:8.2f} us  (+{fwd_ng - fwd_plain_ng:.2f})")
    print(f"model(x) under gpuutil, marked steps       {fwd_user:8.2f} us  (+{fwd_user - fwd_plain:.2f})")
    print(f"  the same under no_grad                   {fwd_user_ng:8.2f} us  (+{fwd_user_ng - fwd_plain_ng:.2f})")
    print(f"report batch on the training thread        {async_us:8.2f} us per step (Session.report_async)")
    print(f"analysis + JSON of a host-only step        {sync_us:8.2f} us per step (CPU; the worker's work)")


if __name__ == "__main__":
    main()
