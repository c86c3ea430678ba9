"""Dynamo's counters for a compiled MLP with and without gpuutil.profile():
graph breaks, captured calls, graphs, warnings, and whether the step that
compiled is marked (``compile_warmup``; docs/pytorch.md, "torch.compile").

A 64-256-256-10 MLP, ``torch.compile(model)`` (inductor by default), 20
automatic steps; one uncounted run first (the backend's first import and
its compile cache), then one run without a profile and one with.

    python benchmarks/bench_torch_compile.py [--backend inductor] [--steps 20]
"""

from __future__ import annotations

import argparse
import warnings

import torch
import torch._dynamo
from torch._dynamo.utils import counters

import gpuutil


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )

    def forward(self, x):
        return self.net(x)


def run(backend: str, steps: int, profiled: bool) -> str:
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    prof = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(model, backend=backend)

        def loop() -> None:
            for _ in range(steps):
                compiled(x).sum().backward()
                opt.step()
                opt.zero_grad()

        if profiled:
            with gpuutil.profile() as prof:
                loop()
        else:
            loop()
    out = (
        f"graph breaks {sum(counters['graph_break'].values())}, calls captured {counters['stats']['calls_captured']}, "
        f"graphs {counters['stats']['unique_graphs']}, warnings {len(caught)}"
    )
    if prof is not None:
        step0 = prof.reports[0]["steps"][0]
        out += f", step 0 compile_warmup {step0.get('compile_warmup', False)} ({step0['wall_ns'] / 1e9:.2f} s)"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    run(args.backend, args.steps, False)  # warm-up
    print("without gpuutil:", run(args.backend, args.steps, False))
    print("with gpuutil:   ", run(args.backend, args.steps, True))


if __name__ == "__main__":
    main()
