#!/usr/bin/env bash
# Builds and installs gpuutil on a machine that can fetch nothing (the lent
# GPU machine): Release, Ninja, all cores, no tests or benchmarks, the
# Python module for the Python that runs this script, with the system's
# nlohmann/json and simdjson when it has them and third_party/ otherwise,
# and the CUPTI/NVTX headers from the CUDA toolkit or the nvidia-* wheels
# (docs/building.md). It never touches that Python's environment: the
# package goes into an ignored folder (default build-device/site, the CMake
# build tree into build-device/) and the last line printed is the export
# that makes `python3 -c "import gpuutil"` work.
#
#   scripts/device_build.sh [--prefix DIR] [--with-fake-cupti] [-DNAME=VALUE ...]
#
#   --prefix DIR       where the importable package goes (PYTHONPATH entry)
#   --with-fake-cupti  also build build-device/tests/cpp/libfake_cupti.so
#                      (GPUUTIL_BUILD_FAKE_CUPTI; no GoogleTest needed)
#   -DNAME=VALUE       passed to CMake (e.g. -DGPUUTIL_VENDORED_DEPS=ON)
#   PYTHON=...         the Python to build for (default: python3)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

py=${PYTHON:-python3}
prefix=$repo/build-device/site
build_dir=$repo/build-device
fake_cupti=OFF
defines=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || { echo "device_build: --prefix needs a folder" >&2; exit 2; }
              prefix=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
    --prefix=*) prefix=$(mkdir -p "${1#--prefix=}" && cd "${1#--prefix=}" && pwd); shift ;;
    --with-fake-cupti) fake_cupti=ON; shift ;;
    -D*=*) defines+=("-Ccmake.define.${1#-D}"); shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "device_build: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
cd "$repo"

jobs=$(nproc)
echo "[device_build] $("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])'), $jobs jobs, build tree $build_dir"
start=$(date +%s)
# --no-index --no-deps --no-build-isolation: nothing is fetched, nothing else
# is installed (never a torch); scikit-build-core and pybind11 must be there.
CMAKE_GENERATOR=Ninja CMAKE_BUILD_PARALLEL_LEVEL=$jobs \
  "$py" -m pip install --no-index --no-deps --no-build-isolation --upgrade --quiet \
  --target "$prefix" \
  -Cbuild-dir="$build_dir" \
  -Ccmake.build-type=Release \
  -Ccmake.define.GPUUTIL_BUILD_TESTS=OFF \
  -Ccmake.define.GPUUTIL_BUILD_BENCHMARKS=OFF \
  -Ccmake.define.GPUUTIL_BUILD_PYTHON=ON \
  -Ccmake.define.GPUUTIL_BUILD_FAKE_CUPTI=$fake_cupti \
  ${defines[@]+"${defines[@]}"} \
  "$repo"
echo "[device_build] built and installed in $(($(date +%s) - start)) s"

# Checked from outside the source tree, with nothing else on the path.
(cd / && PYTHONPATH="$prefix" "$py" -c 'import gpuutil, gpuutil._core as c; print("[device_build] gpuutil", c.version(), "from", gpuutil.__file__)')
if [ -f "$build_dir/tests/cpp/libfake_cupti.so" ]; then
  echo "[device_build] fake CUPTI: $build_dir/tests/cpp/libfake_cupti.so"
fi
echo "export PYTHONPATH=$prefix\${PYTHONPATH:+:\$PYTHONPATH}"
