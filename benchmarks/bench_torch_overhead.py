"""Overhead of gpuutil on CPU training loops, against torch.profiler.

Runs one loop in interleaved rounds under several settings and reports, per
setting, the median over rounds of steps/s (wall clock) and of process CPU
time per step (all threads; far less disturbed than wall time when other
jobs share the machine), the overhead relative to the plain loop as the
median of per-round paired ratios (each round's setting against the same
round's baseline, so slow drift in machine load cancels) with the
interquartile range, and the fixed cost per step in µs (paired median of
the CPU-time difference):

  baseline           no profiler
  gpuutil            gpuutil.profile() with the LibTorch hook, default tier (detail="sampled")
  gpuutil-always     the same with detail="always" (per-op ranges on every step)
  gpuutil-off        the same with detail="off"
  gpuutil-python     gpuutil.profile() with the Python-level fallback hooks
  torch.profiler     torch.profiler.profile(activities=[CPU]), prof.step() per step

Loops (``--loop``; one DataLoader fetch and a ``loss.item()`` per step
except ``mlp``):

  small        3-layer MLP, width 256, batch 32, SGD          (≈ 1 ms per step here)
  wide         3-layer MLP, width 512, batch 128, SGD         (≈ 6 ms)
  mlp          3-layer MLP, width 1024, batch 256, SGD, no .item() (≈ 21 ms)
  transformer  2-layer transformer-encoder LM, AdamW          (≈ 20 ms)

Each round first runs ``--warmup-steps`` untimed steps under its setting
(a profile's start: forward discovery, the detail tier's first steps, the
first report batch), whose extra CPU time is printed apart as the start
cost; the table is the steady state after them.

``--dist`` initialises torch.distributed first (gloo, one rank).
``--extra-ops 0,30,300,1000`` adds K tiny ops per step (``h + 1`` on a
1-element tensor) and prints one table per K (the ops sweep).

    python benchmarks/bench_torch_overhead.py [--loop small|wide|mlp|transformer] [--dist]
        [--settings baseline,gpuutil,torch.profiler] [--extra-ops 0] [--steps 200] [--rounds 11] [--markdown]

Steps are found automatically by gpuutil (optimizer hooks); torch.profiler
gets prof.step() each step. The loop runs on one intra-op thread so that
rounds are comparable on a shared machine. The aten ops per step are
counted once with torch.profiler and printed.
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


#: --loop presets: (model kind, width, batch, loss.item() per step)
LOOPS = {
    "small": ("mlp", 256, 32, True),
    "wide": ("mlp", 512, 128, True),
    "mlp": ("mlp", 1024, 256, False),
    "transformer": ("transformer", 0, 8, True),
}


def make_training(width: int, batch: int, model_kind: str = "mlp", ddp: bool = False):
    """(loss_of(x, y), optimizer, loader) of one of the benchmark loops; with
    ``ddp`` the model is wrapped in DistributedDataParallel (the process
    group must be initialised), so every backward all-reduces the gradients."""
    torch.manual_seed(0)
    if model_kind == "transformer":
        seq = 64
        model = TinyLM()
        if ddp:
            model = torch.nn.parallel.DistributedDataParallel(model)
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
        if ddp:
            model = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        data = torch.utils.data.TensorDataset(torch.randn(batch * 8, width), torch.randint(0, 10, (batch * 8,)))

        def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(model(x), y)

    return loss_of, opt, torch.utils.data.DataLoader(data, batch_size=batch, num_workers=0)


def make_loop(width: int, batch: int, model_kind: str = "mlp", item: bool = False, extra_ops: int = 0,
              ddp: bool = False):
    loss_of, opt, loader = make_training(width, batch, model_kind, ddp=ddp)
    h = torch.zeros(1)

    def one_step(x: torch.Tensor, y: torch.Tensor) -> None:
        loss = loss_of(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if extra_ops:
            t = h
            for _ in range(extra_ops):
                t = t + 1
        if item:
            loss.item()

    def run(steps: int, on_step=None) -> "tuple[float, float]":
        done = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        while done < steps:
            for x, y in loader:
                one_step(x, y)
                if on_step is not None:
                    on_step()
                done += 1
                if done == steps:
                    break
        return steps / (time.perf_counter() - t0), 1000.0 * (time.process_time() - c0) / steps

    def count_ops() -> int:
        """aten ops in one step (torch.profiler's aten:: events)."""
        x, y = next(iter(loader))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            one_step(x, y)
        return sum(1 for e in p.events() if e.name.startswith("aten::"))

    run.count_ops = count_ops  # type: ignore[attr-defined]
    return run


def init_dist() -> None:
    """torch.distributed with gloo and one rank (what a launcher would set up)."""
    import socket

    import torch.distributed as dist

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)


def gpuutil_ctx(hook: str, detail: str = "sampled"):
    @contextlib.contextmanager
    def ctx():
        old = os.environ.get("GPUUTIL_TORCH_HOOK")
        os.environ["GPUUTIL_TORCH_HOOK"] = hook
        try:
            with gpuutil.profile(detail=detail):
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


SETTINGS = {
    "baseline": contextlib.nullcontext,
    "gpuutil": gpuutil_ctx("libtorch"),
    "gpuutil-always": gpuutil_ctx("libtorch", "always"),
    "gpuutil-off": gpuutil_ctx("libtorch", "off"),
    "gpuutil-python": gpuutil_ctx("python"),
    "torch.profiler": torch_profiler,
}


def measure(run, names: "list[str]", steps: int, rounds: int, warmup: int):
    """Interleaved rounds; per setting the lists of steps/s and CPU ms/step
    of the timed steps, and the CPU ms of the ``warmup`` steps each round
    runs first under the same setting (a profile's first steps: discovery,
    the first report batch; reported apart as the start cost)."""
    rates = {k: [] for k in names}
    cpu_ms = {k: [] for k in names}
    start_ms = {k: [] for k in names}
    for round_no in range(rounds):
        # Alternate the order every round so slow drift in machine load
        # does not favour the settings that run first.
        order = names if round_no % 2 == 0 else names[::-1]
        for name in order:
            with SETTINGS[name]() as step_fn:
                if warmup:
                    start_ms[name].append(run(warmup, step_fn)[1] * warmup)
                rate, cpu = run(steps, step_fn)
            rates[name].append(rate)
            cpu_ms[name].append(cpu)
    return rates, cpu_ms, start_ms


def paired(values: "dict[str, list[float]]", name: str, higher_is_better: bool) -> "tuple[float, float, float]":
    """Median and quartiles of the per-round overhead in % vs the same round's baseline."""
    ov = []
    for v, b in zip(values[name], values["baseline"]):
        ov.append(100.0 * ((b / v) if higher_is_better else (v / b)) - 100.0)
    q = statistics.quantiles(ov, n=4) if len(ov) >= 2 else [ov[0]] * 3
    return statistics.median(ov), q[0], q[2]


def fixed_us(cpu_ms: "dict[str, list[float]]", name: str) -> float:
    """Paired median of the CPU time per step over the baseline, in µs."""
    return statistics.median(1000.0 * (v - b) for v, b in zip(cpu_ms[name], cpu_ms["baseline"]))


def report(names, rates, cpu_ms, start_ms, rounds: int, markdown: bool) -> None:
    if any(start_ms.values()):
        starts = {n: statistics.median(a - b for a, b in zip(start_ms[n], start_ms["baseline"])) for n in names}
        print("start cost (CPU ms over the untimed first steps, paired median vs baseline): " +
              ", ".join(f"{n} {v:+.2f}" for n, v in starts.items() if n != "baseline"))
    rows = []
    for name in names:
        rows.append((name, statistics.median(rates[name]), paired(rates, name, True), statistics.median(cpu_ms[name]),
                     paired(cpu_ms, name, False), fixed_us(cpu_ms, name)))
    if markdown:
        print(f"| setting | steps/s (median of {rounds}) | wall overhead (IQR) | CPU ms/step | CPU overhead (IQR) "
              "| µs/step (CPU) |")
        print("|---|---|---|---|---|---|")
        for name, med, (ov, ql, qh), cpu, (cov, cl, ch), us in rows:
            print(f"| {name} | {med:.2f} | {ov:+.2f}% ({ql:+.2f}, {qh:+.2f}) | {cpu:.3f} | "
                  f"{cov:+.2f}% ({cl:+.2f}, {ch:+.2f}) | {us:+.1f} |")
    else:
        for name, med, (ov, ql, qh), cpu, (cov, cl, ch), us in rows:
            print(f"{name:>15}: {med:8.2f} steps/s ({ov:+6.2f}% [{ql:+.2f}, {qh:+.2f}])  "
                  f"{cpu:7.3f} CPU ms/step ({cov:+6.2f}% [{cl:+.2f}, {ch:+.2f}])  {us:+7.1f} us/step")
    by = {r[0]: r for r in rows}
    if "torch.profiler" in by:
        for name in names:
            if not name.startswith("gpuutil"):
                continue
            for label, col in (("wall", 2), ("CPU", 4)):
                g, t = by[name][col][0], by["torch.profiler"][col][0]
                ratio = f"{t / g:.1f}x" if g > 0 else "n/a (gpuutil <= 0)"
                print(f"{label}: torch.profiler overhead / {name} overhead = {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loop", choices=sorted(LOOPS), default=None)
    ap.add_argument("--model", choices=("mlp", "transformer"), default=None, help="same as --loop mlp|transformer")
    ap.add_argument("--dist", action="store_true", help="initialise torch.distributed (gloo, one rank) first")
    ap.add_argument("--settings", default="baseline,gpuutil,gpuutil-python,torch.profiler",
                    help="comma-separated, from: " + ", ".join(SETTINGS))
    ap.add_argument("--extra-ops", default="0", help="tiny ops added per step; a comma list runs a sweep")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup-steps", type=int, default=20,
                    help="steps each round runs under its setting before timing (start cost, reported apart)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--width", type=int, default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    names = [n.strip() for n in args.settings.split(",") if n.strip()]
    bad = [n for n in names if n not in SETTINGS]
    if bad:
        ap.error(f"unknown settings {bad}; choose from {list(SETTINGS)}")
    if "baseline" not in names:
        names.insert(0, "baseline")
    try:
        sweep = [int(k) for k in args.extra_ops.split(",")]
    except ValueError:
        ap.error(f"--extra-ops takes integers, not {args.extra_ops!r}")
    loop = args.loop or args.model or "mlp"
    kind, width, batch, item = LOOPS[loop]
    width = args.width or width
    batch = args.batch or batch
    torch.set_num_threads(1)
    if args.dist:
        init_dist()
    for k in sweep:
        run = make_loop(width, batch, kind, item=item, extra_ops=k)
        run(10)  # warm up
        ops = run.count_ops()
        print(f"loop {loop}{' (torch.distributed: gloo, 1 rank)' if args.dist else ''}, extra ops {k}: "
              f"{ops} aten ops per step; {args.rounds} rounds x {args.steps} steps")
        rates, cpu_ms, start_ms = measure(run, names, args.steps, args.rounds, args.warmup_steps)
        report(names, rates, cpu_ms, start_ms, args.rounds, args.markdown)


if __name__ == "__main__":
    main()
