#!/usr/bin/env bash
# Idempotent set-up: system packages (Debian), the .venv virtual environment,
# pinned Python tools, then builds and installs gpuutil into .venv.
# Incremental: the CMake build tree lives in build/ and is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
# One bootstrap at a time per checkout (build/ and .venv are shared).
if [ -z "${GPUUTIL_BOOTSTRAP_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
  export GPUUTIL_BOOTSTRAP_LOCKED=1
  exec flock .bootstrap.lock "$0" "$@"
fi

need_apt=()
dpkg -s nlohmann-json3-dev >/dev/null 2>&1 || need_apt+=(nlohmann-json3-dev)
dpkg -s libsimdjson-dev >/dev/null 2>&1 || need_apt+=(libsimdjson-dev)
dpkg -s libgtest-dev >/dev/null 2>&1 || need_apt+=(libgtest-dev libgmock-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need_apt+=(zlib1g-dev)
command -v ninja >/dev/null 2>&1 || need_apt+=(ninja-build)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[bootstrap] installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv"
  python3 -m venv .venv
fi
PY=.venv/bin/python
stamp=.venv/.gpuutil-dev-reqs
if [ ! -f "$stamp" ] || ! cmp -s requirements-dev.txt "$stamp"; then
  echo "[bootstrap] installing pinned dev tools"
  $PY -m pip install -q --upgrade pip >/dev/null
  $PY -m pip install -q -r requirements-dev.txt
  cp requirements-dev.txt "$stamp"
fi

echo "[bootstrap] building gpuutil (build/, incremental)"
$PY -m pip install -q --no-build-isolation --no-deps \
  -Cbuild-dir=build \
  -Ccmake.define.GPUUTIL_BUILD_TESTS=ON \
  -Ccmake.define.GPUUTIL_BUILD_BENCHMARKS=ON \
  -Ccmake.define.CMAKE_EXPORT_COMPILE_COMMANDS=ON \
  .
