"""``gpuutil analyze`` when it fans out (gpuutil.cli): the options only the
fan-out takes, and running it: a cluster report as text (the slowest and
fastest ranks and the stragglers) or JSON, exit 2 with one line naming the
file or rank for a bad input set, exit 1 when an output cannot be written.
"""

from __future__ import annotations

import sys

from gpuutil._cli_common import _emit, _error, _positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import argparse
    from typing import Any, Dict, List

#: The fan-out's attributes of the parsed arguments, and their defaults (None: not given).
OPTIONS = ("jobs", "executor", "scheduler", "address", "on_error", "rank_from_name", "world_size", "ranks_out")
_FINANCE = ("usd_per_gpu_hour", "samples_per_step", "tokens_per_step", "quality")


def add_arguments(a: "argparse.ArgumentParser") -> None:
    """The fan-out's options on `gpuutil analyze`'s parser."""
    g = a.add_argument_group(
        "many ranks (the fan-out: used for URLs, glob patterns, more than 8 rank files, or any option below; "
        "docs/distributed.md)")
    g.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                   help="local worker processes (default: the CPUs available); worker count of a local Dask/Ray")
    g.add_argument("--executor", choices=("local", "dask", "ray"), default=None,
                   help="where ranks are analysed (default: local, a process pool here)")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address for --executor dask (default: a local cluster)")
    g.add_argument("--address", default=None, metavar="ADDRESS",
                   help="Ray cluster address for --executor ray (default: a local runtime)")
    g.add_argument("--on-error", choices=("fail", "skip"), default=None,
                   help="an unreadable file or a missing rank: fail (default, exit 2) or skip the rank")
    g.add_argument("--rank-from-name", default=None, metavar="REGEX",
                   help="take each file's rank from its name (the first group of REGEX), not distributedInfo")
    g.add_argument("--world-size", type=_positive_int, default=None, metavar="N",
                   help="the job's rank count (default: the traces' distributedInfo.world_size)")
    g.add_argument("--ranks-out", default=None, metavar="FILE",
                   help="also write the per-rank, per-step table to FILE (.jsonl, or .parquet with pyarrow)")
    g.add_argument("--no-progress", action="store_true", help="no progress line (shown only on a terminal)")


def options_of(args: "argparse.Namespace") -> "Dict[str, Any]":
    """The fan-out options given on the command line (absent ones None)."""
    return {k: getattr(args, k, None) for k in OPTIONS}


def run(args: "argparse.Namespace", paths: "List[str]") -> int:
    """Runs the fan-out for `gpuutil analyze`; the exit code."""
    import json

    from gpuutil.fanout import FanoutError, analyze_ranks
    from gpuutil.fanout._output import render_text

    given = [f"--{k.replace('_', '-')}" for k in _FINANCE if getattr(args, k, None) is not None]
    if given:
        return _error(f"{given[0]} applies to one job's report, not to the cluster report of many ranks", 2)
    if "-" in paths:
        return _error("standard input (-) cannot be fanned out: name the rank files", 2)
    opts = options_of(args)
    opts["executor"] = opts["executor"] or "local"
    opts["on_error"] = opts["on_error"] or "fail"
    try:
        report = analyze_ranks(
            paths, progress=False if getattr(args, "no_progress", False) else None,
            flops_per_step=args.flops_per_step, dtype=args.dtype, peak_tflops=args.peak_tflops,
            max_memory=args.max_memory, **opts)
    except FanoutError as e:
        return _error(str(e), 2)
    except OSError as e:  # --ranks-out
        return _error(str(e), 1)
    except ValueError as e:
        return _error(str(e), 2)
    if args.json or args.indent is not None:
        if args.indent is None:
            out = json.dumps(report, separators=(",", ":")) + "\n"
        else:
            out = json.dumps(report, indent=args.indent) + "\n"
    else:
        out = render_text(report)
    code = _emit(out, args.output)
    sys.stdout.flush()
    return code
