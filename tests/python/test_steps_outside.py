"""Automatic steps that mean training steps (docs/pytorch.md, "Steps"):
evaluation and checkpoint writes between optimizer steps are carved out of
the step they would open and counted, named, as time outside steps; the
time after the last optimizer step is counted; two optimizers per iteration
(a GAN) make one step per iteration; a step that compiled with
torch.compile is kept out of the run's figures. The Lightning and Hugging
Face callbacks: tests/python/test_integrations_frameworks.py."""

from __future__ import annotations

import statistics

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402
from gpuutil import _core  # noqa: E402

MS = 1_000_000


def main_thread(step):
    """The step's training thread: the one with the most optimizer time."""
    return max(step["host"], key=lambda h: h["breakdown_ns"]["optimizer"])


def mlp():
    # 256-512-512-10, as in the loop (AdamW state included, a
    # checkpoint is about 5 MB).
    return torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )


def slow_collate(batch):
    """The evaluation loader's batches: 2 ms of input work each, so 30 of
    them are far outside the noise of this machine."""
    import time

    time.sleep(0.002)
    return torch.utils.data.default_collate(batch)


def test_evaluation_and_checkpoints_between_automatic_steps_are_outside_steps_and_named(tmp_path):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(64 * 64, 256), torch.randint(0, 10, (64 * 64,)))
    train = torch.utils.data.DataLoader(data, batch_size=64)
    held_out = torch.utils.data.Subset(data, range(30 * 128))
    evaluation = torch.utils.data.DataLoader(held_out, batch_size=128, collate_fn=slow_collate)  # 30 batches
    eval_ns, eval_forward_ns, save_ns = [], [], []
    with gpuutil.profile() as prof:
        for i, (x, y) in enumerate(train):
            if i == 60:
                break
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if (i + 1) % 20 == 0:  # after steps 20, 40 and 60 (the last)
                t0 = _core.now_ns()
                model.eval()
                forward_ns = 0
                with torch.no_grad():
                    for ex, ey in evaluation:
                        f0 = _core.now_ns()
                        out = model(ex)
                        forward_ns += _core.now_ns() - f0
                        torch.nn.functional.cross_entropy(out, ey)
                model.train()
                eval_forward_ns.append(forward_ns)
                state = {"model": model.state_dict(), "opt": opt.state_dict()}
                t1 = _core.now_ns()
                torch.save(state, tmp_path / f"ckpt{i + 1}.pt")
                t2 = _core.now_ns()
                eval_ns.append(t1 - t0)
                save_ns.append(t2 - t1)
    s = prof.summary()
    planted_eval, planted_save = sum(eval_ns), sum(save_ns)
    assert s["steps"] == 60 and s["steps_source"] == "optimizer_step"
    parts = s["outside_steps_breakdown_ns"]
    # Each part is what was planted (the third evaluation and checkpoint ran
    # after the last optimizer step: counted too). Evaluation runs from the
    # optimizer step to its last forward, the checkpoint is torch.save.
    # (The carve starts where the optimizer step ended, the planted clock a
    # few bytecodes later: on a loaded machine a preemption lands between
    # them, hence 2% over a 1.4 s evaluation rather than a flat 5 ms.)
    assert 0.95 * planted_eval <= parts["evaluation"] <= planted_eval + max(5 * MS, planted_eval // 50), (
        parts, planted_eval)
    assert 0.95 * planted_save <= parts["checkpoint"] <= planted_save + 5 * MS, (parts, planted_save)
    assert planted_eval + planted_save <= s["outside_steps_ns"] <= planted_eval + planted_save + 20 * MS
    assert sum(parts.values()) == s["outside_steps_ns"]
    # The steps after an evaluation hold their own forward only, not the
    # evaluation's 30 (a 128-row batch each, against the step's 64).
    steps = {st["step"]: st for r in prof.reports for st in r["steps"]}
    forwards = [main_thread(steps[k])["breakdown_ns"]["forward"] for k in range(60)]
    typical = statistics.median(forwards)
    for k, before in ((20, 0), (40, 1)):
        assert forwards[k] < typical + eval_forward_ns[before] / 2, (k, forwards[k], typical, eval_forward_ns)
        assert steps[k]["wall_ns"] < eval_ns[before] / 2, (k, steps[k]["wall_ns"], eval_ns)
    finding = next(f for f in s["findings"] if f["id"] == "outside_steps")
    assert "evaluation" in finding["evidence"] and "checkpoint" in finding["evidence"]
    # The span is the steps and the time outside them, up to the profile's stop.
    span = s["steps_wall_ns"] + s["outside_steps_ns"]
    assert finding["recoverable_ns"] == s["outside_steps_ns"] and span > s["outside_steps_ns"]


def test_a_teacher_forward_under_no_grad_stays_in_its_training_step():
    torch.manual_seed(0)
    teacher, student = mlp().eval(), mlp()
    opt = torch.optim.SGD(student.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    with gpuutil.profile() as prof:
        for _ in range(20):
            with torch.no_grad():
                soft = teacher(x).softmax(-1)
            out = student(x)
            loss = torch.nn.functional.cross_entropy(out, y) + torch.nn.functional.mse_loss(out.softmax(-1), soft)
            opt.zero_grad()
            loss.backward()
            opt.step()
    s = prof.summary()
    assert s["steps"] == 20
    assert s["outside_steps_breakdown_ns"]["evaluation"] == 0
    # Nothing was carved out: each step starts where the previous one ended
    # and holds both forwards.
    steps = [r["steps"][0] for r in prof.reports]
    assert all(b["start_ns"] == a["end_ns"] for a, b in zip(steps, steps[1:]))
    for st in steps[1:]:
        assert {c["name"]: c["count"] for c in main_thread(st)["culprits"]["forward"]} == {"nn.Module: Sequential": 2}


def test_two_optimizers_per_iteration_make_one_step_per_iteration_and_say_so():
    torch.manual_seed(0)
    g = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    d = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LeakyReLU(0.2), torch.nn.Linear(64, 1))
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4)
    opt_d = torch.optim.SGD(d.parameters(), lr=2e-4)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    iterations = 40
    with gpuutil.profile() as prof:
        for _ in range(iterations):
            real, z = torch.randn(64, 32), torch.randn(64, 16)
            fake = g(z)
            d_loss = bce(d(real), torch.ones(64, 1)) + bce(d(fake.detach()), torch.zeros(64, 1))
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            g_loss = bce(d(fake), torch.ones(64, 1))
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
    s = prof.summary()
    # The first iteration is two steps (the second optimizer is not known at
    # the first one's step); every later step is one iteration.
    assert s["steps"] == iterations + 1
    assert s["optimizers_per_iteration"] == 2
    reports = prof.reports
    for r in reports[2:]:
        culprits = main_thread(r["steps"][0])["culprits"]["optimizer"]
        names = {c["name"]: c["count"] for c in culprits}
        assert names.get("Optimizer.step#SGD.step") == 1 and names.get("Optimizer.step#Adam.step") == 1, names
    diag = {x["name"]: x for x in reports[-1]["diagnostics"]}["optimizers_per_iteration"]
    assert "2 optimizers step per iteration (SGD, Adam)" in diag["example"]
    assert "Adam.step()" in diag["example"] and "prof.step()" in diag["example"]


def test_a_step_that_compiled_is_flagged_and_kept_out_of_the_run_figures():
    pytest.importorskip("torch._dynamo")
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    steps = 12
    with gpuutil.profile() as prof:
        compiled = torch.compile(model, backend="eager")
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(compiled(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    s = prof.summary()
    reports = prof.reports
    warm = [r["steps"][0] for r in reports if r["steps"][0].get("compile_warmup")]
    assert [st["step"] for st in warm] == [0]
    assert s.get("compile_warmup_steps") == 1
    # The run's figures are the other steps': their count, their wall, their shares.
    assert s["steps"] == steps - 1
    others = [r["steps"][0] for r in reports if not r["steps"][0].get("compile_warmup")]
    assert s["steps_wall_ns"] == sum(st["wall_ns"] for st in others)
    assert s["outside_steps_breakdown_ns"]["compile_warmup"] == warm[0]["wall_ns"]
    host = max(s["host"], key=lambda h: h["breakdown_ns"]["optimizer"])
    assert host["steps"] == steps - 1
    # A compilation is a one-off: no outside_steps finding for it, though it
    # is nearly all of the outside time.
    assert s["outside_steps_breakdown_ns"]["compile_warmup"] >= 0.9 * s["outside_steps_ns"]
    assert not any(f["id"] == "outside_steps" for f in s["findings"])
