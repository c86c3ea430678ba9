"""Overhead of gpuutil on a small CPU training loop, against torch.profiler.

Runs the same loop (``--model mlp``: a 3-layer MLP, synthetic data, SGD;
``--model transformer``: a 2-layer transformer encoder language model,
AdamW; one DataLoader fetch per step either way) in interleaved rounds under four settings and reports, per
setting, the median over rounds of steps/s (wall clock) and of process CPU
time per step (all threads; far less disturbed than wall time when other
jobs share the machine), and the overhead relative to the plain loop as
the median of per-round paired ratios (each round's setting against the
same round's baseline, so slow drift in machine load cancels), with the
interquartile range of those ratios:

  baseline           no profiler
  gpuutil            gpuutil.profile() with the LibTorch hook (default)
  gpuutil-python     gpuutil.profile() with the Python-level fallback hooks
  torch.profiler     torch.profiler.profile(activities=[CPU]), prof.step() per step

    python benchmarks/bench_torch_overhead.py [--model mlp|transformer] [--steps 60] [--rounds 5] [--width 1024] [--markdown]

Steps are found automatically by gpuutil (optimizer hooks); torch.profiler
gets prof.step() each step. The loop runs on one intra-op thread so that
rounds are comparable on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import torch

import gpuutil


class TinyLM(torch.nn.Module):
    """A 2-layer transformer encoder language model (d_model 128, 4 heads)."""

    def __init__(self, vocab: int = 512, d_model: int = 128, layers: int = 2) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens))).flatten(0, 1)


def make_training(width: int, batch: int, model_kind: str = "mlp"):
    """(loss_of(x, y), optimizer, loader) of one of the benchmark loops."""
    torch.manual_seed(0)
    if model_kind == "transformer":
        seq = 64
        model = TinyLM()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        data = torch.utils.data.TensorDataset(
            torch.randint(0, 512, (batch * 8, seq)), torch.randint(0, 512, (batch * 8 * seq,)).view(batch * 8, seq)
        )

        def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(model(x), y.flatten())
    else:
        model = torch.nn.Sequential(
            torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
            torch.nn.Linear(width, 10),
        )
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        data = torch.utils.data.TensorDataset(torch.randn(batch * 8, width), torch.randint(0, 10, (batch * 8,)))

        def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(model(x), y)

    return loss_of, opt, torch.utils.data.DataLoader(data, batch_size=batch, num_workers=0)


def make_loop(width: int, batch: int, model_kind: str = "mlp"):
    loss_of, opt, loader = make_training(width, batch, model_kind)

    def run(steps: int, on_step=None) -> "tuple[float, float]":
        done = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        while done < steps:
            for x, y in loader:
                loss = loss_of(x, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if on_step is not None:
                    on_step()
                done += 1
                if done == steps:
                    break
        return steps / (time.perf_counter() - t0), 1000.0 * (time.process_time() - c0) / steps

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("mlp", "transformer"), default="mlp")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=None, help="default: 256 (mlp), 8 (transformer)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    batch = args.batch or (8 if args.model == "transformer" else 256)
    run = make_loop(args.width, batch, args.model)
    run(10)  # warm up

    def gpuutil_ctx(hook: str):
        @contextlib.contextmanager
        def ctx():
            old = os.environ.get("GPUUTIL_TORCH_HOOK")
            os.environ["GPUUTIL_TORCH_HOOK"] = hook
            try:
                with gpuutil.profile():
                    yield None
            finally:
                if old is None:
                    os.environ.pop("GPUUTIL_TORCH_HOOK")
                else:
                    os.environ["GPUUTIL_TORCH_HOOK"] = old

        return ctx

    @contextlib.contextmanager
    def torch_profiler():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            yield p.step

    settings = {
        "baseline": contextlib.nullcontext,
        "gpuutil": gpuutil_ctx("libtorch"),
        "gpuutil-python": gpuutil_ctx("python"),
        "torch.profiler": torch_profiler,
    }
    rates = {k: [] for k in settings}
    cpu_ms = {k: [] for k in settings}
    for round_no in range(args.rounds):
        # Alternate the order every round so slow drift in machine load
        # does not favour the settings that run first.
        order = list(settings.items())
        for name, ctx in (order if round_no % 2 == 0 else order[::-1]):
            with ctx() as step_fn:
                rate, cpu = run(args.steps, step_fn)
            rates[name].append(rate)
            cpu_ms[name].append(cpu)
    def paired(values: "dict[str, list[float]]", name: str, higher_is_better: bool) -> "tuple[float, float, float]":
        """Median and quartiles of the per-round overhead in % vs the same round's baseline."""
        ov = []
        for v, b in zip(values[name], values["baseline"]):
            ov.append(100.0 * ((b / v) if higher_is_better else (v / b)) - 100.0)
        q = statistics.quantiles(ov, n=4) if len(ov) >= 2 else [ov[0]] * 3
        return statistics.median(ov), q[0], q[2]

    rows = []
    for name in settings:
        rows.append((name, statistics.median(rates[name]), paired(rates, name, True), statistics.median(cpu_ms[name]),
                     paired(cpu_ms, name, False)))
    if args.markdown:
        print(f"| setting | steps/s (median of {args.rounds}) | wall overhead (IQR) | CPU ms/step | CPU overhead (IQR) |")
        print("|---|---|---|---|---|")
        for name, med, (ov, ql, qh), cpu, (cov, cl, ch) in rows:
            print(f"| {name} | {med:.2f} | {ov:+.2f}% ({ql:+.2f}, {qh:+.2f}) | {cpu:.2f} | {cov:+.2f}% ({cl:+.2f}, {ch:+.2f}) |")
    else:
        for name, med, (ov, ql, qh), cpu, (cov, cl, ch) in rows:
            print(f"{name:>15}: {med:8.2f} steps/s ({ov:+6.2f}% [{ql:+.2f}, {qh:+.2f}])  "
                  f"{cpu:7.2f} CPU ms/step ({cov:+6.2f}% [{cl:+.2f}, {ch:+.2f}])")
    by = {r[0]: r for r in rows}
    for label, col in (("wall", 2), ("CPU", 4)):
        g, t = by["gpuutil"][col][0], by["torch.profiler"][col][0]
        print(f"{label}: torch.profiler overhead / gpuutil overhead = " + (f"{t / g:.1f}x" if g > 0 else "n/a (gpuutil <= 0)"))


if __name__ == "__main__":
    main()
