"""Shared fixtures for the Python tests of the installed gpuutil package.

The tests run against gpuutil as installed into .venv (scripts/bootstrap.sh),
never against the source tree, and use the real GPU traces in
../shared/traces (override with GPUUTIL_TRACES_DIR).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[2]


def traces_dir() -> Path:
    env = os.environ.get("GPUUTIL_TRACES_DIR")
    return Path(env) if env else REPO.parent / "shared" / "traces"


def rank_trace_generator():
    """benchmarks/make_rank_traces.py as a module (the planted-straggler rank
    traces of the fan-out tests and benchmark), loaded once."""
    import importlib.util
    import sys

    if "make_rank_traces" in sys.modules:
        return sys.modules["make_rank_traces"]
    spec = importlib.util.spec_from_file_location("make_rank_traces", REPO / "benchmarks" / "make_rank_traces.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_rank_traces"] = mod
    spec.loader.exec_module(mod)
    return mod


def all_traces() -> List[Path]:
    d = traces_dir()
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.name.endswith((".json", ".json.gz")))


@pytest.fixture(scope="session")
def traces() -> Path:
    d = traces_dir()
    if not d.is_dir():
        pytest.skip(f"trace directory {d} not found (set GPUUTIL_TRACES_DIR)")
    return d


@pytest.fixture(scope="session")
def trace(traces: Path):
    """trace(name) -> path of a named trace, skipping when it is absent."""

    def get(name: str) -> Path:
        p = traces / name
        if not p.is_file():
            pytest.skip(f"trace {name} not found in {traces}")
        return p

    return get


@pytest.fixture(scope="session")
def gpuutil_exe() -> str:
    """The installed console script (next to the interpreter running the tests)."""
    exe = Path(sys.executable).parent / "gpuutil"
    if not exe.exists():
        pytest.skip(f"console script {exe} not installed")
    return str(exe)


@pytest.fixture(scope="session")
def run_cli(gpuutil_exe: str):
    """run_cli(*args) -> CompletedProcess of the installed `gpuutil` script."""

    def run(*args: object, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [gpuutil_exe, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    return run


@pytest.fixture(scope="session")
def installed_gpuutil():
    """The imported package, asserted to be the installed one (with its _core)."""
    import gpuutil

    assert (Path(gpuutil.__file__).parent / "_core.pyi").exists()
    assert not str(Path(gpuutil.__file__).resolve()).startswith(str(REPO / "python")), (
        "tests must run against the installed package, not the source tree"
    )
    return gpuutil


@pytest.fixture
def all_reduce_steps():
    """Runs three optimizer steps of a small model with a real (gloo, one
    rank) all_reduce of every gradient in each, under
    ``gpuutil.profile(report_interval_ms=0, **profile_kwargs)``; returns the
    first three reports. The process group is torn down afterwards."""
    torch = pytest.importorskip("torch")
    import socket

    import torch.distributed as dist

    import gpuutil

    def run(**profile_kwargs):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        try:
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            with gpuutil.profile(report_interval_ms=0, **profile_kwargs) as prof:
                for _ in range(3):
                    loss = model(torch.randn(4, 16)).sum()
                    opt.zero_grad()
                    loss.backward()
                    for p in model.parameters():
                        dist.all_reduce(p.grad)
                    opt.step()
            return list(prof.reports)[:3]
        finally:
            dist.destroy_process_group()

    return run
