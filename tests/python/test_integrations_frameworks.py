"""Lightning Trainer.fit and Hugging Face Trainer.train on tiny CPU models
produce per-step gpuutil reports after adding only the callback."""

from __future__ import annotations

import json

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
    lines = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [x["schema"] for x in lines] == ["gpuutil.report/1"] * 5 + ["gpuutil.run/1"]  # the run record last


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


# The loop under each framework: 60 optimizer steps, an evaluation
# of 30 batches and a checkpoint after steps 20, 40 and 60 (the last).
MS = 1_000_000


def _now_ns() -> int:
    from gpuutil import _core

    return _core.now_ns()


def _timed(method, into):
    """``method`` that appends how long each call took (ns) to ``into``."""

    def timed(self, *args, **kwargs):
        t = _now_ns()
        try:
            return method(self, *args, **kwargs)
        finally:
            into.append(_now_ns() - t)

    return timed


def _mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )


def _assert_outside_is_the_planted_work(summary, eval_ns, save_ns, steps):
    """Evaluation and checkpoints are outside steps, named, each within what
    was planted (give or take the framework's own work around them), the
    third pair after the last step included; the outside_steps finding says so."""
    parts = summary["outside_steps_breakdown_ns"]
    planted_eval, planted_save = sum(eval_ns), sum(save_ns)
    assert len(eval_ns) == 3 and len(save_ns) == 3, (eval_ns, save_ns)
    assert summary["steps"] == steps and summary["steps_source"] == "optimizer_step"
    # (The framework's bookkeeping right after the optimizer step goes with
    # the first of them: a few ms, more on a loaded machine.)
    assert 0.9 * planted_eval <= parts["evaluation"] <= 1.25 * planted_eval + 30 * MS, (parts, planted_eval)
    assert 0.9 * planted_save <= parts["checkpoint"] <= 1.25 * planted_save + 30 * MS, (parts, planted_save)
    assert summary["outside_steps_ns"] >= 0.9 * (planted_eval + planted_save)
    assert sum(parts.values()) == summary["outside_steps_ns"]
    finding = next(f for f in summary["findings"] if f["id"] == "outside_steps")
    assert "evaluation" in finding["evidence"] and "checkpoint" in finding["evidence"]


def _step_forwards(reports):
    out = {}
    for r in reports:
        st = r["steps"][0]
        main = max(st["host"], key=lambda h: h["breakdown_ns"]["optimizer"])
        out[st["step"]] = main["breakdown_ns"]["forward"]
    return out


def test_lightning_validation_and_checkpoints_are_outside_steps(tmp_path):
    import statistics
    import time

    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.callbacks import ModelCheckpoint

    from gpuutil.integrations.lightning import GpuutilCallback

    class Net(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            time.sleep(0.002)  # the batch's input work: 30 of them are far outside this machine's noise
            self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    eval_ns, save_ns = [], []

    class Planted(pl.Callback):  # what the test measures itself
        def on_validation_start(self, trainer, pl_module):
            self.t = _now_ns()

        def on_validation_end(self, trainer, pl_module):
            eval_ns.append(_now_ns() - self.t)

    class TimedCheckpoint(ModelCheckpoint):
        _save_checkpoint = _timed(ModelCheckpoint._save_checkpoint, save_ns)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64 * 64, 256), torch.randint(0, 10, (64 * 64,)))
    train = torch.utils.data.DataLoader(data, batch_size=64)
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(data, range(30 * 128)), batch_size=128)
    cb = GpuutilCallback()
    trainer = pl.Trainer(
        max_steps=60, val_check_interval=20, limit_val_batches=30, num_sanity_val_steps=0, accelerator="cpu",
        devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[cb, Planted(), TimedCheckpoint(dirpath=str(tmp_path), every_n_train_steps=20, save_top_k=-1)],
        default_root_dir=str(tmp_path),
    )
    trainer.fit(Net(), train, val)
    assert trainer.global_step == 60
    _assert_outside_is_the_planted_work(cb.prof.summary(), eval_ns, save_ns, 60)
    # The steps after a validation hold their own forward, not the validation's.
    forwards = _step_forwards(cb.prof.reports)
    typical = statistics.median(forwards.values())
    for k, before in ((20, 0), (40, 1)):
        assert forwards[k] < typical + eval_ns[before] / 4, (k, forwards[k], typical, eval_ns)
    assert "save_checkpoint" not in vars(trainer)  # the callback's wrapper is gone


def test_huggingface_evaluation_and_checkpoints_are_outside_steps(tmp_path):
    import statistics
    import time

    transformers = pytest.importorskip("transformers")
    from gpuutil.integrations.huggingface import GpuutilTrainerCallback

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp()

        def forward(self, x, labels=None):
            if not self.training:
                time.sleep(0.002)  # the evaluation batch's input work, as above
            out = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(out, labels), "logits": out}

    eval_ns, save_ns = [], []

    class Timed(transformers.Trainer):  # what the test measures itself
        _evaluate = _timed(transformers.Trainer._evaluate, eval_ns)
        _save_checkpoint = _timed(transformers.Trainer._save_checkpoint, save_ns)

    torch.manual_seed(0)
    train = [{"x": torch.randn(256), "labels": torch.randint(0, 10, ()).item()} for _ in range(64 * 16)]
    held_out = [{"x": torch.randn(256), "labels": torch.randint(0, 10, ()).item()} for _ in range(30 * 32)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=60, per_device_train_batch_size=16, per_device_eval_batch_size=32,
        eval_strategy="steps", eval_steps=20, save_strategy="steps", save_steps=20, report_to=[], use_cpu=True,
        logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
    )
    cb = GpuutilTrainerCallback()
    trainer = Timed(model=Net(), args=args, train_dataset=train, eval_dataset=held_out, callbacks=[cb])
    trainer.train()
    assert trainer.state.global_step == 60
    _assert_outside_is_the_planted_work(cb.prof.summary(), eval_ns, save_ns, 60)
    forwards = _step_forwards(cb.prof.reports)
    typical = statistics.median(forwards.values())
    for k, before in ((20, 0), (40, 1)):
        assert forwards[k] < typical + eval_ns[before] / 4, (k, forwards[k], typical, eval_ns)
