#!/usr/bin/env bash
# The GPU check in one command, for the lent GPU machine (offline, nothing
# fetched): builds gpuutil with what that machine has (scripts/device_build.sh:
# the Python module, the fake CUPTI, the torch-free gpu_check_driver), builds
# the LibTorch hook against its torch at the same time, then runs
# benchmarks/gpu_check.py. The table comes last; gpu_check.json and the full
# log go to $OUT (else build/gpu_check). Exit status: gpu_check.py's.
#
#   bash scripts/gpu_check.sh               # on the GPU machine (timeout ~420 s)
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
  # shellcheck disable=SC2086
  PYTHONPATH=${GPUUTIL_DEVICE_BUILD_PYTHONPATH:-${PYTHONPATH:-}} \
    bash scripts/device_build.sh --with-fake-cupti -DGPUUTIL_BUILD_GPU_CHECK=ON ${GPUUTIL_DEVICE_BUILD_ARGS:-} || exit 2
  export PYTHONPATH=$repo/build-device/site${PYTHONPATH:+:$PYTHONPATH}
  echo "[gpu_check.sh] building the LibTorch hook against $("$py" -c 'import torch; print(torch.__version__)' 2>&1)"
  "$py" -m gpuutil.torch.build || echo "[gpu_check.sh] the LibTorch hook did not build: Python-level hooks are used (reported)"
  echo "[gpu_check.sh] build done in $(($(date +%s) - start)) s"
  GPUUTIL_GPU_CHECK_DRIVER=$repo/build-device/benchmarks/gpu_check_driver \
    GPUUTIL_FAKE_CUPTI=$repo/build-device/tests/cpp/libfake_cupti.so \
    "$py" benchmarks/gpu_check.py --out "$out" "$@"
} 2>&1 | tee "$out/gpu_check.log"
exit "${PIPESTATUS[0]}"
