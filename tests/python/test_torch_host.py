"""Host-only mode with real PyTorch (CPU): planted problems are detected and
attributed in each step's per-thread host breakdown (steps[].host), and
automatic step detection follows the optimizer steps. Every behaviour is
checked with both range sources: the LibTorch RecordFunction hook (built
against the installed torch if needed) and the Python-level fallback."""

from __future__ import annotations

import contextlib

import json
import time

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

SLEEP_S = 0.030


@pytest.fixture(params=["libtorch", "python"])
def hook_mode(request, monkeypatch):
    """Selects the range source; the LibTorch hook is built if missing."""
    if request.param == "python":
        monkeypatch.setenv("GPUUTIL_TORCH_HOOK", "python")
    else:
        from gpuutil.torch import _ext

        module, reason = _ext.load(build=True)
        assert module is not None, reason
    return request.param


def diagnostic_names(report):
    d = report["diagnostics"]
    return {x["name"] for x in d} if isinstance(d, list) else set(d)


class SlowDataset(Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n = n
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.randn(16), torch.randn(1)


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train(loader, model, opt, *, item: bool) -> int:
    steps = 0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if item:
            loss.item()
        steps += 1
    return steps


def main_thread(step):
    hosts = step["host"]
    assert hosts, "no host breakdown"
    return max(hosts, key=lambda h: h["breakdown_ns"]["dataloader"] + h["breakdown_ns"]["optimizer"])


def test_slow_dataloader_is_attributed_to_dataloader_every_step(tmp_path, hook_mode):
    model, opt = make_model()
    # batch_size=1: one 30 ms sleep per batch, num_workers=0.
    loader = DataLoader(SlowDataset(6, SLEEP_S), batch_size=1, num_workers=0)
    out = tmp_path / "steps.jsonl"
    with gpuutil.profile(output=str(out)) as prof:
        n = train(loader, model, opt, item=False)
    reports = list(prof.reports)
    assert n == 6
    assert len(reports) == 6
    for r in reports:
        step = r["steps"][0]
        h = main_thread(step)
        assert sum(h["breakdown_ns"].values()) == h["wall_ns"] == step["wall_ns"]
        assert h["breakdown_ns"]["dataloader"] >= 25_000_000, h
        names = [c["name"] for c in h["culprits"]["dataloader"]]
        assert any(n.startswith("enumerate(DataLoader)#") for n in names)
        assert ("torch_hook_fallback" in diagnostic_names(r)) == (hook_mode == "python")
    # The JSONL file has the same steps with the host breakdown.
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[-1]["schema"] == "gpuutil.run/1"  # the run record, written at stop
    lines = lines[:-1]
    assert len(lines) == 6 and all(line["steps"][0]["host"] for line in lines)
    summary = prof.summary()
    assert summary["steps_source"] == "optimizer_step"
    assert summary["host"][0]["breakdown_ns"]["dataloader"] >= 6 * 25_000_000


def test_item_every_step_names_aten_item_as_host_sync_culprit(hook_mode):
    model, opt = make_model()
    loader = DataLoader(SlowDataset(4, 0.0), batch_size=4, num_workers=0)
    with gpuutil.profile() as prof:
        for _ in range(2):
            train(loader, model, opt, item=True)
    reports = list(prof.reports)
    # The .item() after opt.step() of step k lands at the start of step k+1.
    assert len(reports) >= 2
    for r in reports[1:]:
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["host_sync"] > 0
        culprits = [c["name"] for c in h["culprits"]["host_sync"]]
        assert culprits and culprits[0] in ("aten::item", "aten::_local_scalar_dense")


def test_automatic_steps_match_optimizer_steps(hook_mode):
    model, opt = make_model()
    loader = DataLoader(SlowDataset(12, 0.0), batch_size=2, num_workers=0)
    with gpuutil.profile() as prof:
        n = train(loader, model, opt, item=False)
    reports = list(prof.reports)
    assert n == 6
    assert [r["steps"][0]["step"] for r in reports] == list(range(6))
    assert all(r["sources"][0]["steps_source"] == "optimizer_step" for r in reports)
    # Contiguous: each step starts where the previous one ended.
    for a, b in zip(reports, reports[1:]):
        assert b["steps"][0]["start_ns"] == a["steps"][0]["end_ns"]
    for r in reports:
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["optimizer"] > 0
        assert h["breakdown_ns"]["backward"] > 0
        assert h["breakdown_ns"]["forward"] > 0


def test_user_marked_steps_win_over_optimizer_hooks(hook_mode):
    model, opt = make_model()
    loader = DataLoader(SlowDataset(8, 0.0), batch_size=2, num_workers=0)
    with gpuutil.profile() as prof:
        it = iter(loader)
        for _ in range(4):
            with prof.step():
                x, y = next(it)
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    reports = list(prof.reports)
    assert len(reports) == 4
    assert prof.summary()["steps_source"] == "user"
    assert all(r["sources"][0]["steps_source"] == "user" for r in reports)


def test_python_hooks_are_removed_when_the_profile_stops(monkeypatch):
    monkeypatch.setenv("GPUUTIL_TORCH_HOOK", "python")
    item_before = torch.Tensor.item
    next_before = torch.utils.data.dataloader._BaseDataLoaderIter.__next__
    with gpuutil.profile():
        assert torch.Tensor.item is not item_before
    assert torch.Tensor.item is item_before
    assert torch.utils.data.dataloader._BaseDataLoaderIter.__next__ is next_before


def test_import_gpuutil_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, gpuutil; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_libtorch_hook_sees_autograd_nodes_when_asked_and_reports_no_fallback(monkeypatch):
    from gpuutil import _collectors
    from gpuutil.torch import TorchCollector, _ext

    module, reason = _ext.load(build=True)
    assert module is not None, reason
    ranges = {}
    others = [f for f in _collectors.factories() if f.__name__ != "_torch_collector"]
    for autograd_nodes in (True, False):
        factories = list(others)
        factories.append(lambda p, a=autograd_nodes: TorchCollector(p, autograd_nodes=a))
        monkeypatch.setattr(_collectors, "_COLLECTOR_FACTORIES", factories)
        model, opt = make_model()
        loader = DataLoader(SlowDataset(4, 0.0), batch_size=2, num_workers=0)
        with gpuutil.profile() as prof:
            collector = next(c for c in prof._collectors if c.name == "torch")
            assert collector.mode == "libtorch"
            counted = CountingDrain(collector._drainer)
            collector._drainer = counted
            train(loader, model, opt, item=True)
        r = prof.reports[0]  # a whole optimizer step (the last report is the tail at stop)
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["backward"] > 0
        assert "## backward ##" in [c["name"] for c in h["culprits"]["backward"]]
        assert "torch_hook_fallback" not in diagnostic_names(r)
        ranges[autograd_nodes] = counted.ranges
    # The MLP's backward has 5+ autograd nodes per step (2 steps), each one range.
    assert ranges[True] >= ranges[False] + 10, ranges


def test_a_detail_step_with_more_autograd_nodes_than_a_fixed_ring_held_loses_none(monkeypatch):
    """One optimizer step whose backward runs 3 x 2,500 autograd nodes on the
    training thread (gradient accumulation over 3 micro-batches of a deep
    chain of small ops): 7,500+ ranges between two drains. The hook's fixed
    4,096-range rings dropped the rest (torch_ranges_dropped); its queues
    (csrc/hook_ring.h) grow from a shared slab and keep every one."""
    from gpuutil import _collectors
    from gpuutil.torch import TorchCollector, _ext

    module, reason = _ext.load(build=True)
    assert module is not None, reason
    others = [f for f in _collectors.factories() if f.__name__ != "_torch_collector"]
    factories = others + [lambda p: TorchCollector(p, autograd_nodes=True)]
    monkeypatch.setattr(_collectors, "_COLLECTOR_FACTORIES", factories)
    w = torch.ones(8, requires_grad=True)
    opt = torch.optim.SGD([w], lr=1e-6)
    with gpuutil.profile(detail="always", report_interval_ms=0) as prof:
        collector = next(c for c in prof._collectors if c.name == "torch")
        assert collector.mode == "libtorch"
        counted = CountingDrain(collector._drainer)
        collector._drainer = counted
        for _ in range(2):  # two optimizer steps
            opt.zero_grad()
            for _micro in range(3):
                x = w
                for _op in range(2500):
                    x = x * 1.0001
                x.sum().backward()
            opt.step()
    reports = prof.reports
    dropped = [d for r in reports for d in r["diagnostics"] if d["name"] == "torch_ranges_dropped"]
    assert dropped == [], dropped
    assert counted.ranges >= 2 * 3 * 2500, counted.ranges
    stats = module.queue_stats()
    assert stats["segments"] == module.max_segments
    # The deepest backlog (one step) is what was ever written, not the run.
    per_step_segments = 2 * 3 * 2500 // module.segment_ranges + 1
    assert stats["segments_touched"] <= 2 * per_step_segments, stats


def test_a_child_forked_during_a_profile_records_nothing_into_its_copy_of_the_queues():
    """A DataLoader worker (forked, by default on Linux) inherits the hook's
    callbacks but nobody drains its queues: it must not fill its copy of
    the slab (up to 64 MiB per worker) with ranges no one reads."""
    import os

    from gpuutil.torch import _ext

    module, reason = _ext.load(build=True)
    assert module is not None, reason
    with gpuutil.profile(detail="always", report_interval_ms=0):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: record, then report what its queues hold
            code = 1
            try:
                before = module.queue_stats()["segments_touched"]
                for _ in range(5000):
                    with torch.autograd.profiler.record_function("worker.range"):
                        pass
                ranges, dropped = module.drain()
                after = module.queue_stats()["segments_touched"]
                os.write(write_fd, f"{len(ranges)} {dropped} {after - before}".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        _, status = os.waitpid(pid, 0)
        out = os.read(read_fd, 100).decode()
        os.close(read_fd)
        assert os.waitstatus_to_exitcode(status) == 0, out
        # The parent still records.
        with torch.autograd.profiler.record_function("parent.range"):
            pass
    assert out == "0 0 0", out


def test_ranges_nested_deeper_than_the_hook_tracks_are_counted_as_dropped():
    """The hook keeps start times 64 ranges deep per thread; the 6 innermost
    of 70 nested ranges are counted (torch_ranges_dropped), not lost
    silently."""
    from gpuutil.torch import _ext

    module, reason = _ext.load(build=True)
    assert module is not None, reason
    module.drain()
    module.start(function_scope=False, autograd_nodes=False, detail=False, user_scope_always=True)
    try:
        with contextlib.ExitStack() as stack:
            for depth in range(70):
                stack.enter_context(torch.autograd.profiler.record_function(f"depth{depth}"))
        ranges, dropped = module.drain()
    finally:
        module.stop()
    names = [r[0] for r in ranges]
    assert dropped == 6, (dropped, len(names))
    assert sorted(names) == sorted(f"depth{d}" for d in range(64))


class CountingDrain:
    """Counts the ranges the C++ drainer moves into the session."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.ranges = 0

    def drain(self) -> int:
        n = self.inner.drain()
        self.ranges += n
        return n


def test_autograd_nodes_are_off_by_default_without_cuda():
    from gpuutil.torch import TorchCollector

    with gpuutil.profile() as prof:
        collector = next(c for c in prof._collectors if c.name == "torch")
        assert isinstance(collector, TorchCollector)
        assert collector._autograd_nodes == torch.cuda.is_available()


def test_libtorch_hook_version_mismatch_falls_back_with_a_reason(monkeypatch):
    from gpuutil.torch import _ext

    module, reason = _ext.load(build=True)
    assert module is not None, reason
    monkeypatch.setattr(_ext, "_torch_release", lambda: "0.0.0")
    module, reason = _ext.load()
    assert module is None
    assert "built against torch" in reason


def test_collectives_are_attributed_to_collective_on_both_paths(hook_mode, all_reduce_steps):
    """A real (gloo, one rank) all_reduce inside each step lands in the
    collective category: from PyTorch's c10d ops with the LibTorch hook
    (FUNCTION scope on the first, detail steps), from the torch.distributed
    wrappers in the fallback."""
    for r in all_reduce_steps():
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["collective"] > 0, h
        names = [c["name"] for c in h["culprits"]["collective"]]
        assert any("all_reduce" in n or "allreduce" in n for n in names), names
        assert sum(h["breakdown_ns"].values()) == h["wall_ns"]


def test_blocking_copies_of_device_tensors_are_host_sync(hook_mode, monkeypatch):
    """.cpu()/.tolist() of a tensor on an accelerator wait for the device:
    host_sync, with the call as culprit. (No GPU here: the accelerator test
    is planted so a CPU tensor counts as one.)"""
    from gpuutil.torch import _fallback

    monkeypatch.setattr(_fallback, "on_accelerator", lambda t: True)
    model, opt = make_model()
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(2):
            out = model(torch.randn(4, 16))
            time.sleep(0.002)
            out.detach().cpu()
            out.detach().tolist()
            loss = out.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert torch.Tensor.cpu is torch._C.TensorBase.cpu  # the patch is undone, not shadowed
    r = prof.reports[0]
    h = main_thread(r["steps"][0])
    names = {c["name"] for c in h["culprits"]["host_sync"]}
    assert {"## host_sync: Tensor.cpu ##", "## host_sync: Tensor.tolist ##"} <= names
    assert h["breakdown_ns"]["host_sync"] > 0


def test_cpu_tensors_copies_make_no_ranges(hook_mode):
    model, opt = make_model()
    with gpuutil.profile(report_interval_ms=0) as prof:
        out = model(torch.randn(4, 16))
        out.detach().cpu()
        loss = out.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    h = main_thread(prof.reports[0]["steps"][0])
    assert h["breakdown_ns"]["host_sync"] == 0


class RecordingSession:
    """Delegates to the real session and records add_counter calls."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.counters = []

    def add_counter(self, name, ts_ns, device, value):
        self.counters.append((name, device, value))
        self._inner.add_counter(name, ts_ns, device, value)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_allocator_stats_are_fed_as_counters_every_step(monkeypatch):
    """With CUDA, each step end samples the caching allocator per device
    into torch_allocated_bytes / torch_reserved_bytes /
    torch_peak_allocated_bytes counters (the engine's health fields). No
    GPU here: the sampler is planted."""
    from gpuutil.torch import _collector

    monkeypatch.setattr(_collector, "allocator_stats", lambda: [(0, 100.0, 200.0, 150.0), (1, 10.0, 20.0, 15.0)])
    model, opt = make_model()
    with gpuutil.profile(report_interval_ms=0) as prof:
        next(c for c in prof._collectors if c.name == "torch")._cuda = True  # as on a CUDA machine
        recording = RecordingSession(prof._handle.session)
        prof._handle.session = recording  # what the collectors write to
        for _ in range(2):
            loss = model(torch.randn(4, 16)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        prof._handle.session = recording._inner
    assert recording.counters.count(("torch_allocated_bytes", 0, 100.0)) == 2
    assert recording.counters.count(("torch_peak_allocated_bytes", 1, 15.0)) == 2
    assert len(recording.counters) == 12


def test_allocator_stats_are_empty_without_cuda():
    from gpuutil.torch._collector import allocator_stats

    if not torch.cuda.is_available():
        assert allocator_stats() == []


def test_optimizer_internal_cpu_item_calls_make_no_host_sync(hook_mode):
    """AdamW reads its CPU step counters with .item() once per parameter:
    not a device sync, and not the user's .item(); only the latter is
    host_sync."""
    model, _ = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(3):
            loss = model(torch.randn(4, 16)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    for r in list(prof.reports)[1:3]:
        h = main_thread(r["steps"][0])
        assert h["breakdown_ns"]["host_sync"] == 0, h["culprits"]["host_sync"]
        assert h["breakdown_ns"]["optimizer"] > 0
