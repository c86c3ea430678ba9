"""Builds and loads the LibTorch RecordFunction hook (csrc/record_function_hook.cpp).

The extension is compiled against the torch that is installed, with
``torch.utils.cpp_extension.load`` (ninja; no build isolation, so it can
never pull another torch), into a cache folder keyed by the torch and
Python versions: ``$GPUUTIL_TORCH_EXT_DIR`` or
``~/.cache/gpuutil/torch_ext/torch-<version>-cp<xy>``.

Building takes about a minute, so ``gpuutil.profile()`` never builds: it
loads a build that exists (``python -m gpuutil.torch.build`` or
``scripts/bootstrap.sh`` makes it), checks the torch version it was
compiled against, and otherwise falls back to Python-level hooks and says
why. Loading an existing build imports the shared object directly (no
ninja run, no subprocess: a fork of a large training process is not free);
a stamp next to it holds the hash of the sources it was built from, so a
build from older sources is reported as out of date instead of loaded.

Builds never wait forever. torch's ``cpp_extension`` guards a build folder
with a ``lock`` *file* that a builder killed mid-build (a timeout, a
Ctrl-C, a preempted CI job) leaves behind, and every later build of that
folder then waits for it without end. gpuutil takes its own lock first, an
``flock`` on ``.gpuutil-build.lock`` that the kernel releases when its
holder dies: while gpuutil holds it no other gpuutil build can be running,
so a torch ``lock`` file found then is stale and is removed. Waiting for a
live builder gives up after ``GPUUTIL_TORCH_BUILD_WAIT_S`` (default 900)
with a reason, and a build that is already current is imported without
running ninja at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Tuple

import torch

NAME = "gpuutil_torch_hook"
SOURCE = Path(__file__).resolve().parent / "csrc" / "record_function_hook.cpp"
HEADERS = (SOURCE.parent / "hook_abi.h", SOURCE.parent / "hook_ring.h")
STAMP = "sources.sha256"
BUILD_LOCK = ".gpuutil-build.lock"  # gpuutil's own lock (flock: released when its holder dies)
TORCH_LOCK = "lock"  # torch.utils.cpp_extension's FileBaton (a plain file: stale once its builder died)


def _torch_release() -> str:
    return torch.__version__.split("+")[0]


def build_dir() -> Path:
    env = os.environ.get("GPUUTIL_TORCH_EXT_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "gpuutil" / "torch_ext"
    tag = f"torch-{torch.__version__.replace('+', '_')}-cp{sys.version_info.major}{sys.version_info.minor}"
    return base / tag


def _built(path: Path) -> bool:
    return (path / f"{NAME}.so").is_file()


def sources_hash() -> str:
    """SHA-256 over the hook's sources (what a build must match)."""
    h = hashlib.sha256()
    for f in (SOURCE, *HEADERS):
        h.update(f.read_bytes())
    return h.hexdigest()


def _current(path: Path) -> bool:
    """A build exists and was made from the sources of this gpuutil."""
    stamp = path / STAMP
    return _built(path) and stamp.is_file() and stamp.read_text().strip() == sources_hash()


def _build_wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get("GPUUTIL_TORCH_BUILD_WAIT_S", "900")))
    except ValueError:
        return 900.0


@contextlib.contextmanager
def _build_lock(path: Path, wait_s: float):
    """Holds gpuutil's build lock on ``path``; raises TimeoutError after ``wait_s``.

    Inside it no other gpuutil build of ``path`` runs, so torch's lock file,
    if present, was left by a builder that died and is removed.
    """
    fd = os.open(path / BUILD_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"another build of {path} held its lock for {wait_s:.0f} s "
                        "(GPUUTIL_TORCH_BUILD_WAIT_S)") from None
                time.sleep(0.2)
        with contextlib.suppress(FileNotFoundError):
            (path / TORCH_LOCK).unlink()  # stale: its builder is gone
        yield
    finally:
        os.close(fd)  # releases the flock


def _import_built(path: Path) -> Any:
    """Imports an existing build directly (no ninja, no subprocess)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    spec = importlib.util.spec_from_file_location(NAME, path / f"{NAME}.so")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path / NAME}.so")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[NAME] = module
    return module


def load(build: bool = False, verbose: bool = False) -> Tuple[Optional[Any], Optional[str]]:
    """Returns (module, None), or (None, reason) when the hook cannot be used.

    ``build=False`` (what ``gpuutil.profile()`` does) only imports a build
    made from the current sources; ``build=True`` (re)builds when needed.
    """
    if os.environ.get("GPUUTIL_TORCH_HOOK", "").lower() in ("0", "off", "python"):
        return None, "disabled by GPUUTIL_TORCH_HOOK"
    path = build_dir()
    try:
        if not build:
            if not _built(path):
                return None, f"not built for torch {torch.__version__} (run `python -m gpuutil.torch.build`)"
            if not _current(path):
                return None, "built from other gpuutil sources, out of date (run `python -m gpuutil.torch.build`)"
            module = _import_built(path)
        else:
            path.mkdir(parents=True, exist_ok=True)
            with _build_lock(path, _build_wait_s()):
                if _current(path):
                    module = _import_built(path)  # current: no ninja run
                else:
                    from torch.utils import cpp_extension

                    module = cpp_extension.load(
                        name=NAME,
                        sources=[str(SOURCE)],
                        build_directory=str(path),
                        extra_cflags=["-O2", "-std=c++17"],
                        extra_include_paths=[str(SOURCE.parent)],
                        verbose=verbose,
                    )
                    (path / STAMP).write_text(sources_hash() + "\n")
    except Exception as e:  # noqa: BLE001 - the reason is reported
        return None, f"could not build/load: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    compiled = module.torch_version()
    if compiled != _torch_release():
        return None, f"built against torch {compiled}, but torch {torch.__version__} is loaded"
    return module, None
