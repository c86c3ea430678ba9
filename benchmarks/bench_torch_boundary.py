"""What gpuutil's automatic step boundary costs, part by part, inside the
MLP loop of bench_torch_overhead.py (so caches are as cold as in training):
perf_counter around the collectors' step-end work (drains), the C++
analysis + serialisation of finished steps (``Session.collect``) and the
delivery to ``prof.reports``, summed over --steps steps and divided by the
steps. Run with the default report interval (batched) and with 0 (every
step analysed alone at its end).

    python benchmarks/bench_torch_boundary.py [--steps 300] [--report-interval-ms 100]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

import torch

import gpuutil
from gpuutil import _profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch_overhead import make_loop  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--report-interval-ms", type=float, default=100.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = make_loop(1024, 256)
    run(10)
    spent = collections.Counter()
    pc = time.perf_counter_ns
    P = _profile.Profile
    originals = {k: getattr(P, k) for k in ("auto_step_boundary", "_collect", "_deliver")}

    def timed(name, fn):
        def wrapper(self, *a):
            t = pc()
            try:
                return fn(self, *a)
            finally:
                spent[name] += pc() - t

        return wrapper

    P.auto_step_boundary = timed("boundary total", originals["auto_step_boundary"])
    P._collect = timed("collect + deliver", originals["_collect"])
    P._deliver = timed("deliver to prof.reports", originals["_deliver"])
    try:
        with gpuutil.profile(report_interval_ms=args.report_interval_ms) as prof:
            for c in prof._collectors:
                c.on_step_end = (lambda f, n: (lambda p: timed(n, lambda self, q: f(q))(None, p)))(
                    c.on_step_end, f"collector {c.name}: step end")
            run(args.steps, None)
    finally:
        for k, v in originals.items():
            setattr(P, k, v)
    print(f"MLP loop, {args.steps} steps, report_interval_ms={args.report_interval_ms:g}; µs per step:")
    for name in ("boundary total", *sorted(k for k in spent if k.startswith("collector")), "collect + deliver",
                 "deliver to prof.reports"):
        print(f"  {name:>28}: {spent[name] / args.steps / 1000:8.1f}")


if __name__ == "__main__":
    main()
