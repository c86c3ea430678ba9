#!/usr/bin/env python3
"""Peak RSS of `gpuutil compare` and `export html|prometheus` on a large
uncompressed trace, next to `gpuutil analyze` on the same trace.

A trace given to compare or to the report exporters is recognised from its
first bytes and analysed by the C++ core from its path (gpuutil/_run_file.py),
so these commands should need about what `analyze` needs, not a Python
parse of the whole document on top. Each command runs as a child process
(`python -m gpuutil ...`), rounds interleaved; its peak RSS and user +
system CPU time are read from wait4(). Prints one line per run, then the
median per command and its ratio to analyze's peak RSS.

Usage:
  bench_compare_rss.py TRACE [--rounds 3] [--baseline DIR]
--baseline DIR: also run each command with DIR first on PYTHONPATH (a
gpuutil package from an older commit), labelled "baseline".
The large trace comes from benchmarks/make_big_trace.py.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile


def run(argv, env):
    """(peak RSS in MB, CPU seconds) of one child process."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # compare exits 1 on a regression
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err.strip()}")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=None, metavar="DIR")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        subprocess.run([py, "-m", "gpuutil", "analyze", args.trace, "--json", "-o", report], check=True)
        commands = {
            "analyze": ["analyze", args.trace, "-o", os.devnull],
            "compare TRACE REPORT": ["compare", args.trace, report],
            "export prometheus": ["export", "prometheus", args.trace, "-o", os.devnull],
            "export html": ["export", "html", args.trace, "-o", os.devnull],
        }
        settings = {"current": dict(os.environ)}
        if args.baseline:
            env = dict(os.environ)
            env["PYTHONPATH"] = args.baseline + os.pathsep + env.get("PYTHONPATH", "")
            settings["baseline"] = env
        results = {}
        for r in range(args.rounds):
            for setting, env in settings.items():
                for name, cmd in commands.items():
                    rss, cpu = run([py, "-m", "gpuutil", *cmd], env)
                    results.setdefault((setting, name), []).append((rss, cpu))
                    print(f"round {r + 1} {setting:8s} {name:22s} peak RSS {rss:7.1f} MB  CPU {cpu:6.2f} s",
                          flush=True)
    size_mb = os.path.getsize(args.trace) / 1e6
    print(f"\ntrace {args.trace}: {size_mb:.1f} MB; medians over {args.rounds} rounds")
    for setting in settings:
        base_rss = statistics.median(x[0] for x in results[(setting, "analyze")])
        for name in commands:
            rss = statistics.median(x[0] for x in results[(setting, name)])
            cpu = statistics.median(x[1] for x in results[(setting, name)])
            print(f"{setting:8s} {name:22s} peak RSS {rss:7.1f} MB ({rss / base_rss:.2f}x analyze)  CPU {cpu:6.2f} s")


if __name__ == "__main__":
    main()
