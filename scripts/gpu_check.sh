#!/usr/bin/env bash
# The GPU check in one command, for the lent GPU machine (offline, nothing
# fetched): builds gpuutil with what that machine has (scripts/device_build.sh:
# the Python module, the fake CUPTI, the torch-free gpu_check_driver and
# gpu_check_probe), builds the LibTorch hook against its torch at the same
# time, then runs benchmarks/gpu_check.py, its CUPTI probe first. Without the
# Python headers (Python.h, python3.12-dev) the module cannot be built: then
# only the C++ programs are built and the check runs --cxx-only (the probe
# and the driver scenario). The whole run, build included, is kept within
# $GPUUTIL_GPU_CHECK_BUDGET_S (240 s): scenarios left at that point are
# skipped with the reason. The table comes last; gpu_check.json and the full
# log go to $OUT (else build/gpu_check). Exit status: gpu_check.py's.
#
#   bash scripts/gpu_check.sh               # on the GPU machine (timeout 300 s)
#   bash scripts/gpu_check.sh --self-test   # the same, on the fake CUPTI (any machine)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=${OUT:-$repo/build/gpu_check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export GPUUTIL_TORCH_EXT_DIR=$repo/build-device/torch_ext
py=${PYTHON:-python3}
start=$(date +%s)
{
  echo "[gpu_check.sh] $(uname -m), $(nproc) cores, $("$py" --version 2>&1)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  # GPUUTIL_DEVICE_BUILD_ARGS: extra CMake defines, GPUUTIL_DEVICE_BUILD_PYTHONPATH:
  # where the build finds the nvidia-* wheels' headers (the dry run simulates
  # the machine with them; neither is needed there).
  mode=()
  pyinc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
  if [ -f "$pyinc/Python.h" ]; then
    # shellcheck disable=SC2086
    PYTHONPATH=${GPUUTIL_DEVICE_BUILD_PYTHONPATH:-${PYTHONPATH:-}} \
      bash scripts/device_build.sh --with-fake-cupti -DGPUUTIL_BUILD_GPU_CHECK=ON ${GPUUTIL_DEVICE_BUILD_ARGS:-} || exit 2
    export PYTHONPATH=$repo/build-device/site${PYTHONPATH:+:$PYTHONPATH}
    echo "[gpu_check.sh] building the LibTorch hook against $("$py" -c 'import torch; print(torch.__version__)' 2>&1)"
    "$py" -m gpuutil.torch.build || echo "[gpu_check.sh] the LibTorch hook did not build: Python-level hooks are used (reported)"
  else
    echo "[gpu_check.sh] Python.h not found in ${pyinc:-(no include folder)} (python3-dev missing): the Python module cannot be built; building the C++ probe and driver only, the Python scenarios are skipped"
    # shellcheck disable=SC2086
    PYTHONPATH=${GPUUTIL_DEVICE_BUILD_PYTHONPATH:-${PYTHONPATH:-}} \
      cmake --no-warn-unused-cli -S "$repo" -B "$repo/build-device" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$(command -v "$py")" \
      -DGPUUTIL_BUILD_TESTS=OFF -DGPUUTIL_BUILD_BENCHMARKS=OFF -DGPUUTIL_BUILD_PYTHON=OFF \
      -DGPUUTIL_BUILD_GPU_CHECK=ON -DGPUUTIL_BUILD_FAKE_CUPTI=ON ${GPUUTIL_DEVICE_BUILD_ARGS:-} >/dev/null &&
      cmake --build "$repo/build-device" --target gpu_check_probe gpu_check_driver fake_cupti || exit 2
    mode=(--cxx-only)
  fi
  build_s=$(($(date +%s) - start))
  echo "[gpu_check.sh] build done in $build_s s"
  # What is left of the budget, less 20 s for the scenario running at the deadline and the output.
  left=$(( ${GPUUTIL_GPU_CHECK_BUDGET_S:-240} - build_s - 20 ))
  GPUUTIL_GPU_CHECK_DRIVER=$repo/build-device/benchmarks/gpu_check_driver \
    GPUUTIL_GPU_CHECK_PROBE=$repo/build-device/benchmarks/gpu_check_probe \
    GPUUTIL_FAKE_CUPTI=$repo/build-device/tests/cpp/libfake_cupti.so \
    "$py" benchmarks/gpu_check.py --out "$out" --deadline-s "$(( left > 10 ? left : 10 ))" ${mode[@]+"${mode[@]}"} "$@"
} 2>&1 | tee "$out/gpu_check.log"
exit "${PIPESTATUS[0]}"
