#!/usr/bin/env bash
# Builds everything (C++ core, tests, benchmarks, Python extension) into
# build/ and .venv, then runs every test: ctest (C++) and pytest (Python).
# Every test has a time limit (ctest --timeout, pytest-timeout): a hang fails
# that test with its name (and, in pytest, its stack) instead of silently
# using up CI's time; the slowest tests are listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
echo "[test] ctest"
ctest --test-dir build --output-on-failure -j2 --timeout 900
echo "[test] pytest"
.venv/bin/python -m pytest tests/python -q --timeout 900 --durations 15
