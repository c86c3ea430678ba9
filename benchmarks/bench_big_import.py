#!/usr/bin/env python3
"""Whole-process CPU time and peak RSS of `gpuutil analyze` on a large trace.

Runs `python -m gpuutil analyze TRACE -o OUT` in child processes, rounds
interleaved between the builds and settings compared, and reads each
child's user + system CPU time and peak RSS from wait4(). Prints one line
per run (progress), then per setting the medians, events per CPU-second
(events = the trace's traceEvents elements, counted once) and peak RSS as a
multiple of the uncompressed trace.

Settings:
  current          this checkout's gpuutil (as installed in this interpreter)
  current-whole    the same, every document read whole (no streaming):
                   GPUUTIL_IMPORT_STREAM_MIN_MB set very high
  baseline         --baseline DIR on PYTHONPATH (a gpuutil package built from
                   an older commit, e.g. before the streaming import)
  baseline-1t      the baseline with GPUUTIL_IMPORT_THREADS=1

Usage:
  bench_big_import.py TRACE [--rounds 3] [--baseline DIR]
The large trace comes from benchmarks/make_big_trace.py.
"""

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile


def count_events(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    n = 0
    size = 0
    with opener(path, "rb") as f:
        tail = b""
        while True:
            block = f.read(64 << 20)
            if not block:
                break
            size += len(block)
            data = tail + block
            n += data.count(b'"ph":')
            tail = data[-8:]
            n -= tail.count(b'"ph":')
    return n, size


def run(cmd, env):
    pid = os.posix_spawn(cmd[0], cmd, env)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", help="a directory holding an older gpuutil package")
    p.add_argument("--settings", default=None, help="comma-separated subset of the settings")
    args = p.parse_args(argv)

    events, size_bytes = count_events(args.trace)
    print(f"trace {args.trace}: {size_bytes / 1e6:.1f} MB uncompressed, {events} events", flush=True)
    base_env = dict(os.environ)
    base_env.pop("PYTHONPATH", None)
    settings = {"current": {}, "current-whole": {"GPUUTIL_IMPORT_STREAM_MIN_MB": "1000000"}}
    if args.baseline:
        settings["baseline"] = {"PYTHONPATH": args.baseline}
        settings["baseline-1t"] = {"PYTHONPATH": args.baseline, "GPUUTIL_IMPORT_THREADS": "1"}
    if args.settings:
        wanted = args.settings.split(",")
        unknown = [w for w in wanted if w not in settings]
        if unknown:
            p.error(f"unknown setting(s) {unknown}; known: {sorted(settings)}")
        settings = {k: v for k, v in settings.items() if k in wanted}
    results = {name: [] for name in settings}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-m", "gpuutil", "analyze", args.trace, "-o", out]
        for r in range(args.rounds):
            for name, extra in settings.items():
                env = dict(base_env, **extra)
                code, cpu_s, rss = run(cmd, env)
                if code not in (0, 1):
                    sys.exit(f"bench_big_import: {name} exited {code}")
                results[name].append((cpu_s, rss))
                print(f"round {r + 1}/{args.rounds} {name:14s} CPU {cpu_s:6.2f} s  peak RSS {rss / 1e6:7.0f} MB",
                      flush=True)
    print(f"\n{'setting':14s} {'CPU s (median)':>15s} {'M events/CPU-s':>15s} {'peak RSS MB':>12s} {'RSS/trace':>10s}")
    for name, runs in results.items():
        cpu = statistics.median(c for c, _ in runs)
        rss = statistics.median(m for _, m in runs)
        print(f"{name:14s} {cpu:15.2f} {events / cpu / 1e6:15.3f} {rss / 1e6:12.0f} {rss / size_bytes:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
