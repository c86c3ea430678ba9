"""torch.compile under gpuutil.profile() is the same program: Dynamo's
counters (graph breaks, captured calls, graphs, frames, recompiles) and
the warnings are those of the program without gpuutil, in every compile
form (``torch.compile(model)``, ``model.compile()``, ``torch.compile(fn)``,
``fullgraph=True``) and with automatic steps or ``prof.step()``, also
with a collective, a blocking copy or ``zero_grad`` inside the compiled
code; forward and backward of a compiled module are still timed; and the
steps that compiled carry the ``compile_warmup`` mark
(python/gpuutil/torch/_compile.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

import gpuutil  # noqa: E402
from gpuutil import _core  # noqa: E402

from torch._dynamo.utils import counters  # noqa: E402

#: Dynamo's counters that say what it compiled: graph breaks (by reason),
#: captured calls and graphs, frames looked at, resumes after a break,
#: recompiles, and AOTAutograd's compiles.
DYNAMO_COUNTERS = ("graph_break", "stats", "frames", "unimplemented", "resumes", "recompiles", "aot_autograd")
#: Steps run: past the forward's rediscovery step (every 100 steps), which
#: must not recompile anything either.
STEPS = 102


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Pointwise(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x) * 2 + 1


def make_model(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "mlp":
        return MLP()
    # The second case: a Sequential of pointwise blocks (0 -> 5 breaks).
    return torch.nn.Sequential(torch.nn.Linear(8, 8), *[Pointwise() for _ in range(5)])


def compiled(form: str, model: torch.nn.Module, backend: str):
    """The callable a training step calls, compiled the way ``form`` says."""
    if form == "module":
        return torch.compile(model, backend=backend)
    if form == "module_fullgraph":
        return torch.compile(model, backend=backend, fullgraph=True)
    if form == "method":
        model.compile(backend=backend)
        return model
    if form == "function":
        return torch.compile(lambda x: model(x), backend=backend)
    if form == "function_fullgraph":
        return torch.compile(lambda x: model(x), backend=backend, fullgraph=True)
    raise ValueError(form)


def run(form: str, kind: str = "mlp", *, profiled: bool, user_steps: bool = False, backend: str = "aot_eager"):
    """One fresh compile and STEPS training steps; returns (Dynamo's
    counters, the warnings raised, the step reports or None)."""
    dynamo.reset()
    counters.clear()
    model = make_model(kind)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    reports = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call = compiled(form, model, backend)

        def step() -> None:
            call(x).sum().backward()
            opt.step()
            opt.zero_grad()

        if profiled:
            with gpuutil.profile(report_interval_ms=0) as prof:
                for _ in range(STEPS):
                    if user_steps:
                        with prof.step():
                            step()
                    else:
                        step()
            reports = prof.reports
        else:
            for _ in range(STEPS):
                step()
    seen = {k: dict(v) for k, v in counters.items() if k in DYNAMO_COUNTERS and v}
    return seen, sorted({(w.category.__name__, str(w.message)) for w in caught}), reports


def main_thread(step):
    return max(step["host"], key=lambda h: h["breakdown_ns"]["backward"])


CASES = [
    ("module", "mlp"),
    ("module", "pointwise"),
    ("method", "mlp"),
    ("function", "mlp"),
    ("module_fullgraph", "mlp"),
    ("function_fullgraph", "mlp"),
]


@pytest.mark.parametrize("form,kind", CASES)
def test_compiled_model_has_the_same_graphs_and_warnings_under_profile(form, kind):
    run(form, kind, profiled=False)  # warm-up: one-time imports and their warnings
    plain_counters, plain_warnings, _ = run(form, kind, profiled=False)
    assert plain_counters["stats"]["unique_graphs"] >= 1  # it did compile
    for user_steps in (False, True):
        got_counters, got_warnings, reports = run(form, kind, profiled=True, user_steps=user_steps)
        assert got_counters == plain_counters, (user_steps, got_counters)
        assert got_warnings == plain_warnings, user_steps
        assert len(reports) == STEPS
        for r in reports:
            host = main_thread(r["steps"][0])["breakdown_ns"]
            assert host["backward"] > 0, (user_steps, r["steps"][0]["step"])
            if not form.startswith("function"):  # a module called inside a compiled function makes no range
                assert host["forward"] > 0, (user_steps, r["steps"][0]["step"])


def test_a_compiled_module_is_timed_under_the_name_of_the_module_it_compiles():
    *_, reports = run("module", profiled=True)
    names = {c["name"] for r in reports[1:] for c in main_thread(r["steps"][0])["culprits"]["forward"]}
    assert names == {"nn.Module: MLP"}


def test_discovery_and_rediscovery_register_no_global_module_hook():
    from torch.nn.modules import module as module_mod

    seen = []

    class Watched(MLP):
        def forward(self, x):
            seen.append(bool(module_mod._has_any_global_hook()))  # what torch.compile(module) warns about
            return super().forward(x)

    call_before = torch.nn.Module.__dict__["__call__"]
    model = Watched()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(STEPS):  # step 0 and step 100 discover
            model(torch.randn(2, 8)).sum().backward()
            opt.step()
    assert len(seen) == STEPS and not any(seen)
    assert torch.nn.Module.__dict__["__call__"] is call_before
    forward = [main_thread(r["steps"][0])["breakdown_ns"]["forward"] for r in prof.reports]
    assert all(f > 0 for f in forward)


@pytest.mark.skipif(not hasattr(_core.StepPath, "compile_begin"), reason="core without compile_warmup")
def test_the_steps_that_compile_are_marked_compile_warmup():
    *_, reports = run("module", profiled=True, user_steps=True)
    warm = [r["steps"][0].get("compile_warmup", False) for r in reports]
    assert warm[0] and not any(warm[1:]), warm
    diags = {d["name"]: d for d in reports[0]["diagnostics"]}
    assert diags["compile_warmup"]["example"].startswith("torch.compile: frame 0/0")
    assert all("compile_warmup" not in {d["name"] for d in r["diagnostics"]} for r in reports[1:])


@pytest.mark.skipif(not hasattr(_core.StepPath, "compile_begin"), reason="core without compile_warmup")
def test_a_first_torch_compile_inside_the_profile_is_marked_although_dynamo_was_not_imported():
    script = textwrap.dedent(
        """
        import sys
        import torch
        import gpuutil

        assert "torch._dynamo" not in sys.modules
        fc = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(fc.parameters(), lr=0.1)
        with gpuutil.profile(report_interval_ms=0) as prof:
            step = torch.compile(lambda x: fc(x).sum(), backend="eager")  # imports torch._dynamo
            for _ in range(3):
                step(torch.randn(2, 4)).backward()
                opt.step()
        print([r["steps"][0].get("compile_warmup", False) for r in prof.reports])
        print(any(type(f).__name__ == "_AfterImport" for f in sys.meta_path))
        """
    )
    env = dict(os.environ, GPUUTIL_TORCH_HOOK="python")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[True, False, False]", "False"], out.stdout


@pytest.mark.skipif(not hasattr(_core.StepPath, "compile_begin"), reason="core without compile_warmup")
def test_a_recompile_for_a_new_shape_marks_its_step_and_only_it():
    dynamo.reset()
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    call = torch.compile(model, backend="eager")
    with gpuutil.profile(report_interval_ms=0) as prof:
        for batch in (4, 4, 4, 7, 7):  # step 3: a new batch size recompiles
            call(torch.randn(batch, 8)).sum().backward()
            opt.step()
    warm = [r["steps"][0].get("compile_warmup", False) for r in prof.reports]
    assert warm == [True, False, False, True, False]


def _counters_of(fn, profiled: bool):
    """Dynamo's counters and warnings of three steps that call the compiled ``fn(x)``."""
    dynamo.reset()
    counters.clear()
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled_fn = torch.compile(lambda x: fn(model(x)), backend="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gpuutil.profile() if profiled else contextlib.nullcontext():
            for _ in range(3):
                compiled_fn(torch.randn(2, 4)).sum().backward()
                opt.step()
    seen = {k: dict(v) for k, v in counters.items() if k in DYNAMO_COUNTERS and v}
    return seen, sorted({(w.category.__name__, str(w.message)) for w in caught})


def test_a_collective_inside_a_compiled_function_stays_in_its_graph():
    import socket

    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("torch.distributed not available")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:

        def reduced(y):
            dist.all_reduce(y)  # Dynamo traces it into the graph (a functional collective)
            return y

        plain = _counters_of(reduced, profiled=False)
        assert plain[0]["stats"]["unique_graphs"] == 1 and "graph_break" not in plain[0]
        assert _counters_of(reduced, profiled=True) == plain
    finally:
        dist.destroy_process_group()


def test_blocking_copies_called_as_functions_in_compiled_code_stay_in_its_graph(monkeypatch):
    from gpuutil.torch import _fallback

    monkeypatch.setattr(_fallback, "on_accelerator", lambda t: True)  # as if on a GPU: the copies are timed

    def copied(y):
        return torch.Tensor.cpu(y) * 2  # the patched attribute, looked up by Dynamo

    plain = _counters_of(copied, profiled=False)
    assert "graph_break" not in plain[0]
    assert _counters_of(copied, profiled=True) == plain


@pytest.mark.parametrize("hook", ["libtorch", "python"])
def test_a_compiled_step_that_zeroes_the_gradients_is_the_same_program(hook, monkeypatch):
    if hook == "python":
        monkeypatch.setenv("GPUUTIL_TORCH_HOOK", "python")
    else:
        from gpuutil.torch import _ext

        module, reason = _ext.load(build=False)  # scripts/bootstrap.sh builds it
        if module is None:
            pytest.skip(f"LibTorch hook: {reason}")

    def run_steps(profiled: bool):
        dynamo.reset()
        counters.clear()
        model = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()  # gpuutil's zero_grad wrapper, traced
            return model(x).sum()

        compiled_step = torch.compile(step, backend="eager")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with gpuutil.profile() if profiled else contextlib.nullcontext():
                for _ in range(6):  # past the detail tier's first 3 steps
                    compiled_step(torch.randn(2, 4)).backward()
                    opt.step()
        seen = {k: dict(v) for k, v in counters.items() if k in DYNAMO_COUNTERS and v}
        # One break either way, at the same place; its reason reads "call"
        # rather than "inline" a skipped function when gpuutil's wrapper is
        # what Dynamo inlined first.
        seen["graph_break"] = sum(seen.pop("graph_break", {}).values())
        return seen, sorted({(w.category.__name__, str(w.message)) for w in caught})

    assert run_steps(profiled=True) == run_steps(profiled=False)
