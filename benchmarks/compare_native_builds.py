#!/usr/bin/env python3
"""Two or more builds of `gpuutil-analyze` side by side: whole processes,
interleaved, the median wall time of each per trace.

What an import or engine change buys a user who runs the command, measured
the way the HTA comparison measures the whole process (benchmarks/RESULTS.md,
"With the native command"). Copy the old binary away before rebuilding:

    cp build/gpuutil-analyze /tmp/ga_old && ninja -C build gpuutil_analyze
    python3 benchmarks/compare_native_builds.py /tmp/ga_old build/gpuutil-analyze \\
        --traces ../shared/traces/hta_sampled_rank0.json.gz,../shared/traces/kineto_resnet50_nw4_v100.json.gz

Only the standard library is needed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binaries", nargs="+", help="gpuutil-analyze builds to compare (two or more)")
    ap.add_argument("--traces", required=True, help="trace files, comma-separated")
    ap.add_argument("--runs", type=int, default=15, help="runs of each binary per trace (default 15)")
    args = ap.parse_args()
    if len(args.binaries) < 2:
        ap.error("give two or more binaries")
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    traces = [t for t in args.traces.split(",") if t]
    for path in [*args.binaries, *traces]:
        if not os.path.isfile(path):
            ap.error(f"not found: {path}")
    print(f"{args.runs} interleaved runs each, median wall ms of the whole process:")
    print("| trace | " + " | ".join(args.binaries) + " |")
    print("|---|" + "---:|" * len(args.binaries))
    for i, trace in enumerate(traces, 1):
        print(f"[{i}/{len(traces)}] {os.path.basename(trace)}", file=sys.stderr, flush=True)
        walls: "dict[str, list[float]]" = {b: [] for b in args.binaries}
        for _ in range(args.runs):
            for b in args.binaries:
                t0 = time.perf_counter()
                done = subprocess.run([b, trace], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                walls[b].append(time.perf_counter() - t0)
                if done.returncode != 0:
                    sys.exit(f"compare_native_builds: {b} {trace} exited {done.returncode}: {done.stderr.strip()}")
        print(f"| {os.path.basename(trace)} | "
              + " | ".join(f"{1e3 * statistics.median(walls[b]):.2f}" for b in args.binaries) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
