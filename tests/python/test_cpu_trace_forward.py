"""A CPU torch.profiler trace of a training loop, recorded without
with_modules (issue 26, item 11): its steps get `forward` and `backward`
by the rules live host ranges follow (docs/accounting.md, "Forward and
backward in traces"): the model's ops are forward, not `other`, and the
autograd engine's time between backward nodes is backward."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List

import pytest

import gpuutil

torch = pytest.importorskip("torch")

STEPS = 4


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small CPU training loop (DataLoader, MLP, cross-entropy, SGD) under
    torch.profiler(activities=[CPU]) with a schedule, exported as Chrome
    trace JSON; no with_modules, no record_function of our own."""
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(32 * (STEPS + 3), 64), torch.randint(0, 10, (32 * (STEPS + 3),)))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    out = tmp_path_factory.mktemp("cpu") / "trace.json"
    # torch warns from inside its step(); an exception there (pytest's
    # warnings-as-errors) leaves Kineto half-stopped and crashes the process.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=STEPS, repeat=1)) as prof:
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                prof.step()
        prof.export_chrome_trace(str(out))
    return out


def _top_level_ops(trace: Path, names: List[str], step: Dict[str, Any]) -> int:
    """Total duration (ns) of the trace's ops with these names inside the step."""
    events = json.loads(trace.read_text())["traceEvents"]
    total = 0.0
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in names:
            start_ns = e["ts"] * 1000
            if step["start_ns"] <= start_ns < step["end_ns"]:
                total += e["dur"] * 1000
    return int(total)


def _main(step: Dict[str, Any]) -> Dict[str, Any]:
    return max(step["host"], key=lambda h: sum(v for k, v in h["breakdown_ns"].items() if k != "other"))


def test_a_cpu_trace_has_forward_and_backward_by_the_live_rules(cpu_trace: Path) -> None:
    report = gpuutil.analyze(str(cpu_trace))
    assert len(report["steps"]) >= STEPS - 1, [s["step"] for s in report["steps"]]
    for step in report["steps"]:
        h = _main(step)
        b = h["breakdown_ns"]
        assert sum(b.values()) == h["wall_ns"]
        if b["dataloader"] == h["wall_ns"]:
            continue  # the loader's last, empty call
        # Forward covers the model's ops and the loss (with the Python time
        # between them): at least their own time; they are no longer "other".
        ops = _top_level_ops(cpu_trace, ["aten::linear", "aten::relu", "aten::cross_entropy_loss"], step)
        assert ops > 0
        assert b["forward"] >= ops, (b, ops)
        forward_names = {c["name"] for c in h["culprits"]["forward"]}
        assert "aten::linear" in forward_names, h["culprits"]
        assert "aten::linear" not in {c["name"] for c in h["culprits"]["other"]}
        # Backward covers every node and the engine's time between them.
        nodes = [e for e in json.loads(cpu_trace.read_text())["traceEvents"]
                 if e.get("ph") == "X" and str(e.get("name", "")).startswith("autograd::engine::evaluate_function")
                 and step["start_ns"] <= e["ts"] * 1000 < step["end_ns"]]
        assert nodes
        assert b["backward"] >= int(sum(e["dur"] for e in nodes) * 1000)
        first = min(e["ts"] for e in nodes) * 1000
        last = max(e["ts"] + e["dur"] for e in nodes) * 1000
        assert b["backward"] <= last - first + 1000  # no more than the span of the nodes (rounding)


def test_analyze_of_a_cpu_trace_no_longer_prints_forward_zero(cpu_trace: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "gpuutil", "analyze", str(cpu_trace)], capture_output=True, text=True,
                         check=True).stdout
    row = next(line for line in out.splitlines() if line.strip().startswith("forward "))
    assert float(row.split()[1]) > 0, out
