"""What timing forward costs per module call: gpuutil's discovery step
vs its wrapped root classes (python/gpuutil/torch/_forward.py).

A model of N tiny modules (nn.Identity in an nn.Sequential, so module-call
overhead is all there is) is called in three settings, interleaved, best of
--repeat runs of --calls forward calls each:

  plain            no profiler
  discovering      gpuutil's discovery step (every module call intercepted)
  wrapped roots    gpuutil after discovery (only the root class is wrapped)

With --baseline FILE (another version of _forward.py, e.g. from
`git show HEAD:python/gpuutil/torch/_forward.py > /tmp/old_forward.py`),
that version's two settings run too, interleaved with these, so the two
versions are compared in one run.

    python benchmarks/bench_module_hooks.py [--modules 200] [--calls 2000] [--repeat 7] [--baseline FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import timeit

import torch

from gpuutil import _core
from gpuutil.torch._forward import ForwardRanges


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", type=int, default=200)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", help="another _forward.py, run beside this one")
    args = ap.parse_args()
    model = torch.nn.Sequential(*[torch.nn.Identity() for _ in range(args.modules)])
    x = torch.zeros(1)
    import threading

    session = _core.Session()
    path = _core.StepPath(session, 0, threading.main_thread().ident)  # records the ranges, as in a profile

    def best_us(setup) -> float:
        fr = setup()
        try:
            t = min(timeit.repeat(lambda: model(x), number=args.calls, repeat=1))
        finally:
            if fr is not None:
                fr.uninstall()
        return t / args.calls * 1e6

    def plain():
        return None

    def discovering(cls):
        def setup():
            fr = cls(path)
            fr.install()  # discovering: every module call intercepted
            return fr

        return setup

    def wrapped_roots(cls):
        def setup():
            fr = cls(path)
            fr.install()
            model(x)
            fr.on_step_end(1)  # discovery over: Sequential wrapped, nothing else
            return fr

        return setup

    versions = {"": ForwardRanges}
    if args.baseline:
        spec = importlib.util.spec_from_file_location("baseline_forward", args.baseline)
        baseline = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(baseline)
        versions = {"this: ": ForwardRanges, "baseline: ": baseline.ForwardRanges}
    settings = {"plain": plain}
    for label, cls in versions.items():
        settings[f"{label}discovering"] = discovering(cls)
        settings[f"{label}wrapped roots"] = wrapped_roots(cls)
    best = {k: float("inf") for k in settings}
    for _ in range(args.repeat):
        for name, setup in settings.items():
            best[name] = min(best[name], best_us(setup))
    base = best["plain"]
    print(f"{args.modules} modules per forward, best of {args.repeat} x {args.calls} calls")
    for name, us in best.items():
        extra = us - base
        print(f"{name:>24}: {us:9.1f} us per forward  (+{extra:7.1f} us, {1000 * extra / args.modules:6.0f} ns per module call)")


if __name__ == "__main__":
    main()
