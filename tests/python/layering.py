"""The house's layering, as a checker the tests run (tests/python/test_layering.py).

Python: the import graph of a package (module-level and deferred imports
inside functions; ``if TYPE_CHECKING:`` blocks are not imports) and its
strongly connected components: every component of more than one module is
an import circle. C++: the ``#include`` lines of the library's lower layers
(collectors, importers, export, analysis, core) and of the public headers
they may include that name a runtime header (the live session, the step
path, the profiler: what ``libgpuutil/src/runtime/`` implements), i.e. a
climb back up. Collectors write to ``gpuutil/event_sink.h`` instead; the
build makes the same direction an error (CMakeLists.txt: the layer targets,
GPUUTIL_LOWER_LAYER, gpuutil_layer_check).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

# The public headers src/runtime/ implements, and the folder itself.
# (gpuutil/run_totals.h is analysis: a pure fold, src/analysis/run_totals.cpp.)
RUNTIME_HEADERS = ("gpuutil/session.h", "gpuutil/step_path.h", "gpuutil/profiler.h")
LOWER_LAYERS = ("collectors", "import", "export", "analysis", "core")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(tree: ast.Module, me: str, is_package: bool, modules: Set[str], typing_too: bool = False) -> Set[str]:
    out: Set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not typing_too and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for orelse in child.orelse:
                    visit(orelse)
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = me.split(".") if is_package else me.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                subs = [f"{target}.{a.name}" for a in child.names if f"{target}.{a.name}" in modules]
                out.update(subs)
                if len(subs) < len(child.names):  # a name of the module itself, not a submodule
                    out.add(target)
            visit(child)

    visit(tree)
    return {m for m in out if m in modules and m != me}


def import_graph(package_dir: Path, typing_too: bool = False) -> Dict[str, Set[str]]:
    """module -> the modules of the same package it imports (``typing_too``:
    also those imported only ``if TYPE_CHECKING:``)."""
    root = package_dir.parent
    files = {_module_name(root, p): p for p in sorted(package_dir.rglob("*.py"))}
    modules = set(files)
    return {m: _imports(ast.parse(p.read_text()), m, p.name == "__init__.py", modules, typing_too)
            for m, p in files.items()}


def forbidden_imports(package_dir: Path, importers: Set[str], forbidden: Set[str]) -> List[str]:
    """``importer -> module`` for every import, typing-only ones included, of
    a ``forbidden`` module by one of ``importers`` (e.g. a collector naming
    the profile: collectors get a narrow handle, gpuutil._collectors)."""
    graph = import_graph(package_dir, typing_too=True)
    return [f"{m} -> {t}" for m in sorted(importers & set(graph)) for t in sorted(graph[m] & forbidden)]


def import_circles(package_dir: Path) -> List[List[str]]:
    """Every import circle: the strongly connected components of more than
    one module (Tarjan, iterative), each sorted, in sorted order."""
    graph = import_graph(package_dir)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    circles: List[List[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: List[Tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def upward_includes(src_dir: Path, include_dir: "Path | None" = None) -> List[str]:
    """``file: header`` for every include of a runtime header from a lower
    layer of ``src_dir`` (libgpuutil/src) and, given ``include_dir``
    (libgpuutil/include), from a public header that is not the runtime's
    (a lower layer including it would climb through it)."""
    def climbs(path: Path, root: Path) -> List[str]:
        return [f"{path.relative_to(root).as_posix()}: {header}"
                for header in _INCLUDE.findall(path.read_text(errors="replace"))
                if header in RUNTIME_HEADERS or header.startswith("runtime/")]

    out = []
    for layer in LOWER_LAYERS:
        for path in sorted((src_dir / layer).rglob("*")):
            if path.suffix in (".h", ".cpp"):
                out += climbs(path, src_dir)
    if include_dir is not None:
        for path in sorted(include_dir.rglob("*.h")):
            if path.relative_to(include_dir).as_posix() not in RUNTIME_HEADERS:
                out += [f"include/{c}" for c in climbs(path, include_dir)]
    return out


def long_files(package_dir: Path, max_lines: int) -> List[str]:
    return [f"{p.relative_to(package_dir.parent).as_posix()}: {n} lines"
            for p in sorted(package_dir.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > max_lines]
