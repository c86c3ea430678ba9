"""What timing forward costs per module call: global module hooks vs
gpuutil's wrapped root classes (python/gpuutil/torch/_forward.py).

A model of N tiny modules (nn.Identity in an nn.Sequential, so module-call
overhead is all there is) is called in three settings, interleaved, best of
--repeat runs of --calls forward calls each:

  plain            no profiler
  global hooks     gpuutil's discovery step (global forward pre/post hooks)
  wrapped roots    gpuutil after discovery (only the root class is wrapped)

    python benchmarks/bench_module_hooks.py [--modules 200] [--calls 2000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import timeit

import torch

from gpuutil import _core
from gpuutil.torch._forward import ForwardRanges


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", type=int, default=200)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
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

    def global_hooks():
        fr = ForwardRanges(path)
        fr.install()  # discovering: global hooks on
        return fr

    def wrapped_roots():
        fr = ForwardRanges(path)
        fr.install()
        model(x)
        fr.on_step_end(1)  # discovery over: Sequential wrapped, global hooks gone
        return fr

    settings = {"plain": plain, "global hooks": global_hooks, "wrapped roots": wrapped_roots}
    best = {k: float("inf") for k in settings}
    for _ in range(args.repeat):
        for name, setup in settings.items():
            best[name] = min(best[name], best_us(setup))
    base = best["plain"]
    print(f"{args.modules} modules per forward, best of {args.repeat} x {args.calls} calls")
    for name, us in best.items():
        extra = us - base
        print(f"{name:>14}: {us:9.1f} us per forward  (+{extra:7.1f} us, {1000 * extra / args.modules:6.0f} ns per module call)")


if __name__ == "__main__":
    main()
