"""`pip install .` builds a self-contained wheel (issue 14): simdjson and
nlohmann/json compiled in from third_party/, no system libdeflate, so the
extension links nothing but libz, the C++ runtime and libc, whatever -dev
packages the build machine has; the native gpuutil-analyze command ships in
the wheel's scripts with the same links. Builds the wheel (about 1.5 minutes on 2
cores) with the build tools already in this environment."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("linux-vdso", "libz.so", "libstdc++.so", "libm.so", "libgcc_s.so", "libc.so", "ld-linux", "libpthread",
           "libdl.so", "librt.so")


def test_pip_wheel_links_no_system_cxx_package(tmp_path: Path) -> None:
    pytest.importorskip("scikit_build_core")
    if shutil.which("ldd") is None:
        pytest.skip("no ldd on this machine")
    src = tmp_path / "src"
    # The project as a user's clone has it (no build/ or .venv).
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "build-*", ".venv", "Testing",
                                                               "__pycache__", "*.egg-info"))
    out = tmp_path / "wheel"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = next(out.glob("gpuutil-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        everything = z.namelist()
        names = [n for n in everything if n.endswith(".so")]
        z.extractall(tmp_path / "unpacked")
    core = [n for n in names if "/_core" in n]
    assert core, names
    native = [n for n in everything if n.endswith(".data/scripts/gpuutil-analyze")]
    assert native, everything
    for binary in (core[0], native[0]):
        ldd = subprocess.run(["ldd", str(tmp_path / "unpacked" / binary)], capture_output=True, text=True, check=True)
        libs = [line.split()[0] for line in ldd.stdout.splitlines() if line.strip()]
        unexpected = [lib for lib in libs if not Path(lib).name.startswith(ALLOWED)]
        assert not unexpected, f"the wheel's {binary} links {unexpected}"
        assert not any("simdjson" in lib or "deflate" in lib for lib in libs)
