#!/usr/bin/env bash
# Runs every benchmark whose numbers appear in benchmarks/RESULTS.md, after
# scripts/bootstrap.sh has built them into build/. The machine is shared:
# compare ratios measured side by side in one run, not across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
traces="${GPUUTIL_TRACES_DIR:-../shared/traces}"
echo "== engine throughput (synthetic, one core)"
build/benchmarks/bench_engine 10000000 1000 5
echo "== trace import (largest shared trace)"
build/benchmarks/bench_import "$traces/hta_train_v100_dataloader_nccl_rank1.json.gz" 7
echo "== CUPTI decode + store per record (fake records)"
build/benchmarks/bench_cupti_decode
echo "== NVTX push/pop with the injection active"
build/benchmarks/bench_nvtx_pushpop
echo "== gpuutil vs HTA idle-time breakdown, end to end"
if [ -x .venv-hta/bin/python ]; then
  .venv/bin/python benchmarks/hta_compare.py
else
  echo "skipped: run benchmarks/setup_hta_venv.sh first"
fi
