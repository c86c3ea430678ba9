#!/usr/bin/env bash
# The main job: installs gpuutil into .venv (idempotent) and prints the
# per-step report of a real ResNet-50 training trace recorded on a V100.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
traces="${GPUUTIL_TRACES_DIR:-../shared/traces}"
.venv/bin/gpuutil analyze "$traces/kineto_resnet50_nw4_v100.json.gz" "$@"
