"""The live step path in C++ (``_core.StepPath``): automatic step boundaries
closed by the optimizer post-hook without entering Python, the collectors'
per-step work run only at the boundaries they ask for (and at report
batches), and the same reports as when Python ran at every boundary."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402
from gpuutil.torch import _collector  # noqa: E402


@pytest.fixture(autouse=True)
def libtorch_hook():
    from gpuutil.torch import _ext

    module, reason = _ext.load(build=True)
    assert module is not None, reason


def train(steps: int, *, report_interval_ms: float, detail: str = "sampled", calls=None):
    """``steps`` optimizer steps of a small MLP with ``.item()``; returns the
    step reports. ``calls`` collects the step index of every call of the
    PyTorch collector's per-step work."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    with gpuutil.profile(detail=detail, report_interval_ms=report_interval_ms) as prof:
        for _ in range(steps):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
    if calls is not None:
        calls.extend(prof._handle._path_calls)  # type: ignore[attr-defined]
    return [s for r in prof.reports for s in r["steps"]]


@pytest.fixture
def counted(monkeypatch):
    """Records, per profile, the boundaries at which TorchCollector.on_step_end ran."""
    original = _collector.TorchCollector.on_step_end

    def on_step_end(self, handle):  # the profile's CollectorHandle
        if not hasattr(handle, "_path_calls"):
            handle._path_calls = []
        handle._path_calls.append(handle.path.boundaries)
        original(self, handle)

    monkeypatch.setattr(_collector.TorchCollector, "on_step_end", on_step_end)


def shape(step):
    """What a step's report says, without times: (detail, per host
    category the culprit names with their counts)."""
    host = {}
    for h in step["host"]:
        for cat, culprits in h["culprits"].items():
            for c in culprits:
                host[(cat, c["name"])] = host.get((cat, c["name"]), 0) + c["count"]
    return step.get("detail"), host


def test_boundaries_between_due_ones_never_enter_python(counted):
    calls = []
    steps = train(250, report_interval_ms=1e9, calls=calls)
    assert [s["step"] for s in steps] == list(range(250))
    # The first boundary reports; the sampled tier's first three steps and
    # the forward rediscovery / detail step every 100 steps need Python, at
    # their start and at their end. Nothing else does.
    assert calls == [1, 2, 3, 100, 101, 200, 201]


def test_reports_are_the_same_as_with_python_at_every_boundary(counted):
    every, skipped = [], []
    per_step = train(230, report_interval_ms=0, calls=every)
    batched = train(230, report_interval_ms=1e9, calls=skipped)
    assert every == list(range(1, 231))  # report_interval_ms=0: every boundary reports
    assert len(skipped) < 10
    assert [shape(s)[1] for s in batched] == [shape(s)[1] for s in per_step]
    # Detail steps: the schedule's; reporting every step also asks for one
    # after each finding's first report (here, sooner than a batch would).
    assert [s["step"] for s in batched if s.get("detail")] == [0, 1, 2, 100, 200]
    assert {0, 1, 2, 100, 200} <= {s["step"] for s in per_step if s.get("detail")}
    for s in batched:
        h = max(s["host"], key=lambda h: h["wall_ns"] - h["breakdown_ns"]["other"])
        assert sum(h["breakdown_ns"].values()) == h["wall_ns"] == s["wall_ns"]
        assert h["breakdown_ns"]["forward"] > 0 and h["breakdown_ns"]["backward"] > 0
        assert h["breakdown_ns"]["optimizer"] > 0


def test_detail_off_needs_python_only_for_forward_rediscovery(counted):
    calls = []
    steps = train(120, report_interval_ms=1e9, detail="off", calls=calls)
    assert calls == [1, 100, 101]
    assert not any(s.get("detail") for s in steps)


def test_a_range_on_another_thread_lands_on_that_thread_by_its_python_name():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(3):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        worker = threading.Thread(target=lambda: model(torch.randn(2, 4)), name="feeder")
        worker.start()
        worker.join()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    last = prof.reports[-1]["steps"][0]
    names = {h["name"]: h for h in last["host"]}
    assert "feeder" in names, sorted(names)
    assert names["feeder"]["culprits"]["forward"][0]["name"] == "nn.Module: Linear"


def test_a_nested_optimizer_step_ends_one_step_only():
    model = torch.nn.Linear(4, 4)
    inner = torch.optim.SGD(model.parameters(), lr=0.01)

    class Outer(torch.optim.SGD):
        def step(self, closure=None):
            inner.step()  # an optimizer that drives another (a wrapper, a scheduler)
            return super().step(closure)

    outer = Outer(model.parameters(), lr=0.01)
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(4):
            model(torch.randn(2, 4)).sum().backward()
            outer.step()
    steps = [s for r in prof.reports for s in r["steps"]]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    culprits = steps[-1]["host"][0]["culprits"]["optimizer"]
    assert {c["name"] for c in culprits} >= {"Optimizer.step#Outer.step"}


def test_without_detail_no_record_function_callback_is_registered():
    """A registered RecordFunction callback costs every step (PyTorch rebuilds
    its callback lists at each thread-local state switch), so outside detail
    steps the hook has none: a user record_function range reaches it only
    while the detail tier is on."""
    from gpuutil.torch import _ext

    hook, _ = _ext.load(build=False)
    hook.drain()
    hook.start(False, False, False, False)  # no detail, USER_SCOPE not always on
    try:
        with torch.autograd.profiler.record_function("outside detail"):
            pass
        assert hook.drain()[0] == []
        assert hook.set_detail(True)
        with torch.autograd.profiler.record_function("in detail"):
            pass
        assert [r[0] for r in hook.drain()[0]] == ["in detail"]
        assert not hook.set_detail(False)
        with torch.autograd.profiler.record_function("outside again"):
            pass
        assert hook.drain()[0] == []
    finally:
        hook.stop()


@pytest.mark.parametrize("detail", ["off", "sampled"])
def test_dataloader_waits_and_zero_grad_are_timed_on_every_step_of_each_tier(detail):
    import time

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            time.sleep(0.003)
            return torch.randn(4), torch.randn(1)

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Slow(), batch_size=1)
    with gpuutil.profile(detail=detail, report_interval_ms=1e9) as prof:
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.zero_grad()
            opt.step()
    steps = [s for r in prof.reports for s in r["steps"]]
    assert len(steps) == 8
    for s in steps:
        h = s["host"][0]
        assert h["breakdown_ns"]["dataloader"] >= 2_500_000, (s["step"], s.get("detail"), h["breakdown_ns"])
        names = {c["name"]: c["count"] for c in h["culprits"]["dataloader"] + h["culprits"]["optimizer"]}
        # One range each, from the wrappers or (detail steps) from PyTorch's own ranges, never both.
        assert names["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] == 1, names
        assert names["Optimizer.zero_grad#SGD.zero_grad"] == 1, names


def test_user_scope_can_turn_always_on_when_distributed_comes_up_later():
    """torch.distributed initialised after the profile started: the hook's
    USER_SCOPE callback goes always-on at a boundary, and a range is still
    recorded once when the detail tier is on as well."""
    from gpuutil.torch import _ext

    hook, _ = _ext.load(build=False)
    hook.drain()
    hook.start(False, False, False, False)
    try:
        hook.set_user_scope_always(True)
        with torch.autograd.profiler.record_function("always on now"):
            pass
        assert hook.set_detail(False) is False  # nothing else to add: no detail scopes
        hook.set_user_scope_always(False)
        assert hook.set_detail(True)
        hook.set_user_scope_always(True)  # USER_SCOPE moves out of the detail tier (nothing left in it here)
        with torch.autograd.profiler.record_function("both on"):
            pass
        assert [r[0] for r in hook.drain()[0]] == ["always on now", "both on"]
    finally:
        hook.stop()


def linear_step(model, opt) -> "torch.Tensor":
    """One optimizer step of ``model`` on a random batch of 4; the loss."""
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def test_tensor_item_is_pytorchs_own_inside_optimizer_steps_and_gpuutils_outside():
    """Optimizers read their CPU step counters with .item() once per
    parameter (AdamW here): from the first such call on, inside
    optimizer.step() the step path puts PyTorch's method back, so those
    calls pay no wrapper; outside, .item()
    is gpuutil's wrapper (a host sync range); after the profile the class
    is exactly as before (inherited, not shadowed)."""
    from torch.optim import optimizer as optim_mod

    base = torch._C.TensorBase.item
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    seen = []
    with gpuutil.profile(detail="off", report_interval_ms=0) as prof:
        # Registered after gpuutil's hooks: this pre-hook runs after the
        # swap in, this post-hook after the swap back.
        h1 = optim_mod.register_optimizer_step_pre_hook(lambda o, a, k: seen.append(torch.Tensor.item is base))
        h2 = optim_mod.register_optimizer_step_post_hook(lambda o, a, k: seen.append(torch.Tensor.item is base))
        calls = []
        real_item = base

        def counting(t):
            calls.append(1)
            return real_item(t)

        try:
            for _ in range(3):
                loss = linear_step(model, opt)
                outside = torch.Tensor.item is not base
                loss.item()
        finally:
            h1.remove()
            h2.remove()
        assert prof._path.swapping and outside
    # The first step's AdamW .item() turned the swap on (inside that step).
    assert seen == [False, False] + [True, False] * 2
    assert not prof._path.swapping  # the swap ended with the profile
    assert torch.Tensor.item is base and "item" not in vars(torch.Tensor)
    hosts = [max(s["host"], key=lambda h: h["breakdown_ns"]["optimizer"]) for s in (
        st for r in prof.reports for st in r["steps"])]
    # the user's loss.item() after step k is a host sync of step k+1; AdamW's own are not
    assert all(h["breakdown_ns"]["host_sync"] > 0 for h in hosts[1:3]), hosts
    assert all(h["culprits"]["host_sync"][0]["name"] == "aten::item" for h in hosts[1:3])


def test_a_swap_the_owner_refuses_ends_and_leaves_the_wrapper():
    """A store that fails (an owner without settable attributes) ends the
    swap quietly: the wrapper stays, which is only slower."""
    prof = gpuutil.profile(detail="off", report_interval_ms=0)
    with prof:
        path = prof._path
        path.swap_in_optimizer(object(), "item", 1, 2)  # object() takes no attributes
        assert not path.swapping
        path.optimizer_pre(None, (), {})
        path.optimizer_post(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1), (), {})
        assert not path.swapping


def test_an_optimizer_without_item_calls_never_swaps():
    """SGD reads no step counters: the swap (two attribute stores per
    step) never turns on, and .item() stays gpuutil's wrapper throughout."""
    base = torch._C.TensorBase.item
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gpuutil.profile(detail="off", report_interval_ms=0) as prof:
        for _ in range(3):
            linear_step(model, opt).item()
            assert torch.Tensor.item is not base
        assert not prof._path.swapping
    assert torch.Tensor.item is base
