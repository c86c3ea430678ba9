"""Docs stay true: the diagnostics page matches the C++ registry, and the
README's two commands are the scripts CI runs."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_diagnostics_doc_lists_exactly_the_registry():
    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts" / "gen_diagnostics_md.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (ROOT / "docs" / "diagnostics.md").read_text() == gen.render(), (
        "docs/diagnostics.md is stale: run .venv/bin/python scripts/gen_diagnostics_md.py"
    )


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "scripts/test.sh" in readme and "scripts/demo.sh" in readme
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
