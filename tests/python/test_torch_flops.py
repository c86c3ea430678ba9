"""flops_per_step="measure": one step counted by FlopCounterMode, once, then
used for every report (flops_source "measured"), with the inflated step
named by a diagnostic; and the analytic helpers' conventions."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402
from gpuutil.flops import measure_flops  # noqa: E402


def make():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def one_step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def diagnostics(report):
    return {d["name"]: d for d in report["diagnostics"]}


def test_measured_flops_equal_an_independent_count_and_feed_every_report():
    model, opt = make()
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    expected = measure_flops(lambda: one_step(model, opt, x, y))
    assert expected > 0
    with gpuutil.profile(flops_per_step="measure", report_interval_ms=0) as prof:
        for _ in range(5):
            one_step(model, opt, x, y)
        collector = next(c for c in prof._collectors if c.name == "torch")
        assert collector._flops.flops == expected
    reports = list(prof.reports)
    assert all(r["flops_source"] == "measured" for r in reports[2:])
    marked = [r for r in reports if "flops_measured_step" in diagnostics(r)]
    assert len(marked) == 1
    assert diagnostics(marked[0])["flops_measured_step"]["example"].startswith("step 1:")
    # The mode was left: later ops are not counted any more.
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    assert not _get_current_dispatch_mode_stack()


def test_stopping_during_the_measured_step_leaves_the_mode():
    model, opt = make()
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    with gpuutil.profile(flops_per_step="measure"):
        one_step(model, opt, x, y)  # boundary 1: the mode is entered
        model(x)  # stop comes before the next boundary
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    assert not _get_current_dispatch_mode_stack()


@pytest.mark.parametrize("bad", ["measured", True, -1.0, float("nan")])
def test_bad_flops_per_step_is_refused(bad):
    with pytest.raises(ValueError, match="flops_per_step"):
        gpuutil.profile(flops_per_step=bad)


def test_measure_without_torch_says_why_in_every_report():
    code = (
        "import gpuutil\n"
        "with gpuutil.profile(flops_per_step='measure') as p:\n"
        "    with p.step(): pass\n"
        "d = {x['name']: x for x in p.reports[0]['diagnostics']}\n"
        "print(d['flops_unknown']['example'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "needs the PyTorch collector" in out.stdout
