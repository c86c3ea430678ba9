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

    python benchmarks/bench_torch_instructions.py [--loop small|wide|mlp|transformer] [--dist | --ranks 2]
        [--settings baseline,gpuutil-off,gpuutil,gpuutil-always,torch.profiler] [--steps 100,250,400]
        [--extra-ops K] [--jobs 2]
        (also: torch-hook, only the LibTorch hook's USER_SCOPE callback, no profile)

Settings: baseline (no profiler), gpuutil (default tier, detail="sampled"),
gpuutil-off, gpuutil-always, torch.profiler (activities=[CPU], no shapes,
prof.step() per step: the comparison the issue names), torch-hook.
--extra-ops K adds K tiny ops per step (bench_torch_overhead.py's ops sweep).

--ranks N (N >= 2) runs a real N-rank job: N Valgrind processes per run,
one per rank, joined by torch.distributed (gloo, a FileStore in the run's
temporary folder), the model wrapped in DistributedDataParallel so every
backward all-reduces the gradients through gloo. Each rank is counted and
fitted on its own (a table per rank); the ranks wait for each other in the
all-reduce, and what that waiting costs in instructions shows in the
neighbouring-pair spread. A run takes N cores: use --jobs 1 on 2 cores.
The cross-rank view's threads work by the clock, not by steps (the leader
polls the store every 50 ms, each rank publishes every
cluster_interval_ms); under Valgrind a step lasts 50-100x longer, so they
would run 50-100x more often per step than natively. The parent first runs
the job natively (both ranks, baseline loop) to learn its step time; each
gpuutil child then times its first warmup steps under Valgrind and
stretches those intervals by the ratio (`time scale`, printed), so each
step sees the polls and publishes it would see natively.

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
    if args.ranks > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"file://{args.store_file}", rank=args.rank,
                                world_size=args.ranks)
    kind, width, batch, item = b.LOOPS[args.loop]
    run = b.make_loop(width, batch, kind, item=item, extra_ops=args.extra_ops, ddp=args.ranks > 1)
    run(args.pre_steps)  # the loop's own first steps (allocator, autograd caches)
    if args.calibrate:
        rate, _ = run(args.calibrate)
        print(f"ms_per_step {1000.0 / rate:.6f}", flush=True)
        return
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
        if args.native_step_ms > 0:  # the cross-rank view's clock-driven work, per native step
            first = args.warmup_steps // 2
            rate, _ = run(first, on_step)
            stretch_cluster_clock(prof, (1000.0 / rate) / args.native_step_ms)
            run(args.warmup_steps - first, on_step)
        else:
            run(args.warmup_steps, on_step)  # discovery and the sampled tier's first detail steps
        mark("start")
        run(args.child_steps, on_step)
        mark("loop")
    mark("stop")


def stretch_cluster_clock(prof, scale: float) -> None:
    """Stretches the cross-rank view's clock-driven intervals by `scale`
    (the leader's store poll, the follower's queue wait, the publish
    interval), so that under Valgrind each step sees them as often as a
    native step would."""
    from gpuutil.torch import _cluster

    _cluster._POLL_S *= scale
    for c in prof._collectors:
        if getattr(c, "name", "") == "cluster":
            c._interval_ns = int(c._interval_ns * scale)
    print(f"time scale {scale:.1f}", file=sys.stderr, flush=True)


def calibrate(args: argparse.Namespace) -> float:
    """The job's native milliseconds per step (baseline loop, every rank at
    once, no Valgrind): the mean over the ranks."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen(
            [sys.executable, __file__, "--child", "--setting", "baseline", "--calibrate", "200", "--loop", args.loop,
             "--marker", args.marker, "--extra-ops", str(args.extra_ops), "--pre-steps", str(args.pre_steps),
             "--ranks", str(args.ranks), "--rank", str(rank), "--store-file", os.path.join(tmp, "store")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(args.ranks)]
        per_rank = []
        for proc in procs:
            out, err = proc.communicate()
            found = re.search(r"^ms_per_step (\S+)$", out, re.M)
            if proc.returncode != 0 or not found:
                sys.exit(f"bench_torch_instructions: the native calibration run failed:\n{err[-2000:]}")
            per_rank.append(float(found.group(1)))
        return sum(per_rank) / len(per_rank)


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


def instructions(setting: str, steps: int, args: argparse.Namespace) -> "list[dict[str, int]]":
    """The windows of one run, one dict per rank (one rank unless --ranks)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if args.mkl_isa != "native":
            env["MKL_ENABLE_INSTRUCTIONS"] = args.mkl_isa
        procs = []
        for rank in range(args.ranks):
            out_dir = os.path.join(tmp, f"rank{rank}")
            os.mkdir(out_dir)
            cmd = [
                "valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-line=no", "--compress-strings=no",
                "--separate-threads=yes", f"--callgrind-out-file={out_dir}/cg.%p",
                sys.executable, __file__, "--child", "--setting", setting, "--child-steps", str(steps),
                "--loop", args.loop, "--batch-steps", str(args.batch_steps), "--marker", args.marker,
                "--extra-ops", str(args.extra_ops), "--warmup-steps", str(args.warmup_steps),
                "--pre-steps", str(args.pre_steps), "--ranks", str(args.ranks), "--rank", str(rank),
                "--store-file", os.path.join(tmp, "store"), "--native-step-ms", str(args.native_step_ms),
            ] + (["--dist"] if args.dist else [])
            log = open(os.path.join(tmp, f"rank{rank}.log"), "w+")
            procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env), log))
        per_rank = []
        for rank, (proc, log) in enumerate(procs):
            code = proc.wait()
            log.seek(0)
            text = log.read()
            log.close()
            who = f"{setting} ({steps} steps{f', rank {rank}' if args.ranks > 1 else ''})"
            if code != 0:
                for other, _ in procs:
                    other.kill()
                sys.exit(f"bench_torch_instructions: {who} failed:\n{text[-2000:]}")
            found = windows_of(os.path.join(tmp, f"rank{rank}"))
            missing = [w for w in WINDOWS if w not in found]
            if missing:
                sys.exit(f"bench_torch_instructions: {who}: no callgrind dump for {missing}:\n{text[-2000:]}")
            scale = re.search(r"^time scale (\S+)$", text, re.M)
            if scale:
                found["time_scale"] = float(scale.group(1))
            per_rank.append(found)
        return per_rank


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop", default="small", choices=("small", "wide", "mlp", "transformer"))
    ap.add_argument("--dist", action="store_true", help="torch.distributed initialised (gloo, one rank)")
    ap.add_argument("--ranks", type=int, default=1,
                    help="N >= 2: an N-rank DistributedDataParallel job over gloo, each rank counted")
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
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--store-file", help=argparse.SUPPRESS)
    ap.add_argument("--calibrate", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--native-step-ms", type=float, default=0.0, help=argparse.SUPPRESS)
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
    if args.ranks < 1:
        ap.error("--ranks must be >= 1")
    if args.ranks > 1 and args.dist:
        ap.error("--dist is the one-rank process group; --ranks N starts its own")
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"unknown setting(s) {unknown}; choose from {', '.join(SETTINGS)}")
    runs = [(setting, steps) for setting in settings for steps in counts_of]
    found: "dict[tuple[str, int], list[dict[str, int]]]" = {}
    with tempfile.TemporaryDirectory() as marker_dir:
        args.marker = build_marker(marker_dir)
        if args.ranks > 1:
            args.native_step_ms = calibrate(args)
            print(f"native step: {args.native_step_ms:.3f} ms (both ranks, baseline, no Valgrind)", flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(instructions, setting, steps, args): (setting, steps) for setting, steps in runs}
            for n_done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                setting, steps = futures[fut]
                found[(setting, steps)] = fut.result()
                for rank, w in enumerate(found[(setting, steps)]):
                    who = f" rank {rank}" if args.ranks > 1 else ""
                    scale = f" (time scale {w['time_scale']:.1f})" if "time_scale" in w else ""
                    print(f"[{n_done}/{len(runs)}] {setting:15s} {steps:4d} steps{who}: start {w['start']:,}, "
                          f"loop {w['loop']:,}, stop {w['stop']:,}, other threads {w['others']:,} instructions"
                          f"{scale}", flush=True)
    for rank in range(args.ranks):
        report(args, settings, counts_of, {key: ranks[rank] for key, ranks in found.items()},
               f", rank {rank} of {args.ranks}" if args.ranks > 1 else "")
    return 0


def report(args: argparse.Namespace, settings: "list[str]", counts_of: "list[int]",
           found: "dict[tuple[str, int], dict[str, int]]", who: str) -> None:
    """The fits and the table of one rank's counts."""
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
    if args.ranks > 1:
        label += f" (DistributedDataParallel, gloo, {args.ranks} ranks){who}"
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
