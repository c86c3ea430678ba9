#!/usr/bin/env python3
"""gpuutil's cost per training step in CPU instructions, counted by Valgrind.

Wall and CPU time on a shared VM swing by ±10% or more from round to round
(benchmarks/RESULTS.md), which hides a 1-2% overhead. Instruction counts do
not swing: this runs the same loop under `valgrind --tool=cachegrind
--cache-sim=no` (every thread's instructions, the gpuutil worker included)
for three or more step counts per setting and fits a line through them, so
start-up (interpreter, torch import, the profile's start and stop) cancels
out:

    instructions per step = the least-squares slope of I(steps) over steps

Each pair of neighbouring counts also gives its own slope; their spread is
printed beside the fit. A one-time event (a lazy import, a report batch or
a rediscovery step that falls into one run only) shows up there as a
spread of more than a few tenths of a percent, where two counts alone would
silently fold it into the slope.

What this counts is work, not time: cache misses, lock waits and the
worker's use of another core are not in it. It complements the interleaved
wall/CPU rounds of bench_torch_overhead.py; it does not replace them.

Report batches come every --batch-steps steps (default 100: what the
default report_interval_ms=100 gives a 1 ms step natively), not by time.
A time-based interval would make the count depend on how fast Valgrind
runs: under Valgrind a step takes 50-500x longer depending on what else
runs, so a wall-clock interval would analyse far fewer steps per batch and
count each batch's fixed cost many times over. The profile's own interval
is set beyond the run, and the child asks for a batch every --batch-steps
steps through the same call the interval makes (Profile._collect, which
hands the batch to the report worker). Every setting, the baseline
included, runs the same per-step callback.

    python benchmarks/bench_torch_instructions.py [--loop small] [--dist]
        [--settings baseline,gpuutil-off,gpuutil,gpuutil-always] [--steps 100,250,400]
        (also: torch-hook, only the LibTorch hook's USER_SCOPE callback, no profile)
        [--jobs 2]

Needs valgrind (Debian: apt-get install valgrind). Runs --jobs Valgrind
processes at once (instruction counts do not depend on what else runs).
Progress: one line per run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DETAIL = {"gpuutil": "sampled", "gpuutil-off": "off", "gpuutil-always": "always"}


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE))
    import torch

    torch.set_num_threads(1)
    import bench_torch_overhead as b

    if args.dist:
        b.init_dist()
    kind, width, batch, item = b.LOOPS[args.loop]
    run = b.make_loop(width, batch, kind, item=item)
    run(20)  # the loop's own first steps (allocator, autograd caches)
    done = [0]
    batch_of: "list" = [None]  # the profile's batch call, when profiled

    def on_step() -> None:
        done[0] += 1
        if batch_of[0] is not None and done[0] % args.batch_steps == 0:
            batch_of[0]()

    if args.setting in ("baseline", "torch-hook"):
        if args.setting == "torch-hook":
            # Only gpuutil's LibTorch hook with its USER_SCOPE callback
            # registered, no profile: what a registered RecordFunction
            # callback costs the loop by itself.
            from gpuutil.torch import _ext

            hook, why = _ext.load(build=False)
            if hook is None:
                sys.exit(f"bench_torch_instructions: the LibTorch hook is not built: {why}")
            hook.start(False, False, False, True)
        run(20, on_step)
        run(args.child_steps, on_step)
        return
    import gpuutil
    from gpuutil import _core

    os.environ["GPUUTIL_TORCH_HOOK"] = "libtorch"
    with gpuutil.profile(detail=DETAIL[args.setting], report_interval_ms=1e12) as prof:
        batch_of[0] = lambda: prof._collect(_core.now_ns())  # what report_interval_ms does, by step count
        run(20, on_step)  # discovery and the sampled tier's first detail steps
        run(args.child_steps, on_step)


def instructions(setting: str, steps: int, args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={tmp}/cg.%p",
            sys.executable, __file__, "--child", "--setting", setting, "--child-steps", str(steps),
            "--loop", args.loop, "--batch-steps", str(args.batch_steps),
        ] + (["--dist"] if args.dist else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench_torch_instructions: {setting} ({steps} steps) failed:\n{done.stderr[-2000:]}")
        refs = re.findall(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if not refs:
            sys.exit(f"bench_torch_instructions: no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
        return sum(int(r.replace(",", "")) for r in refs)  # one line per process


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop", default="small", choices=("small", "wide", "mlp", "transformer"))
    ap.add_argument("--dist", action="store_true", help="torch.distributed initialised (gloo, one rank)")
    ap.add_argument("--settings", default="baseline,gpuutil-off,gpuutil,gpuutil-always")
    ap.add_argument("--steps", default="100,250,400", help="three or more step counts, comma-separated")
    ap.add_argument("--jobs", type=int, default=2, help="Valgrind runs at once")
    ap.add_argument("--batch-steps", type=int, default=100, help="steps per report batch")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--setting", help=argparse.SUPPRESS)
    ap.add_argument("--child-steps", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    try:
        counts_of = sorted({int(s) for s in args.steps.split(",")})
    except ValueError:
        ap.error(f"--steps wants integers, comma-separated; got {args.steps!r}")
    if len(counts_of) < 3 or counts_of[0] <= 0:
        ap.error(f"--steps: need three or more different positive step counts; got {args.steps!r}")
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    if args.batch_steps < 1:
        ap.error("--batch-steps must be >= 1")
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in ("baseline", "torch-hook") and s not in DETAIL]
    if unknown:
        ap.error(f"unknown setting(s) {unknown}")
    runs = [(setting, steps) for setting in settings for steps in counts_of]
    found: "dict[tuple[str, int], int]" = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(instructions, setting, steps, args): (setting, steps) for setting, steps in runs}
        for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            setting, steps = futures[fut]
            found[(setting, steps)] = fut.result()
            print(f"[{done}/{len(runs)}] {setting:15s} {steps:4d} steps: {found[(setting, steps)]:,} instructions",
                  flush=True)
    per_step, spread = {}, {}
    for setting in settings:
        ys = [found[(setting, n)] for n in counts_of]
        per_step[setting] = slope(counts_of, ys)
        pairs = [(ys[i + 1] - ys[i]) / (counts_of[i + 1] - counts_of[i]) for i in range(len(ys) - 1)]
        spread[setting] = (min(pairs), max(pairs))
    base = per_step.get("baseline")
    label = f"loop {args.loop}" + (" (torch.distributed: gloo, 1 rank)" if args.dist else "")
    print(f"\n{label}; instructions per step: least-squares slope over {', '.join(map(str, counts_of))} steps")
    print("| setting | instructions per step | neighbouring-pair slopes | over baseline |")
    print("|---|---:|---:|---:|")
    for setting, n in per_step.items():
        lo, hi = spread[setting]
        extra = "" if base is None or setting == "baseline" else f"{n - base:+,.0f} ({100.0 * (n - base) / base:+.2f}%)"
        print(f"| {setting} | {n:,.0f} | {lo:,.0f} – {hi:,.0f} | {extra} |")
    return 0


def slope(xs: "list[int]", ys: "list[int]") -> float:
    """The least-squares slope of ys over xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


if __name__ == "__main__":
    sys.exit(main())
