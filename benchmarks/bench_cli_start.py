"""How long `gpuutil analyze` takes to start, before it reads the trace.

Measured as the wall time of whole processes, interleaved, median of --runs:

  python -c pass                     the interpreter alone (the floor)
  gpuutil analyze MISSING            start-up up to the point the trace is opened
                                     (the file does not exist: the command stops there)
  gpuutil analyze SMALL_TRACE        a whole run on a small trace (2.5 KB), table output
  python -c "import gpuutil"         the package import
  gpuutil-analyze MISSING / SMALL    the same two runs of the native command
                                     (`gpuutil analyze --json` without Python)

    python benchmarks/bench_cli_start.py [--runs 41] [--trace PATH]

The console script is the one installed in the environment running this
benchmark (next to sys.executable).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def wall_ms(cmd: "list[str]") -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - t) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=41)
    default_trace = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces",
                                 "hta_cpu_only.json.gz")
    ap.add_argument("--trace", default=default_trace, help="a small trace for the whole-run row")
    args = ap.parse_args()
    gpuutil = os.path.join(os.path.dirname(sys.executable), "gpuutil")
    native = os.path.join(os.path.dirname(sys.executable), "gpuutil-analyze")
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "gpuutil analyze MISSING (start-up)": [gpuutil, "analyze", "/nonexistent/trace.json"],
        "python -c 'import gpuutil'": [sys.executable, "-c", "import gpuutil"],
    }
    if os.path.isfile(native):
        cases["gpuutil-analyze MISSING (start-up)"] = [native, "/nonexistent/trace.json"]
    if os.path.isfile(args.trace):
        cases[f"gpuutil analyze {os.path.basename(args.trace)}"] = [gpuutil, "analyze", args.trace]
        if os.path.isfile(native):
            cases[f"gpuutil-analyze {os.path.basename(args.trace)}"] = [native, args.trace]
    for cmd in cases.values():  # warm the page cache
        wall_ms(cmd)
    times: "dict[str, list[float]]" = {k: [] for k in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            times[name].append(wall_ms(cmd))
    print(f"{args.runs} interleaved runs each, wall ms (median, min, max):")
    for name, ts in times.items():
        print(f"  {name:<45} {statistics.median(ts):7.1f} {min(ts):7.1f} {max(ts):7.1f}")


if __name__ == "__main__":
    main()
