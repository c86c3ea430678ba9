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

# Progress: each stage with the seconds since the start, and a line at
# least every 20 s while a long stage runs (compiling, installing torch).
SECONDS=0
# shellcheck source=scripts/progress.sh
. scripts/progress.sh

need_apt=()
dpkg -s nlohmann-json3-dev >/dev/null 2>&1 || need_apt+=(nlohmann-json3-dev)
dpkg -s libsimdjson-dev >/dev/null 2>&1 || need_apt+=(libsimdjson-dev)
dpkg -s libgtest-dev >/dev/null 2>&1 || need_apt+=(libgtest-dev libgmock-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need_apt+=(zlib1g-dev)
dpkg -s libdeflate-dev >/dev/null 2>&1 || need_apt+=(libdeflate-dev)
command -v ninja >/dev/null 2>&1 || need_apt+=(ninja-build)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
# Headless browser for the HTML report test (tests/python/test_export_html.py).
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# prometheus and promtool for the fleet rules' tests (tests/python/test_fleet_*.py).
# Where systemd runs, Debian's package also starts a system Prometheus on :9090;
# the tests run their own on a free port.
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
PY=.venv/bin/python
# GPUUTIL_BOOTSTRAP_MINIMAL=1 (scripts/demo.sh): torch and the build tools
# only (requirements-build.txt); otherwise also the test tools and trackers.
reqs=requirements-dev.txt
[ "${GPUUTIL_BOOTSTRAP_MINIMAL:-0}" = 1 ] && reqs=requirements-build.txt
stamp=.venv/.gpuutil-reqs-$(basename "$reqs" .txt)
full_stamp=.venv/.gpuutil-reqs-requirements-dev
if { [ "$reqs" = requirements-build.txt ] && [ -f "$full_stamp" ] && cat requirements-torch.txt requirements-build.txt requirements-dev.txt | cmp -s - "$full_stamp"; }; then
  :  # the full set is installed: it contains the build tools
elif [ ! -f "$stamp" ] || ! cat requirements-torch.txt requirements-build.txt "$reqs" | cmp -s - "$stamp"; then
  say "installing pinned Python packages ($reqs; $(grep -v '^#' requirements-torch.txt | head -1), the CPU build here)"
  $PY -m pip install -q --upgrade pip >/dev/null
  # torch first, pinned (CPU build here), so nothing later pulls a CUDA torch.
  with_progress "installing torch" $PY -m pip install -q -r requirements-torch.txt
  with_progress "installing $reqs" $PY -m pip install -q -r "$reqs" -c requirements-torch.txt
  cat requirements-torch.txt requirements-build.txt "$reqs" > "$stamp"
  $PY -c 'import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith("2.13.0") else "torch " + v + " is not 2.13.0")'
fi

# The demo (GPUUTIL_BOOTSTRAP_MINIMAL=1) builds only what it runs: the core,
# the Python extension, the native CLI and the NVTX library, not the C++
# tests and benchmarks (most of a first build). A build tree that already
# has them keeps them (switching them off would drop built work).
tests=ON
if [ "${GPUUTIL_BOOTSTRAP_MINIMAL:-0}" = 1 ] && ! grep -qs '^GPUUTIL_BUILD_TESTS:BOOL=ON' build/CMakeCache.txt; then
  tests=OFF
fi
what="C++ core, Python extension"
if [ $tests = ON ]; then what="$what, tests, benchmarks"; fi
say "building gpuutil ($what; build/, incremental: minutes the first time on 2 cores)"
with_progress "building gpuutil" $PY -m pip install -q --no-build-isolation --no-deps \
  -Cbuild-dir=build \
  -Ccmake.define.GPUUTIL_BUILD_TESTS=$tests \
  -Ccmake.define.GPUUTIL_VENDORED_DEPS=OFF \
  -Ccmake.define.GPUUTIL_LIBDEFLATE=ON \
  -Ccmake.define.GPUUTIL_BUILD_BENCHMARKS=$tests \
  -Ccmake.define.GPUUTIL_BUILD_GPU_CHECK=$tests \
  -Ccmake.define.CMAKE_EXPORT_COMPILE_COMMANDS=ON \
  .

# The LibTorch RecordFunction hook, compiled against the installed torch
# (about a minute the first time; cached per torch version, see
# docs/pytorch.md). Without it gpuutil falls back to Python-level hooks.
say "building the LibTorch hook (about a minute the first time; cached per torch version)"
# Bounded: a build that cannot finish in 20 minutes is reported, not waited
# for (gpuutil.torch.build itself clears a stale lock left by a killed build).
# (Only the build's own output is silenced, not the progress lines.)
build_hook() { timeout 1200 $PY -m gpuutil.torch.build >/dev/null; }
with_progress "building the LibTorch hook" build_hook ||
  echo "[bootstrap] warning: the LibTorch hook did not build; gpuutil will use Python-level hooks"
