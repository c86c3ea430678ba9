"""Building the LibTorch hook never waits forever (python/gpuutil/torch/_ext.py).

torch's cpp_extension guards a build folder with a plain ``lock`` file; a
builder killed mid-build leaves it behind, and every later build of that
folder used to wait for it without end. That hung ``scripts/bootstrap.sh``
(and with it CI) for 85 minutes. These tests plant the stale file, and a
live holder of gpuutil's own lock, and require an answer in bounded time.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from gpuutil.torch import _ext  # noqa: E402


def _built_copy(tmp_path, monkeypatch):
    """A copy of the installed hook build in a private GPUUTIL_TORCH_EXT_DIR."""
    module, reason = _ext.load(build=True)  # scripts/bootstrap.sh built it; builds here otherwise
    if module is None:
        pytest.skip(f"the LibTorch hook does not build here: {reason}")
    src = _ext.build_dir()
    monkeypatch.setenv("GPUUTIL_TORCH_EXT_DIR", str(tmp_path / "ext"))
    dst = _ext.build_dir()
    shutil.copytree(src, dst, copy_function=shutil.copy2)
    for stale in (_ext.TORCH_LOCK, _ext.BUILD_LOCK):
        (dst / stale).unlink(missing_ok=True)
    return dst


def _build(timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuutil.torch.build"], capture_output=True, text=True,
                          timeout=timeout_s, env=os.environ.copy())


def test_a_stale_torch_lock_file_from_a_killed_build_does_not_hang_the_next_build(tmp_path, monkeypatch):
    d = _built_copy(tmp_path, monkeypatch)
    (d / _ext.TORCH_LOCK).touch()  # what a builder killed inside cpp_extension.load leaves
    out = _build(timeout_s=120)  # the old code waited here for ever
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(d)
    assert not (d / _ext.TORCH_LOCK).exists()


def test_a_stale_torch_lock_file_does_not_hang_a_rebuild_of_out_of_date_sources(tmp_path, monkeypatch):
    d = _built_copy(tmp_path, monkeypatch)
    (d / _ext.STAMP).write_text("0" * 64 + "\n")  # as if built from older sources: cpp_extension runs
    (d / _ext.TORCH_LOCK).touch()
    out = _build(timeout_s=600)  # a real rebuild is about a minute; the old code never returned
    assert out.returncode == 0, out.stderr
    assert (d / _ext.STAMP).read_text().strip() == _ext.sources_hash()
    assert not (d / _ext.TORCH_LOCK).exists()


def test_a_build_that_another_live_builder_holds_gives_up_with_a_reason(tmp_path, monkeypatch):
    d = _built_copy(tmp_path, monkeypatch)
    monkeypatch.setenv("GPUUTIL_TORCH_BUILD_WAIT_S", "0.5")
    fd = os.open(d / _ext.BUILD_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a live builder in another process would hold it like this
        out = _build(timeout_s=120)
    finally:
        os.close(fd)
    assert out.returncode == 1
    assert "held its lock for" in out.stderr, out.stderr
    assert "GPUUTIL_TORCH_BUILD_WAIT_S" in out.stderr
    out = _build(timeout_s=120)  # once the holder is gone (its lock released), the build goes on
    assert out.returncode == 0, out.stderr
