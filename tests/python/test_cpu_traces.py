"""CPU torch.profiler traces and the folders tensorboard_trace_handler
writes (issue 26, item 11): `export perfetto` of a CPU trace draws its host
threads (never an empty trace with exit 0), a timeline with nothing to draw
is refused with one line, and a handler's folder is accepted wherever a
trace is (both CLIs, `gpuutil.analyze()`, `export`), with a folder of
several profiling cycles of one worker refused, naming one to pick."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import gpuutil

torch = pytest.importorskip("torch")


def _profile_cpu_training(out_dir: Path, cycles: int = 1) -> None:
    """A small CPU training loop under torch.profiler with
    tensorboard_trace_handler, as its documentation shows (one trace file
    per worker and profiling cycle)."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # torch warns that each cycle's events are cleared (what the handler
    # wants); an exception raised there by pytest's warnings-as-errors
    # leaves Kineto half-stopped and crashes the process.
    with warnings.catch_warnings(), profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=cycles),
                 on_trace_ready=tensorboard_trace_handler(str(out_dir))) as prof:
        for _ in range(3 * cycles + 1):
            loss = model(torch.randn(32, 64)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            warnings.simplefilter("ignore", UserWarning)
            prof.step()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuutil", *args], capture_output=True, text=True)


def _native() -> str:
    exe = Path(sys.executable).parent / "gpuutil-analyze"
    if not exe.exists():
        pytest.skip(f"{exe} not installed")
    return str(exe)


@pytest.fixture(scope="module")
def handler_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tb")
    _profile_cpu_training(d)
    assert len(list(d.glob("*.pt.trace.json*"))) == 1
    return d


def test_a_tensorboard_handler_folder_is_read_like_its_trace(handler_dir: Path) -> None:
    (trace,) = handler_dir.glob("*.pt.trace.json*")
    by_dir = _cli("analyze", str(handler_dir), "--json")
    assert by_dir.returncode == 0, by_dir.stderr
    by_file = _cli("analyze", str(trace), "--json")
    assert json.loads(by_dir.stdout)["steps"] == json.loads(by_file.stdout)["steps"]
    native = subprocess.run([_native(), str(handler_dir)], capture_output=True, text=True)
    assert native.returncode == 0, native.stderr
    assert json.loads(native.stdout)["steps"] == json.loads(by_file.stdout)["steps"]
    assert gpuutil.analyze(str(handler_dir))["steps"] == json.loads(by_file.stdout)["steps"]


def test_export_perfetto_of_a_cpu_trace_draws_its_host_threads(handler_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = _cli("export", "perfetto", str(handler_dir), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert any(name.endswith(" host") for name in procs.values()), procs
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    names = {e["name"] for e in slices}
    assert any(n.startswith("aten::") for n in names), sorted(names)[:20]
    assert sum(e["cat"] == "step" for e in slices) >= 2


def test_a_timeline_with_nothing_to_draw_is_refused_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    proc = _cli("export", "perfetto", str(empty), "-o", str(tmp_path / "out.json"))
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and "cannot export" in proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_a_folder_of_several_cycles_of_one_worker_is_refused_naming_one(tmp_path: Path) -> None:
    _profile_cpu_training(tmp_path, cycles=2)
    files = sorted(tmp_path.glob("*.pt.trace.json*"))
    assert len(files) == 2
    for cmd in (["analyze", str(tmp_path)], ["export", "perfetto", str(tmp_path)]):
        proc = _cli(*cmd)
        assert proc.returncode == 2, proc.stdout[:200]
        assert len(proc.stderr.splitlines()) == 1
        assert "2 traces of worker" in proc.stderr and files[-1].name in proc.stderr
    native = subprocess.run([_native(), str(tmp_path)], capture_output=True, text=True)
    assert native.returncode == 2 and "2 traces of worker" in native.stderr


def test_a_folder_without_traces_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no traces here")
    proc = _cli("analyze", str(tmp_path))
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and "no trace files" in proc.stderr
