#!/usr/bin/env bash
# Loss under a loaded host: runs the two sustained-rate tests (CUPTI records
# and NVTX ranges, both at 1M/s) RUNS times each while BUSY busy loops share
# the machine's cores, and prints how many runs lost anything and how much.
# A drain thread held off the CPU must cost memory, never records.
# Usage: benchmarks/loaded_host_loss.sh [BUSY (default 6)] [RUNS (default 6)] [BUILD (default build)]
set -euo pipefail
busy=${1:-6}
runs=${2:-6}
build=${3:-build}
cd "$(dirname "$0")/.."
cupti="$build/tests/cpp/test_cupti_scenarios"
nvtx="$build/tests/cpp/test_nvtx_injection"
for exe in "$cupti" "$nvtx"; do
  [[ -x "$exe" ]] || { echo "loaded_host_loss: $exe is not built (scripts/bootstrap.sh)" >&2; exit 2; }
done
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for ((i = 0; i < busy; ++i)); do
  (while :; do :; done) &
  pids+=($!)
done
# First failing count of a run ("Which is: N" after the loss assertion), or 0.
lost() { grep -A2 -E "$2" <<<"$1" | grep -m1 -oE 'Which is: [0-9]+' | grep -oE '[0-9]+' || echo 0; }
cupti_bad=0 nvtx_bad=0 cupti_lost=() nvtx_lost=()
for ((r = 1; r <= runs; ++r)); do
  out=$("$cupti" --gtest_filter='CuptiScenario.ZeroRecordsLost*' 2>&1 || true)
  n=$(lost "$out" 'records_lost_no_buffer')
  cupti_lost+=("$n"); [[ "$n" != 0 || "$out" != *"[  PASSED  ] 1 test"* ]] && cupti_bad=$((cupti_bad + 1))
  out=$("$nvtx" --gtest_filter='NvtxInjection.NoRangeIsLost*' 2>&1 || true)
  n=$(lost "$out" '  dropped')
  nvtx_lost+=("$n"); [[ "$n" != 0 || "$out" != *"[  PASSED  ] 1 test"* ]] && nvtx_bad=$((nvtx_bad + 1))
  echo "run $r/$runs: CUPTI lost ${cupti_lost[-1]}, NVTX lost ${nvtx_lost[-1]}" >&2
done
echo "| test (1M/s, $busy busy loops on $(nproc) cores) | runs failed | lost per run |"
echo "|---|---:|---|"
echo "| CuptiScenario.ZeroRecordsLostAtOneMillionRecordsPerSecondSustained | $cupti_bad of $runs | ${cupti_lost[*]} |"
echo "| NvtxInjection.NoRangeIsLostAtOneMillionPairsPerSecondNorInABurstAfterAnIdleSecond | $nvtx_bad of $runs | ${nvtx_lost[*]} |"
