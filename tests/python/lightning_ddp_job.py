"""Lightning DDP on two CPU processes with gpuutil's callback and nothing
else: rank 1's dataset is 30 ms slower per batch. Each rank writes
OUT/rank<R>.json with the callback's summary (test_distributed.py).

    python tests/python/lightning_ddp_job.py OUT
"""

from __future__ import annotations

import json
import os
import sys
import time

import lightning.pytorch as pl
import torch

from gpuutil.integrations.lightning import GpuutilCallback


class Slow(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int):
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        time.sleep(0.032 if rank == 1 else 0.002)
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, generator=g), torch.randn(4, generator=g)


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(Slow(), batch_size=1, num_workers=0)


def main() -> int:
    out = sys.argv[1]
    torch.set_num_threads(1)
    callback = GpuutilCallback(log_to_loggers=False, cluster_interval_ms=100, cluster_timeout_s=20)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_steps=16,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        callbacks=[callback],
    )
    trainer.fit(Model())
    os.makedirs(out, exist_ok=True)
    cluster = [c for c in callback.prof._collectors if c.name == "cluster"]
    with open(os.path.join(out, f"rank{trainer.global_rank}.json"), "w") as f:
        json.dump({"summary": callback.prof.summary(), "cluster_off": cluster[0].off if cluster else "absent"}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
