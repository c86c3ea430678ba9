"""The shipped type stub `_core.pyi` says what the compiled module really
takes: every public class and function of `gpuutil._core` is stubbed, every
stubbed name exists, and every stubbed function or method has the binding's
own parameter names in the binding's order, and the binding's defaults
where the stub writes a literal (pybind11 writes the real signature into
each ``__doc__``). A stale stub misleads editors and type
checkers silently; this pins it against the build."""

from __future__ import annotations

import ast
import re
from pathlib import Path


def _stub(gpuutil):
    return ast.parse((Path(gpuutil.__file__).parent / "_core.pyi").read_text())


def _split_params(text: str) -> list[str]:
    """Parameter names of one pybind11 signature's argument list."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [p.split(":")[0].split("=")[0].strip() for p in out]


def _real_defaults(text: str) -> dict[str, str]:
    """name -> default as pybind11 prints it (repr), for one signature."""
    out = {}
    for p in re.split(r",\s*(?=[A-Za-z_]\w*:)", text):
        name, _, rest = p.partition(":")
        if " = " in rest:
            out[name.strip()] = rest.split(" = ", 1)[1].strip()
    return out


def _real_signatures(obj, name: str) -> list[str]:
    """Every overload's argument list, from pybind11's docstring."""
    sigs = []
    for line in (getattr(obj, "__doc__", None) or "").splitlines():
        m = re.match(r"^(?:\d+\. )?" + re.escape(name) + r"\((.*)\)(?: -> .*)?$", line.strip())
        if m:
            sigs.append(m.group(1))
    return sigs


def _is_property(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)


def _stub_params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]


def _stub_defaults(fn: ast.FunctionDef) -> dict[str, str]:
    """name -> repr of a literal default (`...` and other expressions skipped)."""
    args = fn.args.posonlyargs + fn.args.args
    pairs = list(zip(args[len(args) - len(fn.args.defaults):], fn.args.defaults))
    pairs += [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None]
    out = {}
    for a, d in pairs:
        if isinstance(d, ast.Constant) and d.value is not Ellipsis:
            out[a.arg] = repr(d.value)
        elif isinstance(d, ast.UnaryOp) and isinstance(d.op, ast.USub) and isinstance(d.operand, ast.Constant):
            out[a.arg] = repr(-d.operand.value)
    return out


def test_every_stubbed_function_has_the_bindings_parameter_names(installed_gpuutil):
    import gpuutil._core as core

    wrong, checked = [], 0
    for node in _stub(installed_gpuutil).body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(core, node.name, None)
            assert cls is not None, f"_core.pyi stubs class {node.name}, which _core lacks"
            members = [(f, getattr(cls, f.name, None), f"{node.name}.{f.name}") for f in node.body
                       if isinstance(f, ast.FunctionDef)]
        elif isinstance(node, ast.FunctionDef):
            members = [(node, getattr(core, node.name, None), node.name)]
        else:
            continue
        for fn, obj, label in members:
            assert obj is not None, f"_core.pyi stubs {label}, which _core lacks"
            if _is_property(fn):
                assert isinstance(obj, property), f"{label} is stubbed as a property but is not one"
                continue
            real = _real_signatures(obj, fn.name)
            if not real:
                continue  # not a pybind11 function (a plain attribute or Python-level helper)
            checked += 1
            names = [_split_params(r) for r in real]
            if _stub_params(fn) not in names:
                wrong.append(f"{label}: stub {_stub_params(fn)}, binding {names}")
                continue
            real_defaults = _real_defaults(real[names.index(_stub_params(fn))])
            for arg, value in _stub_defaults(fn).items():
                if arg in real_defaults and real_defaults[arg] != value:
                    wrong.append(f"{label}: {arg} defaults to {value} in the stub, {real_defaults[arg]} in the binding")
    assert not wrong, "stale stubs in _core.pyi:\n" + "\n".join(wrong)
    assert checked > 40, f"only {checked} signatures compared: the docstring parser no longer reads pybind11's"


def test_every_public_name_of_the_compiled_module_is_stubbed(installed_gpuutil):
    import gpuutil._core as core

    stubbed = {n.name for n in _stub(installed_gpuutil).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    stubbed |= {t.id for n in _stub(installed_gpuutil).body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    missing = sorted(n for n in dir(core) if not n.startswith("_") and n not in stubbed)
    assert not missing, f"public names of gpuutil._core missing from _core.pyi: {missing}"
