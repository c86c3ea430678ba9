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
echo "== the first analysis in a fresh process (what a one-shot analysis pays), 5 processes"
for _ in 1 2 3 4 5; do build/benchmarks/bench_first_call "$traces/hta_sampled_rank0.json.gz" analyze; done
echo "== CUPTI decode + store per record (fake records)"
build/benchmarks/bench_cupti_decode
echo "== NVTX push/pop with the injection active"
build/benchmarks/bench_nvtx_pushpop
echo "== LibTorch hook range queues: record() and drain per range, memory"
build/benchmarks/bench_hook_queue
echo "== records and ranges lost at 1M/s with 6 busy loops sharing the cores"
benchmarks/loaded_host_loss.sh 6 6
echo "== gpuutil vs HTA idle-time breakdown, end to end"
if [ -x .venv-hta/bin/python ]; then
  .venv/bin/python benchmarks/hta_compare.py
else
  echo "skipped: run benchmarks/setup_hta_venv.sh first"
fi
echo "== session lock: adds waiting while the report worker takes large batches"
build/benchmarks/bench_session_lock 1000 1000 100 5
echo "== report serialisation (live step, whole trace)"
build/benchmarks/bench_report_json "$traces/hta_train_v100_dataloader_nccl_rank1.json.gz" 15
echo "== PyTorch integration overhead (MLP and transformer loops) vs torch.profiler"
.venv/bin/python benchmarks/bench_torch_overhead.py --steps 40 --rounds 21 --markdown
.venv/bin/python benchmarks/bench_torch_overhead.py --model transformer --steps 40 --rounds 15 --markdown
echo "== PyTorch step boundary, part by part; per-phase paired differences"
.venv/bin/python benchmarks/bench_torch_boundary.py
.venv/bin/python benchmarks/bench_torch_boundary.py --report-interval-ms 0
.venv/bin/python benchmarks/bench_torch_phases.py
echo "== forward timing: discovery step vs wrapped root classes"
.venv/bin/python benchmarks/bench_module_hooks.py
echo "== torch.compile: Dynamo's counters with and without gpuutil"
.venv/bin/python benchmarks/bench_torch_compile.py
