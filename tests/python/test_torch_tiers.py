"""Collection tiers (docs/pytorch.md, "Collection tiers"): every step
collects the always-on tier; the detail tier (PyTorch's FUNCTION and
BACKWARD_FUNCTION RecordFunction scopes: per-op and autograd-node ranges)
runs on the steps ``detail=`` chooses, each report says which, and the
DataLoader, ``.item()``, optimizer and collective attribution is the same on
steps with and without detail."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402
from gpuutil._detail import DetailSchedule, check_detail  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


@pytest.fixture(autouse=True)
def libtorch_hook():
    from gpuutil.torch import _ext

    module, reason = _ext.load(build=True)
    assert module is not None, reason


class Data(Dataset):
    """Batches of 4; index >= slow_from sleeps 20 ms (a DataLoader stall)."""

    def __init__(self, n: int, slow_from: int = 1 << 30) -> None:
        self.n = n
        self.slow_from = slow_from

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i >= self.slow_from:
            time.sleep(0.020)
        return torch.randn(16), torch.randn(1)


def train(steps: int, *, detail: str, slow_from: int = 1 << 30, item: bool = True, work_s: float = 0.0, **kw):
    """``steps`` optimizer steps of a small MLP (report per step); ``work_s``
    of sleep per step between forward and backward (time in no category)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Data(steps, slow_from), batch_size=1, num_workers=0)
    with gpuutil.profile(detail=detail, report_interval_ms=0, **kw) as prof:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            if work_s:
                time.sleep(work_s)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if item:
                loss.item()
    return [r for r in prof.reports if r["steps"]]


def main_thread(step):
    return max(step["host"], key=lambda h: h["wall_ns"] - h["breakdown_ns"]["other"])


def test_detail_option_is_checked_when_the_profile_is_created():
    assert check_detail("off") == "off"
    for bad in ("sometimes", None, 1, "ALWAYS"):
        with pytest.raises(ValueError, match='detail must be one of "sampled", "always", "off"'):
            gpuutil.profile(detail=bad)


def test_schedule_samples_the_first_steps_then_one_in_n_and_after_a_new_finding():
    s = DetailSchedule("sampled", first=3, every=10)
    assert [s.wants(i) for i in range(12)] == [True] * 3 + [False] * 7 + [True, False]
    s.request()
    assert s.wants(12) and not s.wants(13)
    assert all(DetailSchedule("always").wants(i) for i in range(5))
    assert not any(DetailSchedule("off").wants(i) for i in range(5))


@pytest.mark.parametrize("detail", ["sampled", "always", "off"])
def test_each_report_says_which_tier_its_step_had(detail, monkeypatch):
    # Only the step-count rule here (a finding firing for the first time,
    # which depends on timing, is pinned by its own test below).
    monkeypatch.setattr(DetailSchedule, "request", lambda self: None)
    reports = train(8, detail=detail)
    flags = [r["steps"][0]["detail"] for r in reports[:8]]
    expected = {"sampled": [True] * 3 + [False] * 5, "always": [True] * 8, "off": [False] * 8}[detail]
    assert flags == expected


@pytest.mark.parametrize("detail", ["sampled", "always", "off"])
def test_item_and_optimizer_are_attributed_on_every_step_in_every_tier(detail):
    reports = train(8, detail=detail)
    # The .item() after opt.step() of step k lands at the start of step k+1.
    for r in reports[1:8]:
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["host_sync"] > 0, (r["steps"][0]["detail"], h)
        assert h["culprits"]["host_sync"][0]["name"] in ("aten::item", "aten::_local_scalar_dense")
        assert h["breakdown_ns"]["optimizer"] > 0
        assert h["breakdown_ns"]["backward"] > 0 and h["breakdown_ns"]["forward"] > 0
        assert sum(h["breakdown_ns"].values()) == h["wall_ns"]


@pytest.mark.parametrize("detail", ["sampled", "off"])
def test_dataloader_wait_is_attributed_without_detail(detail):
    reports = train(6, detail=detail, slow_from=0, item=False)
    for r in reports[:6]:
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["dataloader"] >= 15_000_000, h


def test_a_finding_that_fires_for_the_first_time_asks_for_a_detail_step():
    # Steps 0-4 fetch their batch in well under 5% of a 30 ms step; from
    # step 5 on the DataLoader stalls 20 ms (host_dataloader fires in step
    # 5's report, delivered at its end): the step after the next one
    # collects detail, the sampled ones around it do not.
    #
    # The quiet start is the scenario's precondition, not the behaviour
    # pinned: on a loaded runner one early fetch (the loader's first
    # __next__, a descheduled thread) can pass 5% of its step, the finding
    # then fires early and asks for its detail step there. Such a run is
    # played again, up to three times in all (CI saw it once in ~40 runs at
    # a 10 ms step).
    for attempt in range(3):
        reports = train(10, detail="sampled", slow_from=5, item=False, work_s=0.030)
        early = [i for i, r in enumerate(reports[:5]) if any(f["id"] == "host_dataloader" for f in r["findings"])]
        if not early:
            break
    assert not early, f"host_dataloader fired before the stall in 3 runs (steps {early}): the runner is too loaded"
    flags = [r["steps"][0]["detail"] for r in reports[:10]]
    assert any(f["id"] == "host_dataloader" for f in reports[5]["findings"]), reports[5]["findings"]
    assert flags[:5] == [True, True, True, False, False]
    assert flags[7] is True and flags[6] is False and flags[8] is False, flags


@pytest.mark.parametrize("detail", ["always", "off"])
def test_collectives_are_attributed_with_and_without_detail(detail, all_reduce_steps):
    """With detail, from PyTorch's c10d ops (FUNCTION scope); without, from
    the torch.distributed wrappers."""
    reports = all_reduce_steps(detail=detail)
    assert [r["steps"][0]["detail"] for r in reports] == [detail == "always"] * 3
    for r in reports:
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["collective"] > 0, h
        names = [c["name"] for c in h["culprits"]["collective"]]
        assert any("all_reduce" in n or "allreduce" in n for n in names), names


def test_the_detail_tier_records_per_op_ranges_only_on_its_steps():
    """What detail adds: PyTorch's own aten::item / c10d ranges come through
    the hook (kind 1, FUNCTION scope) on detail steps and never on the others."""
    from gpuutil.torch import _ext

    module, _ = _ext.load()
    seen = {}
    for detail in ("always", "off"):
        module.drain()
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with gpuutil.profile(detail=detail) as prof:
            collector = next(c for c in prof._collectors if c.name == "torch")
            collector._drainer = None  # keep the ranges in the hook's rings for this test
            for _ in range(3):
                loss = model(torch.randn(4, 8)).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                loss.item()
            ranges, _dropped = module.drain()
        seen[detail] = sorted({name for name, _s, _e, _t, kind in ranges if kind == 1})
    assert "aten::item" in seen["always"], seen
    assert seen["off"] == [], seen
