#!/usr/bin/env python3
"""gpuutil's cost per training step in CPU instructions, counted by Valgrind.

Wall and CPU time on a shared VM swing by ±10% or more from round to round
(benchmarks/RESULTS.md), which hides a 1-2% overhead. Instruction counts do
not swing: this runs the same loop under `valgrind --tool=callgrind`
(every thread's instructions, the gpuutil worker included) for three or more
step counts per setting, and fits a line through them:

    instructions per step = the least-squares slope of I(steps) over steps

The child marks its phases with callgrind's client request
CALLGRIND_DUMP_STATS_AT (a small C helper compiled here with `cc`), so
every run yields three windows of the main thread (the training loop's;
that request dumps the calling thread only), and the whole run of every
other thread:

    start   the profile's start and its first --warmup-steps steps (20:
            discovery, the first detail steps); the interpreter, torch import and the
            model's first steps run before it, uninstrumented
    loop    the timed steps, on the training thread
    stop    leaving the profile: the last report batch, torch.profiler's
            post-processing (on the main thread)
    others  every other thread, start to exit: gpuutil's report worker
            and NVTX drain thread, torch.profiler's and PyTorch's threads

Three slopes are printed per setting: "in the loop" (the main thread's loop
window plus the other threads: the issue's "in the loop" measure; the
other threads' own start and stop cancel in the slope), the training
thread's share of it (the loop window alone; the profiler's other threads
natively run on another core), and "loop + stop" (adding the stop's share
that grows with steps: torch.profiler building its event list). Percentages
are of the baseline's instructions per step in the loop. Each pair of
neighbouring counts also gives its own slope; their spread is printed
beside the fit. A one-time event (a lazy import, a report
batch or a rediscovery step that falls into one run only) shows up there as
a spread of more than a few tenths of a percent.

What this counts is work, not time: cache misses, lock waits and the
worker's use of another core are not in it. It complements the interleaved
wall/CPU rounds of bench_torch_overhead.py; it does not replace them.

Report batches come every --batch-steps steps (default 100: what the
default report_interval_ms=100 gives a 1 ms step natively), not by time.
A time-based interval would make the count depend on how fast Valgrind
runs: under Valgrind a step takes 50-500x longer depending on what else
runs, so a wall-clock interval would analyse far fewer steps per batch and
count each batch's fixed cost many times over. The profile's own interval
is set beyond the run, and the child asks for a batch every --batch-steps
steps through the same call the interval makes (Profile._collect, which
hands the batch to the report worker). Every setting, the baseline
included, runs the same per-step callback.

    python benchmarks/bench_torch_instructions.py [--loop small|wide|mlp|transformer] [--dist]
        [--settings baseline,gpuutil-off,gpuutil,gpuutil-always,torch.profiler] [--steps 100,250,400]
        [--extra-ops K] [--jobs 2]
        (also: torch-hook, only the LibTorch hook's USER_SCOPE callback, no profile)

Settings: baseline (no profiler), gpuutil (default tier, detail="sampled"),
gpuutil-off, gpuutil-always, torch.profiler (activities=[CPU], no shapes,
prof.step() per step: the comparison the issue names), torch-hook.
--extra-ops K adds K tiny ops per step (bench_torch_overhead.py's ops sweep).

--mkl-isa SSE4_2 runs MKL's SSE4.2 kernels instead of its AVX2 ones. Under
Valgrind the transformer's AVX2 GEMMs (mkl_blas_avx2_sgemm_kernel_*) take
about 40 s per step even uninstrumented, with SSE4.2 about 1 s (measured
2026-12-02, torch 2.13.0+cpu; most likely Valgrind's emulation of FMA;
turning oneDNN off changed nothing). gpuutil's added instructions do not
run in MKL, so they are the same either way; the baseline's own count
triples (4-wide SSE multiply-adds instead of 8-wide FMAs), so RESULTS
states gpuutil's share against the AVX2 baseline, counted separately.

Needs valgrind and its headers (Debian: apt-get install valgrind) and a C
compiler. Runs --jobs Valgrind processes at once (instruction counts do not
depend on what else runs). Progress: one line per run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DETAIL = {"gpuutil": "sampled", "gpuutil-off": "off", "gpuutil-always": "always"}
SETTINGS = ("baseline", "torch-hook", "torch.profiler", *DETAIL)
WINDOWS = ("start", "loop", "stop")

#: The phase markers: callgrind's client requests. DUMP_STATS_AT writes the
#: counts so far to a numbered file and zeroes them; START_INSTRUMENTATION
#: ends the uninstrumented start-up (the interpreter and torch import run
#: at Valgrind's bare speed, several times faster). Both are no-ops outside
#: Valgrind.
MARKER_C = """#include <valgrind/callgrind.h>
void gpuutil_bench_mark(const char *window) { CALLGRIND_DUMP_STATS_AT(window); }
void gpuutil_bench_instrument(void) { CALLGRIND_START_INSTRUMENTATION; }
"""


def build_marker(tmp: str) -> str:
    """The marker library, compiled into tmp; its path."""
    src, lib = os.path.join(tmp, "mark.c"), os.path.join(tmp, "libmark.so")
    with open(src, "w") as f:
        f.write(MARKER_C)
    cc = os.environ.get("CC", "cc")
    done = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", lib, src], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench_torch_instructions: cannot build the phase marker with {cc} "
                 f"(needs valgrind's headers: apt-get install valgrind):\n{done.stderr[-1500:]}")
    return lib


def child(args: argparse.Namespace) -> None:
    import ctypes

    sys.path.insert(0, str(HERE))
    mark_lib = ctypes.CDLL(args.marker)
    mark_lib.gpuutil_bench_mark.argtypes = [ctypes.c_char_p]

    def mark(window: str) -> None:
        mark_lib.gpuutil_bench_mark(window.encode())

    import torch

    torch.set_num_threads(1)
    import bench_torch_overhead as b

    if args.dist:
        b.init_dist()
    kind, width, batch, item = b.LOOPS[args.loop]
    run = b.make_loop(width, batch, kind, item=item, extra_ops=args.extra_ops)
    run(args.pre_steps)  # the loop's own first steps (allocator, autograd caches)
    mark_lib.gpuutil_bench_instrument()  # counted from here: the setting's start, its first steps, ...
    done = [0]
    per_step: "list" = [None]  # the profile's batch call, or torch.profiler's step()

    def on_step() -> None:
        done[0] += 1
        if per_step[0] is not None:
            per_step[0]()

    if args.setting in ("baseline", "torch-hook"):
        if args.setting == "torch-hook":
            # Only gpuutil's LibTorch hook with its USER_SCOPE callback
            # registered, no profile: what a registered RecordFunction
            # callback costs the loop by itself.
            from gpuutil.torch import _ext

            hook, why = _ext.load(build=False)
            if hook is None:
                sys.exit(f"bench_torch_instructions: the LibTorch hook is not built: {why}")
            hook.start(False, False, False, True)
        run(args.warmup_steps, on_step)
        mark("start")
        run(args.child_steps, on_step)
        mark("loop")
        mark("stop")
        return
    if args.setting == "torch.profiler":
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            per_step[0] = p.step
            run(args.warmup_steps, on_step)
            mark("start")
            run(args.child_steps, on_step)
            mark("loop")
        mark("stop")
        return
    import gpuutil
    from gpuutil import _core

    os.environ["GPUUTIL_TORCH_HOOK"] = "libtorch"
    with gpuutil.profile(detail=DETAIL[args.setting], report_interval_ms=1e12) as prof:

        def batch() -> None:  # what report_interval_ms does, by step count
            if done[0] % args.batch_steps == 0:
                prof._collect(_core.now_ns())

        per_step[0] = batch
        run(args.warmup_steps, on_step)  # discovery and the sampled tier's first detail steps
        mark("start")
        run(args.child_steps, on_step)
        mark("loop")
    mark("stop")


def windows_of(tmp: str) -> "dict[str, int]":
    """Instructions per window, from callgrind's dump files in tmp (one file
    per dump and thread: cg.PID.PART-THREAD, and cg.PID-THREAD at exit).

    CALLGRIND_DUMP_STATS_AT dumps the calling thread only, so the marked
    windows ("start", "loop", "stop") are the main thread's (thread 1, which
    runs the loop); every other thread (gpuutil's report worker and drain
    thread, torch.profiler's, PyTorch's) is counted whole, from the start of
    instrumentation to its exit, as "others"."""
    found: "dict[str, int]" = {"others": 0}
    for path in Path(tmp).glob("cg.*"):
        thread = re.search(r"-(\d+)$", path.name)
        if not thread:
            continue
        text = path.read_text(errors="replace")
        total = re.search(r"^(?:totals|summary):\s+(\d+)", text, re.M)
        if not total:
            continue
        if int(thread.group(1)) != 1:
            found["others"] += int(total.group(1))
            continue
        why = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
        if why and why.group(1) in WINDOWS:
            found[why.group(1)] = found.get(why.group(1), 0) + int(total.group(1))
    return found


def instructions(setting: str, steps: int, args: argparse.Namespace) -> "dict[str, int]":
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-line=no", "--compress-strings=no", "--separate-threads=yes",
            f"--callgrind-out-file={tmp}/cg.%p",
            sys.executable, __file__, "--child", "--setting", setting, "--child-steps", str(steps),
            "--loop", args.loop, "--batch-steps", str(args.batch_steps), "--marker", args.marker,
            "--extra-ops", str(args.extra_ops), "--warmup-steps", str(args.warmup_steps),
            "--pre-steps", str(args.pre_steps),
        ] + (["--dist"] if args.dist else [])
        env = dict(os.environ)
        if args.mkl_isa != "native":
            env["MKL_ENABLE_INSTRUCTIONS"] = args.mkl_isa
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"bench_torch_instructions: {setting} ({steps} steps) failed:\n{done.stderr[-2000:]}")
        found = windows_of(tmp)
        missing = [w for w in WINDOWS if w not in found]
        if missing:
            sys.exit(f"bench_torch_instructions: {setting} ({steps} steps): no callgrind dump for {missing}:\n"
                     f"{done.stderr[-2000:]}")
        return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop", default="small", choices=("small", "wide", "mlp", "transformer"))
    ap.add_argument("--dist", action="store_true", help="torch.distributed initialised (gloo, one rank)")
    ap.add_argument("--settings", default="baseline,gpuutil-off,gpuutil,gpuutil-always,torch.profiler")
    ap.add_argument("--steps", default="100,250,400", help="three or more step counts, comma-separated")
    ap.add_argument("--extra-ops", type=int, default=0, help="tiny ops added per step (the ops sweep)")
    ap.add_argument("--jobs", type=int, default=2, help="Valgrind runs at once")
    ap.add_argument("--batch-steps", type=int, default=100, help="steps per report batch")
    ap.add_argument("--warmup-steps", type=int, default=20,
                    help="steps under the setting before the loop window (the profile's first steps)")
    ap.add_argument("--pre-steps", type=int, default=20,
                    help="uninstrumented steps before the setting starts (allocator, autograd caches)")
    ap.add_argument("--mkl-isa", default="native", choices=("native", "SSE4_2"),
                    help="MKL's instruction set in the child (MKL_ENABLE_INSTRUCTIONS); SSE4_2 for the "
                         "transformer: Valgrind emulates FMA lane by lane (see the module doc)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--setting", help=argparse.SUPPRESS)
    ap.add_argument("--child-steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--marker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    try:
        counts_of = sorted({int(s) for s in args.steps.split(",")})
    except ValueError:
        ap.error(f"--steps wants integers, comma-separated; got {args.steps!r}")
    if len(counts_of) < 3 or counts_of[0] <= 0:
        ap.error(f"--steps: need three or more different positive step counts; got {args.steps!r}")
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    if args.batch_steps < 1:
        ap.error("--batch-steps must be >= 1")
    if args.extra_ops < 0:
        ap.error("--extra-ops must be >= 0")
    if args.warmup_steps < 0:
        ap.error("--warmup-steps must be >= 0")
    if args.pre_steps < 0:
        ap.error("--pre-steps must be >= 0")
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"unknown setting(s) {unknown}; choose from {', '.join(SETTINGS)}")
    runs = [(setting, steps) for setting in settings for steps in counts_of]
    found: "dict[tuple[str, int], dict[str, int]]" = {}
    with tempfile.TemporaryDirectory() as marker_dir:
        args.marker = build_marker(marker_dir)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(instructions, setting, steps, args): (setting, steps) for setting, steps in runs}
            for n_done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                setting, steps = futures[fut]
                w = found[(setting, steps)] = fut.result()
                print(f"[{n_done}/{len(runs)}] {setting:15s} {steps:4d} steps: start {w['start']:,}, "
                      f"loop {w['loop']:,}, stop {w['stop']:,}, other threads {w['others']:,} instructions", flush=True)
    fits = {}
    for setting in settings:
        runs_of = [found[(setting, n)] for n in counts_of]
        fits[setting] = {
            # the training thread's loop window, plus every other thread's whole run (their own
            # start and stop cancel in the slope; what grows with steps is their per-step work)
            "loop": fit(counts_of, [w["loop"] + w["others"] for w in runs_of]),
            "loop/main": fit(counts_of, [w["loop"] for w in runs_of]),
            "loop+stop": fit(counts_of, [w["loop"] + w["stop"] + w["others"] for w in runs_of]),
        }
    label = f"loop {args.loop}" + (" (torch.distributed: gloo, 1 rank)" if args.dist else "")
    label += f", {args.extra_ops} extra ops per step" if args.extra_ops else ""
    label += f", MKL_ENABLE_INSTRUCTIONS={args.mkl_isa}" if args.mkl_isa != "native" else ""
    print(f"\n{label}; instructions per step: least-squares slope over {', '.join(map(str, counts_of))} steps")
    print("| setting | in the loop | over baseline | neighbouring-pair slopes | training thread over baseline "
          "| loop + stop | over baseline |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = fits.get("baseline")

    def over(setting: str, window: str) -> str:
        if base is None or setting == "baseline":
            return ""
        n, b = fits[setting][window][0], base[window][0]
        return f"{n - b:+,.0f} ({100.0 * (n - b) / base['loop'][0]:+.2f}%)"

    for setting, f in fits.items():
        n, lo, hi = f["loop"]
        print(f"| {setting} | {n:,.0f} | {over(setting, 'loop')} | {lo:,.0f} – {hi:,.0f} | "
              f"{over(setting, 'loop/main')} | {f['loop+stop'][0]:,.0f} | {over(setting, 'loop+stop')} |")
    if base is not None and "torch.profiler" in fits:
        tp = fits["torch.profiler"]["loop"][0] - base["loop"][0]
        for setting in settings:
            if setting in DETAIL:
                ours = fits[setting]["loop+stop"][0] - base["loop+stop"][0]
                ratio = f"{tp / ours:.1f}x" if ours > 0 else "n/a (gpuutil <= baseline)"
                print(f"torch.profiler in the loop / {setting} in the loop + stop: {ratio}")
    return 0


def fit(xs: "list[int]", ys: "list[int]") -> "tuple[float, float, float]":
    """(least-squares slope, lowest and highest neighbouring-pair slope) of ys over xs."""
    pairs = [(ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]) for i in range(len(ys) - 1)]
    return slope(xs, ys), min(pairs), max(pairs)


def slope(xs: "list[int]", ys: "list[int]") -> float:
    """The least-squares slope of ys over xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


if __name__ == "__main__":
    sys.exit(main())
