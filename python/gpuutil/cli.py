"""The ``gpuutil`` command line (console script declared in pyproject.toml).

    gpuutil analyze TRACE... [--json] [--indent N] [--flops-per-step F]
                             [--dtype D] [--peak-tflops T] [-o FILE]
    gpuutil --version

``analyze`` reads PyTorch profiler / Kineto traces (one per rank) and prints
a per-step table, a per-device summary, the top finding and the non-zero
diagnostics; ``--json`` prints the gpuutil.report/1 JSON instead. Exit codes:
0 success, 2 bad arguments or an unreadable input (one stderr line
"gpuutil: error: ..."), 1 the output file could not be written. See
docs/cli.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import List, Optional, Sequence

from gpuutil import _api
from gpuutil._table import render_report

_PROGRESS_MIN_BYTES = 5 * 1024 * 1024


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return v


def _indent(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0 or v > 16:
        raise argparse.ArgumentTypeError(f"must be between 0 and 16: {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    parser = argparse.ArgumentParser(
        prog="gpuutil",
        description="Step-level GPU utilization accounting: where every nanosecond of each step went.",
    )
    parser.add_argument("--version", action="version", version=f"gpuutil {_api.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    a = sub.add_parser(
        "analyze",
        help="analyse PyTorch profiler / Kineto trace files",
        description="Analyse PyTorch profiler / Kineto traces (.json or .json.gz), one file per rank.",
    )
    a.add_argument("traces", nargs="+", metavar="TRACE", help="trace file; several for a multi-rank job")
    a.add_argument("--json", action="store_true", help=f"print the {_api.REPORT_SCHEMA} JSON report")
    a.add_argument("--indent", type=_indent, default=None, metavar="N",
                   help="pretty-print the JSON with N spaces (implies --json; default: one line)")
    a.add_argument("--flops-per-step", type=_positive_float, default=None, metavar="F",
                   help="FLOPs one step performs per rank, for MFU")
    a.add_argument("--dtype", choices=_api.DTYPES, default="bf16",
                   help="datatype whose peak FLOP/s MFU is measured against (default: bf16)")
    a.add_argument("--peak-tflops", type=_positive_float, default=None, metavar="T",
                   help="peak dense TFLOP/s per device, overriding the built-in table")
    a.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="write the output to FILE instead of stdout")
    return parser


def _error(message: str, code: int) -> int:
    one_line = " ".join(str(message).split())
    print(f"gpuutil: error: {one_line}", file=sys.stderr)
    return code


def _progress(paths: Sequence[str]) -> None:
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return
    for p in paths:
        try:
            size = os.path.getsize(p)
        except OSError:
            continue
        if size > _PROGRESS_MIN_BYTES:
            print(f"importing {p} ({size / 1e6:.0f} MB)...", file=sys.stderr, flush=True)


def _analyze(args: argparse.Namespace) -> int:
    paths = [os.fsdecode(p) for p in args.traces]
    as_json = args.json or args.indent is not None
    _progress(paths)
    try:
        text = _api.analyze_json(
            paths,
            flops_per_step=args.flops_per_step,
            dtype=args.dtype,
            peak_tflops=args.peak_tflops,
            indent=args.indent if args.indent is not None else -1,
        )
    except _api.TraceError as e:
        return _error(str(e), 2)
    if as_json:
        out = text + "\n"
    else:
        out = render_report(json.loads(text))
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(out)
        except OSError as e:
            return _error(f"cannot write {args.output}: {e.strerror or e}", 1)
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``gpuutil`` console script; returns the exit code."""
    # Never die on a terminal that cannot show a character of a kernel name.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="replace")
            except (ValueError, OSError):
                pass
    args = build_parser().parse_args(argv)
    try:
        if args.command == "analyze":
            return _analyze(args)
    except BrokenPipeError:
        # `gpuutil analyze t.json.gz | head`: stop quietly.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - suppress the flush error at exit
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        return 130
    return _error(f"unknown command {args.command!r}", 2)


if __name__ == "__main__":
    sys.exit(main())
