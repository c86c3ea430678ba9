"""The layering stays as it is drawn (docs/architecture.md; issue 28): no
import circle inside python/gpuutil (deferred imports count: they tie the
files together as much), no file of the package over 500 lines, no
collector module naming the profile (collectors get a CollectorHandle), and
no lower layer of the C++ library (nor a public header it may include)
climbing back up to the runtime: collectors write to gpuutil/event_sink.h.
The build makes the C++ direction an error as well (each runtime header
refuses GPUUTIL_LOWER_LAYER, which the lower libraries compile with). The
checker itself (tests/python/layering.py) is shown to find each thing it
looks for in planted trees.
"""

from __future__ import annotations

from pathlib import Path

from conftest import REPO
from layering import RUNTIME_HEADERS, forbidden_imports, import_circles, long_files, upward_includes

PACKAGE = REPO / "python" / "gpuutil"
LIBRARY_SRC = REPO / "libgpuutil" / "src"
LIBRARY_INCLUDE = REPO / "libgpuutil" / "include"

# The collectors' Python sides and the registry they are listed in, and the
# profile they are kept apart from (they are given a CollectorHandle).
COLLECTOR_MODULES = {
    "gpuutil._collectors", "gpuutil._builtin_collectors", "gpuutil._live", "gpuutil.nvml",
    "gpuutil.torch._collector", "gpuutil.torch._fallback", "gpuutil.torch._flops_measure",
    "gpuutil.torch._cluster",
}
PROFILE_MODULES = {"gpuutil._profile", "gpuutil._steps", "gpuutil._delivery"}


def test_the_python_package_has_no_import_circle() -> None:
    assert import_circles(PACKAGE) == []


def test_no_file_of_the_python_package_is_over_500_lines() -> None:
    assert long_files(PACKAGE, 500) == []


def test_the_library_never_climbs_back_to_the_runtime() -> None:
    assert upward_includes(LIBRARY_SRC, LIBRARY_INCLUDE) == []


def test_every_runtime_header_refuses_a_lower_layer_at_build_time() -> None:
    for header in RUNTIME_HEADERS:
        text = (LIBRARY_INCLUDE / header).read_text()
        assert "#ifdef GPUUTIL_LOWER_LAYER\n#error" in text, header
    cmake = (REPO / "CMakeLists.txt").read_text()
    for target in ("gpuutil_offline", "gpuutil_collectors"):
        assert f"target_compile_definitions({target} PRIVATE GPUUTIL_LOWER_LAYER)" in cmake, target


def test_collectors_never_name_the_profile() -> None:
    assert forbidden_imports(PACKAGE, COLLECTOR_MODULES, PROFILE_MODULES) == []


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


def test_the_checker_finds_a_collector_naming_the_profile_even_for_typing(tmp_path: Path) -> None:
    pkg = _tree(tmp_path / "src", {
        "pkg/__init__.py": "",
        "pkg/prof.py": "",
        "pkg/handle.py": "",
        "pkg/c1.py": "from pkg import handle\n",                                    # the narrow handle: fine
        "pkg/c2.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from pkg.prof import P\n",
        "pkg/c3.py": "def f():\n    from pkg import prof\n",
    }) / "pkg"
    assert forbidden_imports(pkg, {"pkg.c1", "pkg.c2", "pkg.c3"}, {"pkg.prof"}) == [
        "pkg.c2 -> pkg.prof", "pkg.c3 -> pkg.prof"]


def test_the_checker_finds_a_planted_climb_and_a_long_file(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", {
        "collectors/x/x.cpp": '#include "gpuutil/events.h"\n#include "gpuutil/session.h"\n',
        "export/y.h": '#include "runtime/anything.h"\n',
        "runtime/z.cpp": '#include "gpuutil/session.h"\n',     # the runtime itself may
        "analysis/w.cpp": '#include "gpuutil/report.h"\n',
    })
    assert upward_includes(src) == ["collectors/x/x.cpp: gpuutil/session.h", "export/y.h: runtime/anything.h"]
    include = _tree(tmp_path / "include", {
        "gpuutil/event_sink.h": '#include "gpuutil/events.h"\n',
        "gpuutil/sneaky.h": '#include "gpuutil/step_path.h"\n',  # a lower layer including it climbs
        "gpuutil/session.h": '#include "gpuutil/event_sink.h"\n',  # the runtime's own
    })
    assert upward_includes(tmp_path / "empty", include) == ["include/gpuutil/sneaky.h: gpuutil/step_path.h"]
    pkg = _tree(tmp_path / "py", {"p/__init__.py": "", "p/big.py": "x = 1\n" * 501}) / "p"
    assert long_files(pkg, 500) == ["p/big.py: 501 lines"]
