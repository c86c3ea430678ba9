"""The layering stays as it is drawn (docs/architecture.md; issue 28): no
import circle inside python/gpuutil (deferred imports count: they tie the
files together as much), no file of the package over 500 lines, and no
lower layer of the C++ library climbing back up to the runtime beyond the
climbs listed below, which are left for the collector event-sink interface.
The checker itself (tests/python/layering.py) is shown to find each thing
it looks for in planted trees.
"""

from __future__ import annotations

from pathlib import Path

from conftest import REPO
from layering import import_circles, long_files, upward_includes

PACKAGE = REPO / "python" / "gpuutil"
LIBRARY_SRC = REPO / "libgpuutil" / "src"

# What remains of issue 28's C++ part: collectors reach the live Session
# (an event-sink interface that Session implements will replace it), and
# the run-level findings read the run totals. No entry may be added.
KNOWN_UPWARD = {
    "collectors/cupti/cupti_collector.h: gpuutil/session.h",
    "collectors/cupti/record_decoder.h: gpuutil/session.h",
    "collectors/nvml/nvml_sampler.cpp: gpuutil/session.h",
    "collectors/nvtx/nvtx_collector.h: gpuutil/session.h",
    "collectors/torch/hook_drain.h: gpuutil/session.h",
    "analysis/findings.h: gpuutil/run_totals.h",
    "analysis/host_findings.h: gpuutil/run_totals.h",
}


def test_the_python_package_has_no_import_circle() -> None:
    assert import_circles(PACKAGE) == []


def test_no_file_of_the_python_package_is_over_500_lines() -> None:
    assert long_files(PACKAGE, 500) == []


def test_the_library_climbs_back_to_the_runtime_nowhere_new() -> None:
    found = set(upward_includes(LIBRARY_SRC))
    assert found <= KNOWN_UPWARD, sorted(found - KNOWN_UPWARD)


def _tree(root: Path, files: "dict[str, str]") -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_finds_a_planted_circle_deferred_or_not_and_ignores_type_checking(tmp_path: Path) -> None:
    pkg = _tree(tmp_path / "src", {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from pkg.a import x\n",          # deferred: still a circle
        "pkg/c.py": "from pkg import d\n",
        "pkg/d.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from pkg.c import y\n",  # typing only
        "pkg/e.py": "from . import f\n",
        "pkg/f.py": "from .e import z\n",                             # relative imports
        "pkg/sub/__init__.py": "from pkg.sub import g\n",              # a package importing its module
        "pkg/sub/g.py": "from pkg.sub import h\n",
        "pkg/sub/h.py": "",
    }) / "pkg"
    assert import_circles(pkg) == [["pkg.a", "pkg.b"], ["pkg.e", "pkg.f"]]


def test_the_checker_finds_a_planted_climb_and_a_long_file(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", {
        "collectors/x/x.cpp": '#include "gpuutil/events.h"\n#include "gpuutil/session.h"\n',
        "export/y.h": '#include "runtime/anything.h"\n',
        "runtime/z.cpp": '#include "gpuutil/session.h"\n',     # the runtime itself may
        "analysis/w.cpp": '#include "gpuutil/report.h"\n',
    })
    assert upward_includes(src) == ["collectors/x/x.cpp: gpuutil/session.h", "export/y.h: runtime/anything.h"]
    pkg = _tree(tmp_path / "py", {"p/__init__.py": "", "p/big.py": "x = 1\n" * 501}) / "p"
    assert long_files(pkg, 500) == ["p/big.py: 501 lines"]
