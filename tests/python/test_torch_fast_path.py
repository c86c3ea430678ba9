"""The PyTorch collector's per-step fast path: forward time from wrapped
root classes (every module call intercepted only while discovering, by a
wrapper on torch.nn.Module.__call__, never global module hooks), hook ranges
drained into the session in C++ through the hook's C interface, and the
hook loaded without a build step (and refused when out of date)."""

from __future__ import annotations

import copy
import pickle

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402
from gpuutil import _core  # noqa: E402
from gpuutil.torch._forward import ForwardRanges  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())

    def forward(self, x):
        return self.body(x)


class Other(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Recorder:
    """A real session and step path; forward_ranges() closes one step and
    returns its forward culprits {name: count} from the session's report."""

    def __init__(self) -> None:
        import threading

        self.session = _core.Session()
        self.path = _core.StepPath(self.session, 0, threading.main_thread().ident)
        self.t0 = _core.now_ns()

    def forward_ranges(self) -> "dict[str, int]":
        now = _core.now_ns()
        self.session.close_step(0, self.t0, now)
        import json

        (line,) = self.session.collect(now)
        host = json.loads(line)["steps"][0]["host"]
        return {c["name"]: c["count"] for h in host for c in h["culprits"]["forward"]}


def test_forward_discovers_root_classes_then_wraps_only_them():
    rec = Recorder()
    fr = ForwardRanges(rec.path, rediscover_every=1000)
    fr.install()
    net, x = Net(), torch.randn(2, 4)
    try:
        assert fr.discovering
        net(x)  # step 0: the discovery wrapper sees Net at the outermost level
        fr.on_step_end(1)
        assert not fr.discovering
        assert fr.wrapped_classes == [Net]
        # No global hook is left: child modules take PyTorch's fast path.
        from torch.nn.modules import module as module_mod

        assert not module_mod._global_forward_pre_hooks and not module_mod._global_forward_hooks
        net(x)
        net.body(x)  # not a root class: not timed
    finally:
        fr.uninstall()
    assert rec.forward_ranges() == {"nn.Module: Net": 2}
    assert "__call__" not in Net.__dict__  # the class is restored


def test_two_profiles_discovering_at_once_share_one_module_call_wrapper_and_restore_it():
    rec_a, rec_b = Recorder(), Recorder()
    fa, fb = ForwardRanges(rec_a.path), ForwardRanges(rec_b.path)
    own_call = torch.nn.Module.__dict__["__call__"]
    net, x = Net(), torch.randn(2, 4)
    fa.install()
    fb.install()
    try:
        net(x)  # both see Net at the outermost level, each on its own path
        fa.on_step_end(1)  # a wraps Net while b still discovers
        assert torch.nn.Module.__dict__["__call__"] is not own_call  # b's discovery goes on
        net(x)  # a's wrapper: b still sees Net (not its child) at the outermost level
        fa.uninstall()  # not in reverse order of install
        fb.on_step_end(1)  # b wraps Net too
        assert torch.nn.Module.__dict__["__call__"] is own_call
        net(x)  # b's wrapper only
    finally:
        fa.uninstall()
        fb.uninstall()
    assert torch.nn.Module.__dict__["__call__"] is own_call
    assert "__call__" not in Net.__dict__
    assert rec_a.forward_ranges() == {"nn.Module: Net": 2}
    assert rec_b.forward_ranges() == {"nn.Module: Net": 3}


def test_forward_rediscovery_finds_a_new_root_class():
    rec = Recorder()
    fr = ForwardRanges(rec.path, rediscover_every=2)
    fr.install()
    net, other, x = Net(), Other(), torch.randn(2, 4)
    try:
        net(x)
        assert fr.steps_until_due(0) == 1  # discovering: the next boundary ends it
        fr.on_step_end(1)  # step 0 ends: Net wrapped
        assert fr.steps_until_due(1) == 1  # the rediscovery starts at step 2
        other(x)  # not seen: no discovery running
        fr.on_step_end(2)  # step 1 ends: a discovery step starts
        assert fr.discovering
        other(x)
        fr.on_step_end(3)
        assert set(fr.wrapped_classes) == {Net, Other}
        assert fr.steps_until_due(3) == 1 and fr.steps_until_due(2) == 2
    finally:
        fr.uninstall()
    assert rec.forward_ranges() == {"nn.Module: Net": 1, "nn.Module: Other": 1}


def test_forward_nested_roots_and_exceptions_make_one_range_each():
    rec = Recorder()
    fr = ForwardRanges(rec.path)
    fr.install()
    net, x = Net(), torch.randn(2, 4)
    try:
        net(x)
        fr.on_step_end(1)

        class Outer(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = net

            def forward(self, x):
                return self.inner(x)

        fr._wrap(Outer)
        Outer()(x)  # Outer and Net both wrapped: one range, the outer one
        with pytest.raises(RuntimeError):
            net(torch.randn(2, 5))  # shape error inside forward
        net(x)  # depth was restored by the failed call
    finally:
        fr.uninstall()
    assert rec.forward_ranges() == {"nn.Module: Net": 3, "nn.Module: Outer": 1}


def test_models_stay_picklable_and_copyable_while_profiled():
    net, opt = Net(), None
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with gpuutil.profile() as prof:
        for _ in range(3):
            loss = net(torch.randn(2, 4)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        pickle.loads(pickle.dumps(net))
        copy.deepcopy(net)
    forward = [r["steps"][0]["host"][0]["breakdown_ns"]["forward"] for r in prof.reports]
    assert all(f > 0 for f in forward[1:]), forward  # timed after discovery too
    assert "__call__" not in Net.__dict__


def test_hook_ranges_reach_the_session_through_the_c_interface():
    from gpuutil.torch import _ext

    hook, reason = _ext.load(build=True)
    assert hook is not None, reason
    session = _core.Session()
    drain = _core.TorchHookDrain(session, hook.api())
    hook.drain()
    hook.start(False)
    try:
        with torch.autograd.profiler.record_function("user range"):
            pass
        with torch.autograd.profiler.record_function("Optimizer.step#SGD.step"):
            pass  # timed by the optimizer hooks instead: skipped
    finally:
        hook.stop()
    assert drain.drain() == 1
    assert session.pending_events == 1
    assert drain.drain() == 0


def test_a_foreign_capsule_is_refused():
    session = _core.Session()
    with pytest.raises(Exception):
        _core.TorchHookDrain(session, object())
    import ctypes

    capsule = ctypes.pythonapi.PyCapsule_New
    capsule.restype = ctypes.py_object
    capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    wrong = capsule(ctypes.addressof(ctypes.c_int(1)), b"not.gpuutil", None)
    with pytest.raises(ValueError, match="capsule"):
        _core.TorchHookDrain(session, wrong)


def test_an_out_of_date_hook_build_is_reported_not_loaded(tmp_path, monkeypatch):
    from gpuutil.torch import _ext

    monkeypatch.setenv("GPUUTIL_TORCH_EXT_DIR", str(tmp_path))
    d = _ext.build_dir()
    d.mkdir(parents=True)
    (d / f"{_ext.NAME}.so").write_bytes(b"not a library")
    (d / _ext.STAMP).write_text("0" * 64 + "\n")
    module, reason = _ext.load()
    assert module is None
    assert "out of date" in reason


def test_a_module_call_wrapper_put_over_discovery_keeps_working_across_discoveries():
    rec = Recorder()
    fr = ForwardRanges(rec.path, rediscover_every=2)
    own_call = torch.nn.Module.__dict__["__call__"]
    fr.install()
    below = torch.nn.Module.__call__
    calls = []

    def theirs(mod, *args, **kwargs):  # another tool wraps Module.__call__ after gpuutil did
        calls.append(type(mod))
        return below(mod, *args, **kwargs)

    torch.nn.Module.__call__ = theirs
    net, x = Net(), torch.randn(2, 4)
    try:
        net(x)
        fr.on_step_end(1)  # discovery ends: theirs stays on top, gpuutil's under it
        assert torch.nn.Module.__dict__["__call__"] is theirs
        fr.on_step_end(2)  # a rediscovery starts again
        Other()(x)  # no endless recursion through the two wrappers
        fr.on_step_end(3)
        assert set(fr.wrapped_classes) == {Net, Other}
    finally:
        fr.uninstall()
        torch.nn.Module.__call__ = own_call
    assert calls.count(Other) == 1
    assert rec.forward_ranges() == {"nn.Module: Net": 1, "nn.Module: Other": 1}
