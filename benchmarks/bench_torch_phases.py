"""Where gpuutil's per-step cost lands in a training step: fetch, forward,
backward (with zero_grad) and optimizer step (which holds the automatic
step boundary), timed with perf_counter around each phase of the same loop
as bench_torch_overhead.py, with and without gpuutil.profile(), in
interleaved rounds. Prints the baseline median per phase and the median of
the per-round paired differences (gpuutil − baseline, same round).

    python benchmarks/bench_torch_phases.py [--model mlp|transformer] [--steps 40] [--rounds 12]
        [--report-interval-ms 100]

A difference below ≈ 100 µs is within this VM's noise for the 8–12 ms
phases; the optimizer phase (≈ 1–2 ms) resolves the step boundary best.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

import torch

import gpuutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch_overhead import make_training  # noqa: E402

PHASES = ("fetch", "forward", "backward", "optimizer")


def build(model_kind: str):
    batch = 8 if model_kind == "transformer" else 256
    loss_of, opt, loader = make_training(1024, batch, model_kind)
    pc = time.perf_counter

    def run(steps: int) -> "dict[str, float]":
        total = dict.fromkeys(PHASES, 0.0)
        done = 0
        while done < steps:
            it = iter(loader)
            while done < steps:
                t0 = pc()
                try:
                    x, y = next(it)
                except StopIteration:
                    break
                t1 = pc()
                loss = loss_of(x, y)
                t2 = pc()
                opt.zero_grad()
                loss.backward()
                t3 = pc()
                opt.step()
                t4 = pc()
                for k, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                    total[k] += dt
                done += 1
        return {k: 1e6 * v / steps for k, v in total.items()}

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("mlp", "transformer"), default="mlp")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--report-interval-ms", type=float, default=100.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = build(args.model)
    run(10)
    results: "dict[str, list[dict[str, float]]]" = {"baseline": [], "gpuutil": []}
    for r in range(args.rounds):
        for name in (("baseline", "gpuutil") if r % 2 == 0 else ("gpuutil", "baseline")):
            ctx = gpuutil.profile(report_interval_ms=args.report_interval_ms) if name == "gpuutil" else contextlib.nullcontext()
            with ctx:
                results[name].append(run(args.steps))
    print(f"{args.model}, {args.rounds} rounds x {args.steps} steps, report_interval_ms={args.report_interval_ms:g}")
    print("| phase | baseline median (µs) | gpuutil − baseline, paired median (µs) |")
    print("|---|---:|---:|")
    for k in PHASES:
        base = statistics.median(b[k] for b in results["baseline"])
        diff = statistics.median(g[k] - b[k] for g, b in zip(results["gpuutil"], results["baseline"]))
        print(f"| {k} | {base:.1f} | {diff:+.1f} |")


if __name__ == "__main__":
    main()
