#!/usr/bin/env python3
"""hta_compare.py over every shared trace HTA can read: per trace the
speedups (analyze call, whole Python process, whole process of the native
gpuutil-analyze) and their medians over the traces.

    bash benchmarks/setup_hta_venv.sh               # once
    python3 benchmarks/hta_compare_all.py [--reps 3] [--traces DIR]

A trace HTA cannot read (its child fails) is listed as such and left out of
the medians. Only the standard library is needed here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--traces", type=Path, default=HERE.parent.parent / "shared" / "traces")
    args = ap.parse_args()
    traces = sorted(p for p in args.traces.glob("*.json*") if p.name.endswith((".json", ".json.gz")))
    if not traces:
        print(f"hta_compare_all: error: no traces in {args.traces}", file=sys.stderr)
        return 2
    rows, unreadable = [], []
    for i, t in enumerate(traces, 1):
        print(f"[{i}/{len(traces)}] {t.name}", file=sys.stderr, flush=True)
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            proc = subprocess.run([sys.executable, str(HERE / "hta_compare.py"), "--trace", str(t), "--reps",
                                   str(args.reps), "--json", out.name], capture_output=True, text=True)
            if proc.returncode != 0:
                unreadable.append((t.name, (proc.stderr.strip().splitlines() or ["?"])[-1][:120]))
                continue
            data = json.loads(Path(out.name).read_text())
        rows.append((t.name, data))
    print("| trace | HTA analyze (s) | gpuutil analyze (s) | analyze speedup | HTA process (s) | gpuutil process (s) "
          "| process speedup | gpuutil-analyze process (s) | native process speedup |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    sp_a, sp_p, sp_n = [], [], []
    for name, d in rows:
        m = d["medians"]
        a = m["hta"]["analyze_s"] / m["gpuutil"]["analyze_s"]
        p = m["hta"]["process_s"] / m["gpuutil"]["process_s"]
        n = m["hta"]["process_s"] / m["native"]["process_s"]
        sp_a.append(a)
        sp_p.append(p)
        sp_n.append(n)
        print(f"| {name} | {m['hta']['analyze_s']:.3f} | {m['gpuutil']['analyze_s']:.4f} | {a:.1f}x "
              f"| {m['hta']['process_s']:.3f} | {m['gpuutil']['process_s']:.3f} | {p:.1f}x "
              f"| {m['native']['process_s']:.4f} | {n:.1f}x |")
    if rows:
        print(f"\nmedian over {len(rows)} traces: analyze {statistics.median(sp_a):.1f}x, "
              f"whole process {statistics.median(sp_p):.1f}x, "
              f"whole process with gpuutil-analyze {statistics.median(sp_n):.1f}x")
    for name, why in unreadable:
        print(f"HTA could not read {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
