#!/usr/bin/env bash
# Builds everything (C++ core, tests, benchmarks, Python extension) into
# build/ and .venv, then runs every test: ctest (C++) and pytest (Python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
echo "[test] ctest"
ctest --test-dir build --output-on-failure -j2
echo "[test] pytest"
.venv/bin/python -m pytest tests/python -q
