#!/usr/bin/env bash
# Idempotent: creates .venv-hta (repo root) with HolisticTraceAnalysis 0.5.0 and
# the exact pins in benchmarks/requirements-hta.txt, for benchmarks/hta_compare.py.
# Kept apart from .venv so HTA's pandas/numpy stack never meets gpuutil's.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-hta
REQ=benchmarks/requirements-hta.txt
PY="$VENV/bin/python"
stamp="$VENV/.hta-reqs"

if [ ! -x "$PY" ]; then
  echo "[setup_hta_venv] creating $VENV"
  python3 -m venv "$VENV"
fi

if [ ! -f "$stamp" ] || ! cmp -s "$REQ" "$stamp"; then
  echo "[setup_hta_venv] installing pinned packages from $REQ (--no-deps)"
  "$PY" -m pip install -q --disable-pip-version-check --no-deps -r "$REQ"
  cp "$REQ" "$stamp"
else
  echo "[setup_hta_venv] $VENV is up to date with $REQ"
fi

# HTA must run without torch; refuse a venv that has it.
if "$PY" -c "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 1)"; then
  echo "[setup_hta_venv] ERROR: torch is installed in $VENV; it must not be" >&2
  exit 1
fi

"$PY" -c "from hta.trace_analysis import TraceAnalysis; import importlib.metadata as m; print('[setup_hta_venv] ok: HolisticTraceAnalysis', m.version('HolisticTraceAnalysis'))"
