"""Helpers for the fleet tests that run Debian's ``promtool`` (the
``prometheus`` package; scripts/bootstrap.sh installs it): find it or skip
with a one-line reason, and run ``promtool test rules`` on a test written
from Python (as JSON, which is YAML) against deploy/prometheus/gpuutil-rules.yml.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import pytest

from conftest import REPO

RULES = REPO / "deploy" / "prometheus" / "gpuutil-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "tests"


def tool(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``, or a skip saying how to get it."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not on PATH: scripts/bootstrap.sh installs Debian's prometheus package")
    return path


def run_promtool(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True, timeout=timeout)


def series(name: str, labels: Mapping[str, str]) -> str:
    """A promtool input series name: ``name{k="v",...}``."""
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}}"


def rule_test(tmp_path: Path, tests: List[Dict[str, Any]], name: str = "generated.test.yml") -> Tuple[int, str]:
    """Writes a promtool rule test (evaluation every minute, the project's
    rules) and runs it; (exit code, output)."""
    doc = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": tests}
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))
    proc = run_promtool("test", "rules", str(path))
    return proc.returncode, proc.stdout + proc.stderr
