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


def test_readme_resnet_output_is_what_gpuutil_analyze_prints_today():
    """The README's worked example is a real run of the CLI, not prose."""
    import subprocess
    import sys

    import pytest

    trace = ROOT.parent / "shared" / "traces" / "kineto_resnet50_nw4_v100.json.gz"
    if not trace.exists():
        pytest.skip(f"the shared real traces are not at {trace.parent} (a clone without ../shared)")
    readme = (ROOT / "README.md").read_text()
    first = "Trace ../shared/traces/kineto_resnet50_nw4_v100.json.gz"
    last = "info: flops_unknown (1): no FLOP count for the steps: MFU is null"
    block = readme[readme.index(first):readme.index(last) + len(last)]
    out = subprocess.run(
        [sys.executable, "-m", "gpuutil", "analyze", "../shared/traces/kineto_resnet50_nw4_v100.json.gz"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout
    assert out.strip() == block.strip(), "README's ResNet-50 output is stale: rerun the command and paste it"


def test_readme_ranks_section_is_what_gpuutil_analyze_prints_today():
    """The README's offline cross-rank example is a real run of the CLI."""
    import subprocess
    import sys

    import pytest

    traces = ROOT.parent / "shared" / "traces"
    if not (traces / "hta_sampled_rank0.json.gz").exists():
        pytest.skip(f"the shared real traces are not at {traces} (a clone without ../shared)")
    readme = (ROOT / "README.md").read_text()
    first = "Ranks: world size 2"
    last = "     1  hta_sampled_rank1.json.gz"
    start = readme.index(first)
    block = readme[start:readme.index("\n", readme.index(last, start))]
    out = subprocess.run(
        [sys.executable, "-m", "gpuutil", "analyze", "../shared/traces/hta_sampled_rank0.json.gz",
         "../shared/traces/hta_sampled_rank1.json.gz"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    ).stdout
    assert block in out, "README's ranks section is stale: rerun the command and paste it"
