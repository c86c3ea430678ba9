"""The Hugging Face Trainer under torchrun (2 CPU ranks, gloo) with
gpuutil's callback and nothing else: rank 1's dataset is 30 ms slower per
item. Each rank writes OUT/rank<R>.json with the callback's summary
(test_distributed.py).

    torchrun --standalone --nproc-per-node 2 tests/python/hf_ddp_job.py OUT
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import transformers

from gpuutil.integrations.huggingface import GpuutilTrainerCallback


class Slow(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int):
        time.sleep(0.032 if int(os.environ.get("RANK", "0")) == 1 else 0.002)
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(32, generator=g), "labels": torch.randn(4, generator=g)}


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    def forward(self, x, labels=None):
        out = self.net(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


def main() -> int:
    out = sys.argv[1]
    torch.set_num_threads(1)
    args = transformers.TrainingArguments(
        output_dir=os.path.join(out, "hf"), max_steps=16, per_device_train_batch_size=1, report_to=[],
        use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
        ddp_backend="gloo",
    )
    cb = GpuutilTrainerCallback(cluster_interval_ms=100, cluster_timeout_s=20)
    trainer = transformers.Trainer(model=Tiny(), args=args, train_dataset=Slow(), callbacks=[cb])
    trainer.train()
    os.makedirs(out, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"summary": cb.prof.summary()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
