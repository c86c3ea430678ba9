#!/usr/bin/env python3
"""Side-by-side benchmark: gpuutil vs HolisticTraceAnalysis (HTA) idle-time breakdown.

Both tools analyse the same real Kineto trace, each in its own subprocess and its
own virtualenv (gpuutil in .venv, HTA 0.5.0 in .venv-hta), repeated N times.

Measured per run:
  analyze  the tool's own end-to-end call, timed inside the child:
             HTA:     TraceAnalysis(trace_dir=...)  (gzip + JSON parse + DataFrame
                      build + align/filter) + get_idle_time_breakdown(ranks, visualize=False)
             gpuutil: gpuutil.analyze(path)  (gzip + parse + analysis + report dict)
  import   importing the tool (HTA: hta.trace_analysis with pandas/numpy/plotly;
           gpuutil: import gpuutil and look up gpuutil.analyze, which loads
           the C++ core: the package loads its names on first use), timed
           inside the child
  process  the whole child as the parent saw it (interpreter start + import +
           analyze + writing the result), wall clock
  native   the whole `gpuutil-analyze TRACE -o OUT` process (the native
           `gpuutil analyze --json`, no interpreter), wall clock: what a
           script or CI gate that only needs the report runs
  peak RSS the child's max resident set size, from os.wait4's rusage

Usage (from the repo root; the script itself needs only the standard library):
  bash benchmarks/setup_hta_venv.sh        # once: creates .venv-hta
  python3 benchmarks/hta_compare.py        # 3 repetitions
  python3 benchmarks/hta_compare.py --quick   # 1 repetition
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HTA_PY = REPO / ".venv-hta" / "bin" / "python"
GPUUTIL_PY = REPO / ".venv" / "bin" / "python"
GPUUTIL_NATIVE = REPO / ".venv" / "bin" / "gpuutil-analyze"
DEFAULT_TRACE = (REPO / ".." / "shared" / "traces" /
                 "hta_train_v100_dataloader_nccl_rank1.json.gz")

# --- child programs (run with `python -c CODE ARGS...`) -----------------------

HTA_CHILD = r"""
import json, sys, time
trace_dir, out_path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=trace_dir)
t2 = time.perf_counter()
ranks = analyzer.t.get_ranks()
# visualize=False: the default (True) calls plotly's fig.show(), which needs a
# browser/notebook and is not part of the analysis.
idle_df, _ = analyzer.get_idle_time_breakdown(ranks=ranks, visualize=False)
t3 = time.perf_counter()

# --- context, not timed: kernel mix and kernel span of each stream -----------
from hta.utils.utils import get_kernel_type
sym = analyzer.t.symbol_table.get_sym_table()
kernel_cats = {"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy"}
streams = {}
for rank in ranks:
    df = analyzer.t.get_trace(rank)
    k = df[df["stream"].ne(-1) & df["cat"].map(lambda c: sym[c] in kernel_cats)]
    for stream, g in k.groupby("stream"):
        mix = {}
        for name_id in g["name"]:
            kt = get_kernel_type(sym[name_id])
            mix[kt] = mix.get(kt, 0) + 1
        streams[f"{rank}:{int(stream)}"] = {
            "kernels": int(len(g)),
            "mix": mix,
            "span": float((g["ts"] + g["dur"]).max() - g["ts"].min()),
        }
rows = [
    {"rank": int(r["rank"]), "stream": int(r["stream"]),
     "category": str(r["idle_category"]), "idle_time": float(r["idle_time"]),
     "ratio": float(r["idle_time_ratio"])}
    for r in idle_df.to_dict("records")
]
with open(out_path, "w") as f:
    json.dump({"import_s": t1 - t0, "construct_s": t2 - t1,
               "breakdown_s": t3 - t2, "analyze_s": t3 - t1,
               "ranks": [int(r) for r in ranks], "idle": rows,
               "streams": streams}, f)
"""

GPUUTIL_CHILD = r"""
import json, sys, time
path, out_path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
import gpuutil
analyze = gpuutil.analyze  # the package loads its names on first use: that is import time
t1 = time.perf_counter()
report = analyze(path)
t2 = time.perf_counter()
s = report["summary"]
with open(out_path, "w") as f:
    json.dump({"import_s": t1 - t0, "analyze_s": t2 - t1,
               "steps": s.get("steps"), "steps_wall_ns": s.get("steps_wall_ns"),
               "devices": [{k: d.get(k) for k in
                            ("rank", "device", "name", "wall_ns", "breakdown_ns",
                             "busy_pct", "idle_pct", "kernels")}
                           for d in s["devices"]]}, f)
"""

IDLE_KEYS = ("idle_dataloader", "idle_host_sync", "idle_collective",
             "idle_launch", "idle_host", "idle_dependency", "idle_unattributed", "idle_kernel_gap")


def die(msg: str) -> None:
    print(f"hta_compare: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run_child(python: Path, code: str, args: list[str], log_path: Path) -> dict:
    """Runs one child; returns its JSON result plus process wall time and peak RSS."""
    out = Path(tempfile.mkstemp(prefix="hta_compare_", suffix=".json")[1])
    try:
        with open(log_path, "ab") as log:
            t0 = time.perf_counter()
            proc = subprocess.Popen([str(python), "-c", code, *args, str(out)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    cwd=str(REPO))
            _, status, rusage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            tail = log_path.read_text(errors="replace")[-3000:]
            die(f"{python} child exited {proc.returncode}; log {log_path}:\n{tail}")
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    result["process_s"] = wall
    result["peak_rss_mib"] = rusage.ru_maxrss / 1024.0  # Linux: KiB
    return result


def run_native(trace: Path, log_path: Path) -> dict:
    """Runs gpuutil-analyze once; its process wall time and peak RSS."""
    fd, name = tempfile.mkstemp(prefix="hta_compare_native_", suffix=".json")
    os.close(fd)
    out = Path(name)
    try:
        with open(log_path, "ab") as log:
            t0 = time.perf_counter()
            proc = subprocess.Popen([str(GPUUTIL_NATIVE), str(trace), "-o", str(out)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(REPO))
            _, status, rusage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            die(f"{GPUUTIL_NATIVE} exited {os.waitstatus_to_exitcode(status)}; log {log_path}")
        steps = len(json.loads(out.read_text())["steps"])
    finally:
        out.unlink(missing_ok=True)
    return {"process_s": wall, "peak_rss_mib": rusage.ru_maxrss / 1024.0, "steps": steps}


def fmt_runs(xs: list[float]) -> str:
    return ", ".join(f"{x:.3f}" for x in xs)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE,
                    help="Kineto trace (.json or .json.gz); default: %(default)s")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--quick", action="store_true", help="1 repetition")
    ap.add_argument("--json", type=Path, help="also write all measurements here")
    args = ap.parse_args()
    reps = 1 if args.quick else args.reps
    if reps < 1:
        die("--reps must be >= 1")

    trace = args.trace.resolve()
    if not trace.is_file():
        die(f"trace not found: {trace}")
    if not trace.name.endswith((".json", ".json.gz")):
        die("trace must end in .json or .json.gz (HTA only picks up those names)")
    if not HTA_PY.exists():
        die(f"{HTA_PY.parent.parent} is missing: run benchmarks/setup_hta_venv.sh first")
    if not GPUUTIL_PY.exists():
        die(f"{GPUUTIL_PY.parent.parent} is missing: run scripts/bootstrap.sh first")
    if not GPUUTIL_NATIVE.exists():
        die(f"{GPUUTIL_NATIVE} is missing: run scripts/bootstrap.sh first")
    chk = subprocess.run([str(GPUUTIL_PY), "-c", "import gpuutil; gpuutil.analyze"],
                         capture_output=True, text=True, cwd=str(REPO))
    if chk.returncode != 0:
        die("gpuutil is not importable in .venv (run scripts/bootstrap.sh):\n"
            + chk.stderr[-2000:])

    # HTA reads a directory of per-rank trace files; the rank comes from the
    # trace's distributedInfo. Symlink, never copy, the (read-only) trace.
    tmp = Path(tempfile.mkdtemp(prefix="hta_compare_"))
    trace_dir = tmp / "traces"
    trace_dir.mkdir()
    (trace_dir / trace.name).symlink_to(trace)
    log_path = tmp / "children.log"

    load_before = os.getloadavg()
    hta_runs: list[dict] = []
    gpu_runs: list[dict] = []
    native_runs: list[dict] = []
    try:
        for i in range(reps):  # interleaved, so both tools see the same machine load
            hta_runs.append(run_child(HTA_PY, HTA_CHILD, [str(trace_dir)], log_path))
            gpu_runs.append(run_child(GPUUTIL_PY, GPUUTIL_CHILD, [str(trace)], log_path))
            native_runs.append(run_native(trace, log_path))
            print(f"run {i + 1}/{reps}: HTA {hta_runs[-1]['analyze_s']:.3f} s, "
                  f"gpuutil {gpu_runs[-1]['analyze_s']:.3f} s", file=sys.stderr)
    finally:
        load_after = os.getloadavg()
        for p in (trace_dir / trace.name, log_path):
            p.unlink(missing_ok=True)
        trace_dir.rmdir()
        tmp.rmdir()

    def col(runs: list[dict], key: str) -> list[float]:
        return [r[key] for r in runs]

    med = {}
    for key in ("process_s", "peak_rss_mib"):
        med["native", key] = statistics.median(col(native_runs, key))
    for tool, runs in (("hta", hta_runs), ("gpuutil", gpu_runs)):
        for key in ("analyze_s", "import_s", "process_s", "peak_rss_mib"):
            med[tool, key] = statistics.median(col(runs, key))

    lines: list[str] = []
    p = lines.append
    p(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    p(f"trace: {trace} ({trace.stat().st_size / 2**20:.1f} MiB on disk)")
    p(f"machine: {os.cpu_count()} CPUs, {cpu_model()}; Python {platform.python_version()}; "
      f"loadavg(1m) {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    p(f"repetitions: {reps} (interleaved HTA, gpuutil, gpuutil-analyze), each a separate subprocess")
    p("")
    p("| tool | analyze runs (s) | analyze median (s) | import median (s) "
      "| process median (s) | peak RSS median (MiB) |")
    p("|---|---|---:|---:|---:|---:|")
    for tool, label, runs in (("hta", "HTA 0.5.0", hta_runs),
                              ("gpuutil", "gpuutil", gpu_runs)):
        p(f"| {label} | {fmt_runs(col(runs, 'analyze_s'))} | {med[tool, 'analyze_s']:.3f} "
          f"| {med[tool, 'import_s']:.3f} | {med[tool, 'process_s']:.3f} "
          f"| {med[tool, 'peak_rss_mib']:.0f} |")
    p(f"| gpuutil-analyze (native) | - | - | - | {med['native', 'process_s']:.3f} "
      f"| {med['native', 'peak_rss_mib']:.0f} |")
    sp_analyze = med["hta", "analyze_s"] / med["gpuutil", "analyze_s"]
    sp_process = med["hta", "process_s"] / med["gpuutil", "process_s"]
    p("")
    p(f"speedup (median_hta / median_gpuutil), analyze: {sp_analyze:.1f}x "
      f"(target >= 20x: {'met' if sp_analyze >= 20 else 'NOT met'})")
    p(f"speedup, whole process incl. interpreter start and imports: {sp_process:.1f}x")
    sp_native = med["hta", "process_s"] / med["native", "process_s"]
    p(f"speedup, whole process, HTA's Python process vs the native gpuutil-analyze: {sp_native:.1f}x")
    h = hta_runs[-1]
    p(f"HTA analyze split (median): TraceAnalysis() "
      f"{statistics.median(col(hta_runs, 'construct_s')):.3f} s + get_idle_time_breakdown() "
      f"{statistics.median(col(hta_runs, 'breakdown_s')):.3f} s")

    # --- idle numbers side by side (from the last run of each tool) ----------
    g = gpu_runs[-1]
    p("")
    p("HTA get_idle_time_breakdown, per stream (ms; HTA reports the trace's time "
      "unit, us for Kineto JSON; consecutive_kernel_delay default 30 = 30 us here):")
    p("")
    p("| rank:stream | kernels (compute/comm/memory) | kernel span | host_wait "
      "| kernel_wait | other | idle total |")
    p("|---|---|---:|---:|---:|---:|---:|")
    per_stream: dict[str, dict[str, float]] = {}
    for row in h["idle"]:
        per_stream.setdefault(f"{row['rank']}:{row['stream']}", {})[row["category"]] = \
            row["idle_time"]
    compute_streams = []
    for key in sorted(per_stream, key=lambda k: tuple(int(x) for x in k.split(":"))):
        cats = per_stream[key]
        info = h["streams"].get(key, {"kernels": 0, "mix": {}, "span": 0.0})
        mix = info["mix"]
        n_comp = mix.get("COMPUTATION", 0)
        if n_comp:
            compute_streams.append(key)
        hw, kw, ot = (cats.get(c, 0.0) / 1e3 for c in ("host_wait", "kernel_wait", "other"))
        p(f"| {key}{' (compute)' if n_comp else ''} | {info['kernels']} ({n_comp}/"
          f"{mix.get('COMMUNICATION', 0)}/{mix.get('MEMORY', 0)}) | {info['span'] / 1e3:.1f} "
          f"| {hw:.1f} | {kw:.1f} | {ot:.1f} | {hw + kw + ot:.1f} |")
    p("")
    p("gpuutil report['summary']['devices'][i]['breakdown_ns'], all streams of the "
      f"device merged, over {g['steps']} ProfilerStep windows (ms):")
    p("")
    p("| rank/device | wall | compute | comm | memory | " + " | ".join(IDLE_KEYS) + " | idle total |")
    p("|---|" + "---:|" * (5 + len(IDLE_KEYS)))
    for d in g["devices"]:
        b = d["breakdown_ns"]
        idle = sum(b.get(k, 0) for k in IDLE_KEYS)
        cells = " | ".join(f"{b.get(k, 0) / 1e6:.1f}" for k in
                           ("compute", "communication", "memory") + IDLE_KEYS)
        p(f"| {d['rank']}/{d['device']} | {d['wall_ns'] / 1e6:.1f} | {cells} "
          f"| {idle / 1e6:.1f} |")
    if compute_streams:
        # The main compute stream: the one with the most compute kernels. Idle
        # times of different streams overlap in time, so they are not summed.
        main = max(compute_streams,
                   key=lambda k: h["streams"][k]["mix"].get("COMPUTATION", 0))
        c = per_stream[main]
        hw, kw, ot = (c.get(x, 0.0) / 1e3 for x in ("host_wait", "kernel_wait", "other"))
        p("")
        p(f"main compute stream {main} (most compute kernels), HTA idle: "
          f"{hw + kw + ot:.1f} ms = host_wait {hw:.1f} + kernel_wait {kw:.1f} + other {ot:.1f}")
        for d in g["devices"]:
            b = d["breakdown_ns"]
            idle = sum(b.get(k, 0) for k in IDLE_KEYS) / 1e6
            parts = " + ".join(f"{k[5:]} {b.get(k, 0) / 1e6:.1f}" for k in IDLE_KEYS
                               if b.get(k, 0))
            p(f"gpuutil rank {d['rank']} device {d['device']} idle: {idle:.1f} ms"
              f"{' = ' + parts if parts else ''}")
        p("These measure different things (see below) and are not expected to agree.")
    p("")
    p("Why they differ: HTA's breakdown is per CUDA stream: for each kernel/memcpy/"
      "memset it takes the gap since the previous one on the same stream and calls it "
      "host_wait if the launching runtime call started after that previous kernel "
      "ended, kernel_wait if the gap is under consecutive_kernel_delay, else other. A "
      "compute stream that waits while NCCL kernels or copies run on other streams "
      "therefore shows that time as 'other' (or host_wait) idle, and HTA by default "
      "keeps only kernels launched before the last ProfilerStep starts, ignores the gap "
      "before each stream's first kernel, and never names a host-side cause. gpuutil "
      "merges all streams of the device, so a gap is idle only when nothing at all "
      "runs; time covered only by communication or copies is counted as communication/"
      "memory, not idle. It covers every ProfilerStep window, and splits each idle gap "
      "into named host-side causes (dataloader, host sync, collective wait, launch "
      "latency of a named op, other host work) from the launching thread's timeline.")

    text = "\n".join(lines)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "trace": str(trace), "reps": reps, "hta": hta_runs, "gpuutil": gpu_runs,
            "native": native_runs, "speedup_analyze": sp_analyze, "speedup_process": sp_process,
            "speedup_process_native": sp_native,
            "medians": {tool: {key: med[tool, key] for key in ("analyze_s", "import_s", "process_s", "peak_rss_mib")}
                        for tool in ("hta", "gpuutil")}
            | {"native": {key: med["native", key] for key in ("process_s", "peak_rss_mib")}},
            "table": text}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
