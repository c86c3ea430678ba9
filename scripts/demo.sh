#!/usr/bin/env bash
# The main demo: installs gpuutil (and torch 2.13, CPU build) into .venv
# (idempotent), then runs the example PyTorch training loop with a planted
# DataLoader stall (num_workers=0, 4 ms sleep per sample, 8 samples a batch)
# under gpuutil.profile(): prints the per-step host breakdown and the top
# finding, and writes one JSON report per step to build/demo/steps.jsonl
# (then the run record, gpuutil.run/1).
# Extra arguments go to examples/train.py (e.g. --item, --tiny-batch).
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the demo needs: torch (CPU build) and the build tools; the test
# tools and trackers come with scripts/test.sh.
GPUUTIL_BOOTSTRAP_MINIMAL=1 scripts/bootstrap.sh
echo "[demo] profiling examples/train.py (8 steps, planted DataLoader stall)"
mkdir -p build/demo
.venv/bin/python examples/train.py --slow-loader-ms 4 --steps 8 --output build/demo/steps.jsonl "$@"
