"""A small PyTorch training script that plants the problems gpuutil finds.

Trains a small CNN on synthetic 16x16 images (CPU here, CUDA when present) under
``gpuutil.profile()`` with no other change to the loop: steps come from the
optimizer step hooks. Flags plant each problem:

  --slow-loader-ms N   sleep N ms in Dataset.__getitem__ (num_workers=0)
  --item               call loss.item() every step (a host sync on a GPU)
  --tiny-batch         batch size 1 and a tiny model: launch-bound on a GPU

Prints the per-step host breakdown table and the top finding, and writes
one JSON report per step to --output.

    python examples/train.py --slow-loader-ms 30 --steps 8 --output steps.jsonl
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

import gpuutil
from gpuutil.integrations.metrics import main_host_thread

HOST_KEYS = ("dataloader", "forward", "backward", "optimizer", "host_sync", "collective", "other")


class SyntheticImages(Dataset):
    def __init__(self, n: int, sleep_ms: float) -> None:
        self.n = n
        self.sleep_s = sleep_ms / 1000.0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 16, 16, generator=g), int(i % 10)


def make_model(tiny: bool) -> torch.nn.Module:
    if tiny:
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 10))
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(16, 10),
    )


def print_table(reports) -> None:
    print(f"{'step':>4} {'wall ms':>8} " + " ".join(f"{k:>10}" for k in HOST_KEYS))
    for r in reports:
        step = r["steps"][0]
        h = main_host_thread(step)
        if h is None:
            continue
        cells = " ".join(f"{h['breakdown_ns'][k] / 1e6:>10.1f}" for k in HOST_KEYS)
        print(f"{step['step']:>4} {step['wall_ns'] / 1e6:>8.1f} {cells}")
    print("(host time of the main training thread per category, ms; categories sum to wall)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--slow-loader-ms", type=float, default=0.0)
    ap.add_argument("--item", action="store_true")
    ap.add_argument("--tiny-batch", action="store_true")
    ap.add_argument("--output", default="steps.jsonl")
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        # A tiny model gains nothing from intra-op threads, and on a busy
        # machine spinning OpenMP threads make step times erratic.
        torch.set_num_threads(1)
    batch = 1 if args.tiny_batch else args.batch_size
    torch.manual_seed(0)
    model = make_model(args.tiny_batch).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SyntheticImages(args.steps * batch, args.slow_loader_ms), batch_size=batch, num_workers=0)

    with gpuutil.profile(output=args.output) as prof:
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if args.item:
                loss.item()

    reports = list(prof.reports)
    summary = prof.summary()
    print(f"gpuutil: {len(reports)} steps on {device} (steps from: {summary['steps_source']}), "
          f"reports in {prof.output}")
    print_table(reports)
    top = summary.get("top_finding")
    print("top finding:", f"{top['title']} ({top['id']})" if top else "none")
    if summary["gpu_collection_off"]:
        print("note:", summary["gpu_collection_off"][0])


if __name__ == "__main__":
    main()
