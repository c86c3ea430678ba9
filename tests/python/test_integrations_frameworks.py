"""Lightning Trainer.fit and Hugging Face Trainer.train on tiny CPU models
produce per-step gpuutil reports after adding only the callback."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

# Lightning and transformers emit deprecation warnings about their own
# dependencies (torch pytree, ...); they are not gpuutil's.
pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def test_lightning_fit_produces_one_report_per_optimizer_step(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from gpuutil.integrations.lightning import GpuutilCallback

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    ds = torch.utils.data.TensorDataset(torch.randn(20, 8), torch.randn(20, 1))
    loader = torch.utils.data.DataLoader(ds, batch_size=4)
    seen = []
    cb = GpuutilCallback(output=str(tmp_path / "steps.jsonl"), sinks=[seen.append])
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", devices=1, callbacks=[cb], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(Tiny(), loader)
    reports = list(cb.prof.reports)
    assert len(reports) == 5 == trainer.global_step
    assert len(seen) == 5
    assert [r["steps"][0]["step"] for r in reports] == list(range(5))
    for r in reports:
        host = r["steps"][0]["host"]
        main = max(host, key=lambda h: h["breakdown_ns"]["optimizer"])
        assert sum(main["breakdown_ns"].values()) == main["wall_ns"]
        assert main["breakdown_ns"]["dataloader"] > 0
        assert main["breakdown_ns"]["backward"] > 0
    assert cb.prof.summary()["steps_source"] == "optimizer_step"
    assert len((tmp_path / "steps.jsonl").read_text().splitlines()) == 5


def test_huggingface_trainer_produces_one_report_per_optimizer_step(tmp_path):
    transformers = pytest.importorskip("transformers")
    from gpuutil.integrations.huggingface import GpuutilTrainerCallback

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def forward(self, x, labels=None):
            out = self.net(x)
            loss = torch.nn.functional.mse_loss(out, labels)
            return {"loss": loss, "logits": out}

    data = [{"x": torch.randn(8), "labels": torch.randn(1)} for _ in range(16)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=4, report_to=[],
        use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0,
    )
    seen = []
    # Other profile() options pass through: FLOPs measured on one step.
    cb = GpuutilTrainerCallback(sinks=[seen.append], flops_per_step="measure", report_interval_ms=0)
    trainer = transformers.Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[cb])
    trainer.train()
    reports = list(cb.prof.reports)
    assert len(reports) == 4 == trainer.state.global_step
    assert len(seen) == 4
    for r in reports:
        host = r["steps"][0]["host"]
        main = max(host, key=lambda h: h["breakdown_ns"]["optimizer"])
        assert sum(main["breakdown_ns"].values()) == main["wall_ns"]
        assert main["breakdown_ns"]["optimizer"] > 0
        assert main["breakdown_ns"]["backward"] > 0
    assert cb.prof.summary()["steps_source"] == "optimizer_step"
    assert reports[-1]["flops_source"] == "measured"
