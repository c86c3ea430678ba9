"""Training-loop cases a user expects handled (issue 37): gradient clipping
is optimizer time with a culprit, not ``other``; an optimizer step that
GradScaler skips (inf/NaN gradients) still ends the iteration's automatic
step, counted as ``optimizer_step_skipped``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))


def _main_thread(step):
    return max(step["host"], key=lambda h: h["breakdown_ns"]["optimizer"])


def test_gradient_clipping_is_optimizer_time_named_by_the_clip():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    with gpuutil.profile() as prof:
        for _ in range(6):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    reports = prof.reports
    assert len(reports) == 6
    for r in reports[1:]:
        names = {c["name"] for c in _main_thread(r["steps"][0])["culprits"]["optimizer"]}
        assert "torch.nn.utils.clip_grad_norm_" in names, names
    # The patch is gone after the profile: PyTorch's own function again.
    assert torch.nn.utils.clip_grad_norm_.__module__ == "torch.nn.utils.clip_grad"


def test_a_step_gradscaler_skips_still_ends_the_iteration():
    scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_cls is None:
        pytest.skip("torch.amp.GradScaler not in this torch")
    try:
        scaler = scaler_cls("cpu")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CPU GradScaler in this torch: {e}")
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    iterations = 6
    with gpuutil.profile() as prof:
        for i in range(iterations):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            if i == 3:
                loss = loss * float("inf")  # inf gradients: GradScaler skips this optimizer step
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    s = prof.summary()
    assert s["steps"] == iterations
    diags = {d["name"]: d for r in prof.reports for d in r.get("diagnostics", [])}
    assert "optimizer_step_skipped" in diags
    assert "SGD" in diags["optimizer_step_skipped"]["example"]
