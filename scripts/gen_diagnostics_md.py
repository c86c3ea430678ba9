#!/usr/bin/env python3
"""Writes docs/diagnostics.md from the C++ diagnostics registry.

The registry (libgpuutil/include/gpuutil/diagnostics.h, GPUUTIL_DIAGNOSTICS)
is the single source of truth; tests/python/test_docs.py fails when the doc
and the registry disagree. Run: .venv/bin/python scripts/gen_diagnostics_md.py
"""

import pathlib

import gpuutil

HEADER = """# Diagnostics

Every data problem gpuutil meets is a named counter with a severity, carried
in every report's `diagnostics` list (only counters above zero, with the
first example). Nothing is dropped silently. This page is generated from the
registry in `libgpuutil/include/gpuutil/diagnostics.h` by
`scripts/gen_diagnostics_md.py`; a test keeps the two in step.

| name | severity | meaning |
|---|---|---|
"""


def render() -> str:
    rows = [f"| `{d['name']}` | {d['severity']} | {d['description']} |" for d in gpuutil.DIAGNOSTICS]
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    out = pathlib.Path(__file__).resolve().parent.parent / "docs" / "diagnostics.md"
    out.write_text(render())
    print(f"wrote {out} ({len(gpuutil.DIAGNOSTICS)} diagnostics)")
