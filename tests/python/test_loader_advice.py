"""Advice that reads the input pipeline (issue 26, item 12): with a real
DataLoader on CPU, the live reports carry the settings read from the loader
(num_workers, pin_memory, persistent_workers, prefetch_factor), one slow
worker of two (every second batch waits ~40 ms) is named as a stall once
per round of the workers, and the dataloader finding never recommends a
setting the loader already has
(docs/findings.md, "Input pipeline"; gpuutil/torch/_loader.py)."""

from __future__ import annotations

import time

import pytest

import gpuutil
from gpuutil import _merge

torch = pytest.importorskip("torch")

WAIT_RANGE = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
BATCH = 4


class Samples(torch.utils.data.Dataset):
    """`n` batches of BATCH samples; the workers listed in `slow` sleep
    `batch_s` per batch (spread over its samples)."""

    def __init__(self, n: int, slow: "tuple[int, ...]", batch_s: float) -> None:
        self.n, self.slow, self.batch_s = n * BATCH, slow, batch_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        info = torch.utils.data.get_worker_info()
        if info is not None and info.id in self.slow:
            time.sleep(self.batch_s / BATCH)
        return torch.full((16,), float(i % 7)), torch.zeros(2)


def _train(loader) -> "tuple[dict, list]":
    """One epoch over `loader` under gpuutil.profile() (automatic steps):
    a tiny model and optimizer on CPU."""
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuutil.profile(report_interval_ms=0) as prof:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return prof.summary(), list(prof.reports)


def _loader(slow: "tuple[int, ...]", batch_s: float, steps: int, workers: int = 2):
    return torch.utils.data.DataLoader(Samples(steps, slow, batch_s), batch_size=BATCH, num_workers=workers,
                                       persistent_workers=True, pin_memory=False)


def _dataloader_finding(summary: dict) -> dict:
    found = [f for f in summary["findings"] if f["id"] == "host_dataloader"]
    assert found, summary["findings"]
    return found[0]


def test_one_slow_worker_of_two_is_named_and_persistent_workers_is_not_recommended():
    # The real case: num_workers=2, persistent_workers=True, worker 1 slow:
    # every second batch waits ~40 ms. 100 steps.
    loader = _loader(slow=(1,), batch_s=0.04, steps=100)
    summary, reports = _train(loader)
    del loader

    # Every step report's loader entry has the settings read from the DataLoader.
    entries = [l for r in reports for l in r["loaders"] if l["name"] == WAIT_RANGE]
    assert len(entries) >= 90, [r["loaders"] for r in reports[:3]]
    for l in entries:
        assert l["settings"] == {"num_workers": 2, "pin_memory": False, "persistent_workers": True,
                                 "prefetch_factor": 2}, l
    # The waits the reports list are the planted pattern: every second one ~40 ms.
    waits_ms = [w / 1e6 for l in entries for w in l["batch_waits_ns"]]
    assert sum(w >= 20 for w in waits_ms) >= 40, waits_ms

    # The run's finding names the periodic stall, reads the loader's 2
    # workers, and its fix does not recommend what the loader already has.
    f = _dataloader_finding(summary)
    assert summary["top_finding"]["id"] == "host_dataloader", summary["findings"]
    assert "every 2nd batch stalls (one per round of the DataLoader workers)" in f["title"], f
    assert "every 2nd batch waits" in f["evidence"], f
    assert "one batch per round of the loader's 2 workers" in f["evidence"], f
    assert "persistent_workers" not in f["fix"], f["fix"]
    assert "get_worker_info().id" in f["fix"] and "num_workers, now 2" in f["fix"], f["fix"]

    # The run's loaders carry the stall as a field too (prof.summary(), and
    # `gpuutil analyze` of the run's JSONL: _merge), without the per-batch waits.
    (run_loader,) = [l for l in summary["loaders"] if l["name"] == WAIT_RANGE]
    assert run_loader["periodic_stall"]["period"] == 2, run_loader
    assert run_loader["batches"] >= sum(l["batches"] for l in entries) >= 90, run_loader
    assert run_loader["settings"] == entries[0]["settings"] and "batch_waits_ns" not in run_loader
    merged = _merge.merge_reports(reports)
    assert list(merged)[:6] == ["schema", "sources", "flops_source", "workload", "loaders", "steps"]
    (merged_loader,) = [l for l in merged["loaders"] if l["name"] == WAIT_RANGE]
    assert merged_loader["periodic_stall"]["period"] == 2, merged_loader


def test_uniform_waits_get_generic_advice_without_the_loaders_own_settings():
    # One slow worker (20 ms a batch): every batch waits alike, no periodic
    # stall; the generic fix says what the loader has and omits
    # persistent_workers, which it sets.
    loader = _loader(slow=(0,), batch_s=0.02, steps=40, workers=1)
    summary, _ = _train(loader)
    del loader
    f = _dataloader_finding(summary)
    assert "every" not in f["title"], f
    assert "persistent_workers" not in f["fix"], f["fix"]
    assert "num_workers, now 1" in f["fix"], f["fix"]
    assert "prefetch_factor (it is 2)" in f["fix"], f["fix"]


def test_the_dataloader_is_restored_at_stop_and_a_failing_read_never_breaks_the_loop(monkeypatch):
    from torch.utils.data import DataLoader

    from gpuutil.torch import _loader

    before = DataLoader.__dict__["__iter__"]

    def broken(loader):
        raise RuntimeError("planted")

    monkeypatch.setattr(_loader, "loader_settings", broken)
    loader = DataLoader(Samples(6, (), 0.0), batch_size=BATCH, num_workers=0)
    seen = 0
    with gpuutil.profile(report_interval_ms=0) as prof:
        assert DataLoader.__dict__["__iter__"] is not before  # wrapped while profiling
        for _ in range(2):
            for x, _y in loader:
                seen += x.shape[0]
                with prof.step():
                    pass
    assert seen == 2 * 6 * BATCH
    assert DataLoader.__dict__["__iter__"] is before
    failed = [d for r in prof.reports for d in r["diagnostics"] if d["name"] == "collector_failed"]
    assert failed and "DataLoader settings: RuntimeError: planted" in failed[0]["example"], failed
