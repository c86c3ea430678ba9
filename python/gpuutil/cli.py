"""The ``gpuutil`` command line (console script declared in pyproject.toml).

    gpuutil analyze TRACE... [--json] [--indent N] [--flops-per-step F]
                             [--dtype D] [--peak-tflops T] [--max-memory SIZE]
                             [--comm-kernels NAMES] [-o FILE]
    gpuutil compare BASE CURRENT [--metric M]... [--max-regression PCT] [--json]
    gpuutil export {perfetto,html,prometheus} INPUT... [-o FILE]
    gpuutil fleet --prometheus URL [--since 7d] [--html FILE] [-o FILE]
    gpuutil --version

``analyze`` reads PyTorch profiler / Kineto traces (one per rank) and prints
a per-step table, a per-device summary, the top finding and the non-zero
diagnostics; ``--json`` prints the gpuutil.report/1 JSON instead.
``compare`` is the regression gate (compare.py): it prints a metric diff
table and exits 1 when a gated metric regressed past the threshold.
``fleet`` queries a Prometheus server with gpuutil's fleet rules loaded
(allocation, OEE, cost per unit per job; gpuutil/fleet/, docs/fleet.md).
``export`` writes a Perfetto/Chrome trace (from trace files), a
self-contained HTML report or a Prometheus text exposition (from a report
JSON, a steps JSONL, or trace files); see docs/exports.md. Exit codes:
0 success, 2 bad arguments or an unreadable input (one stderr line
"gpuutil: error: ..."), 1 the output file could not be written. See
docs/cli.md.
"""

from __future__ import annotations

import os
import sys

from gpuutil import _api
from gpuutil._cli_common import (_emit, _error, _positive_float, _streamed, _trace_error_text, _type_error,
                                 _unit_float, _warn)

# Start-up time matters here (a CLI that reads a small trace is mostly
# start-up): json, typing, the table renderer and the exporters are imported
# where they are used, after the trace is read.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import argparse
    from typing import Any, Dict, List, Optional, Sequence


def render_report(report: "Dict[str, Any]", finance: "Any" = None) -> str:
    from gpuutil._table import render_report as render

    return render(report, finance) if finance is not None else render(report)

_PROGRESS_MIN_BYTES = 5 * 1024 * 1024


def _indent(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise _type_error(f"not an integer: {text!r}") from None
    if v < 0 or v > 16:
        raise _type_error(f"must be between 0 and 16: {text!r}")
    return v


def build_parser(only: "Optional[str]" = None) -> "argparse.ArgumentParser":
    """The argument parser (exposed for docs and tests). ``only``: build just
    that command's sub-parser (main() does, when the command is known, so
    that `gpuutil analyze` does not import what `compare` needs)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="gpuutil",
        description="Step-level GPU utilization accounting: where every nanosecond of each step went.",
    )
    parser.add_argument("--version", action="version", version=f"gpuutil {_api.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if only in ("compare", "export", "fleet"):
        from gpuutil import _cli_commands

        _cli_commands.ADD_PARSER[only](sub)
        return parser
    a = sub.add_parser(
        "analyze",
        help="analyse PyTorch profiler / Kineto trace files",
        description="Analyse PyTorch profiler / Kineto traces (.json or .json.gz), one file per rank.",
    )
    a.add_argument("traces", nargs="+", metavar="TRACE", help="trace file (- reads standard input); several for a multi-rank job")
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
    a.add_argument("--max-memory", type=_memory_size, default=None, metavar="SIZE",
                   help="memory the import may hold, e.g. 512M, 2G, unlimited (default: 768M)")
    a.add_argument("--comm-kernels", default=None, metavar="NAMES",
                   help="comma-separated kernel-name substrings of your own communication kernels "
                        "(besides NCCL, DeepEP, symmetric memory...; default: $GPUUTIL_COMM_KERNELS)")
    fin = a.add_argument_group("finance (table output)")
    fin.add_argument("--usd-per-gpu-hour", type=_positive_float, default=None, metavar="USD",
                     help="price of one GPU-hour: adds cost, idle cost and cost per unit")
    fin.add_argument("--samples-per-step", type=_positive_float, default=None, metavar="N",
                     help="samples the whole job processes per step (global batch)")
    fin.add_argument("--tokens-per-step", type=_positive_float, default=None, metavar="N",
                     help="tokens the whole job processes per step")
    fin.add_argument("--quality", type=_unit_float, default=None, metavar="Q",
                     help="fraction of useful output, 0-1, for OEE = availability x performance x quality")
    from gpuutil.fanout import _cli as fanout_cli

    fanout_cli.add_arguments(a)
    if only is None:
        from gpuutil import _cli_commands

        for name in ("compare", "export", "fleet"):
            _cli_commands.ADD_PARSER[name](sub)
    return parser


def _progress(paths: Sequence[str]) -> bool:
    """Announces large files on a terminal's stderr; whether stderr is one
    (the importer then announces its waits for an input too)."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return False
    for p in paths:
        try:
            size = os.path.getsize(p)
        except OSError:
            continue
        if size > _PROGRESS_MIN_BYTES:
            print(f"importing {p} ({size / 1e6:.0f} MB)...", file=sys.stderr, flush=True)
    return True


def _own_reports(paths: List[str]) -> Optional[Dict[str, Any]]:
    """gpuutil's own output (a report JSON or a steps JSONL) as one report,
    or None when the input is trace files."""
    from gpuutil import _merge

    if len(paths) != 1 or paths[0] == "-":
        return None
    try:
        with open(paths[0], "rb") as f:
            head = f.read(512)
    except OSError:
        return None  # the trace path reports it
    if not _merge._is_file_of_reports(head):
        return None
    from gpuutil import _run_file

    notes: List[str] = []
    try:
        merged = _merge.merge_reports(_run_file.read_reports(paths[0], cluster_records=True, notes=notes))
    except _run_file.RunError as e:
        raise _OwnReportsError(str(e)) from None
    except ValueError as e:  # a report the core cannot fold (run totals)
        raise _OwnReportsError(f"cannot read {paths[0]}: {e}") from None
    _warn(notes)
    return merged


class _OwnReportsError(Exception):
    """gpuutil's own reports that cannot be read (one line)."""


def _memory_size(text: str) -> int:
    """--max-memory SIZE: bytes (0: no budget)."""
    try:
        return _api.parse_memory_size(text)
    except ValueError as e:
        raise _type_error(str(e)) from None


def _analyze(args: "argparse.Namespace") -> int:
    paths = [os.fsdecode(p) for p in args.traces]
    comm = getattr(args, "comm_kernels", None)
    if comm is not None:
        # For this process and the fan-out's local workers (they read the variable).
        os.environ["GPUUTIL_COMM_KERNELS"] = comm
        _api.set_communication_kernels([p.strip() for p in comm.split(",") if p.strip()])
    if paths.count("-") > 1:
        return _error("standard input (-) can be given once", 2)
    from gpuutil.fanout import _cli as fanout_cli
    from gpuutil.fanout._run import wants_fanout

    if wants_fanout(paths, fanout_cli.options_of(args)):  # URLs, globs, many ranks (docs/distributed.md)
        return fanout_cli.run(args, paths)
    as_json = args.json or args.indent is not None
    try:
        own = None if any(_streamed(p) for p in paths) else _own_reports(paths)
    except _OwnReportsError as e:
        return _error(str(e), 2)
    if own is not None:  # gpuutil's own reports: shown as they are (nothing to re-analyse)
        import json

        from gpuutil.finance import FinanceInputs, finance_figures

        own_finance = FinanceInputs(args.usd_per_gpu_hour, args.samples_per_step, args.tokens_per_step, args.quality)
        if as_json:
            if own_finance.any():  # as for traces: the figures the table prints
                own = dict(own, finance=finance_figures(own, own_finance))
            return _emit(json.dumps(own, indent=args.indent) + "\n", args.output)
        return _emit(render_report(own, own_finance if own_finance.any() else None), args.output)
    tty = _progress(paths)
    try:
        text = _api.analyze_json(
            paths,
            flops_per_step=args.flops_per_step,
            dtype=args.dtype,
            peak_tflops=args.peak_tflops,
            indent=args.indent if args.indent is not None else -1,
            max_memory=args.max_memory,
            progress=tty,
        )
    except _api.TraceError as e:
        return _error(_trace_error_text(e, paths), 2)
    import json

    from gpuutil.finance import FinanceInputs, finance_figures

    finance = FinanceInputs(args.usd_per_gpu_hour, args.samples_per_step, args.tokens_per_step, args.quality)
    if as_json:
        if finance.any():  # the figures the table would print, as the additive "finance" key
            doc = json.loads(text)
            doc["finance"] = finance_figures(doc, finance)
            text = json.dumps(doc, indent=args.indent)
        out = text + "\n"
    else:
        out = _cli_flags(render_report(json.loads(text), finance))
    return _emit(out, args.output)


# The C++ core words hints for the Python API ("pass peak_tflops"); on the
# command line the same option is a flag.
_FLAG_OF = {"peak_tflops": "--peak-tflops", "flops_per_step": "--flops-per-step", "dtype=": "--dtype "}


def _cli_flags(text: str) -> str:
    for keyword, flag in _FLAG_OF.items():
        text = text.replace(f"pass {keyword}", f"pass {flag}").replace(f"({keyword}", f"({flag}")
    return text

# `gpuutil analyze` given only traces and the options below is parsed
# without argparse, whose imports (re, gettext, locale, shutil) are about
# 12 ms of a 40 ms start. Anything else - another option, an abbreviation,
# a repeated option, `-o=FILE`, a value starting with `-`, traces not in
# one run, a bad value - returns None and goes to argparse, which parses or
# words it; so the fast path never accepts what argparse would refuse, and
# yields the same attributes when it accepts (tests/python/test_cli.py).
_FAST_FLAGS = {"--json": "json"}
_FAST_VALUES = {
    "--indent": ("indent", "_indent"),
    "--flops-per-step": ("flops_per_step", "_positive_float"),
    "--dtype": ("dtype", None),
    "--peak-tflops": ("peak_tflops", "_positive_float"),
    "-o": ("output", None),
    "--output": ("output", None),
    "--max-memory": ("max_memory", "_memory_size"),
    "--usd-per-gpu-hour": ("usd_per_gpu_hour", "_positive_float"),
    "--samples-per-step": ("samples_per_step", "_positive_float"),
    "--tokens-per-step": ("tokens_per_step", "_positive_float"),
    "--quality": ("quality", "_unit_float"),
}


def _fast_analyze_args(raw: "Sequence[str]") -> "Optional[Any]":
    """The `analyze` arguments argparse would give, or None (see above)."""
    if not raw or raw[0] != "analyze":
        return None
    values: "Dict[str, Any]" = {
        "command": "analyze", "traces": [], "json": False, "indent": None, "flops_per_step": None,
        "dtype": "bf16", "peak_tflops": None, "output": None, "max_memory": None, "usd_per_gpu_hour": None,
        "samples_per_step": None, "tokens_per_step": None, "quality": None, "comm_kernels": None,
        # the fan-out's options (gpuutil.fanout._cli), not taken here
        "jobs": None, "executor": None, "scheduler": None, "address": None, "on_error": None,
        "rank_from_name": None, "world_size": None, "ranks_out": None, "no_progress": False,
    }
    seen = set()
    traces_state = 0  # 0: none yet, 1: in the run of traces, 2: after it
    tokens = iter(raw[1:])
    for token in tokens:
        if token == "-" or not token.startswith("-"):
            if traces_state == 2:
                return None
            traces_state = 1
            values["traces"].append(token)
            continue
        if traces_state == 1:
            traces_state = 2
        name, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        dest = _FAST_FLAGS.get(name)
        if dest is not None:
            if eq or dest in seen:
                return None
            seen.add(dest)
            values[dest] = True
            continue
        spec = _FAST_VALUES.get(name)
        if spec is None or spec[0] in seen:
            return None
        dest, convert = spec
        seen.add(dest)
        if not eq:
            value = next(tokens, None)
            if value is None or value.startswith("-"):
                return None
        if dest == "dtype":
            if value not in _api.DTYPES:
                return None
        elif convert is not None:
            try:
                value = globals()[convert](value)
            except Exception:  # argparse words it
                return None
        values[dest] = value
    if not values["traces"]:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(**values)


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
    raw = sys.argv[1:] if argv is None else argv
    args = _fast_analyze_args(raw)
    if args is None:
        command = raw[0] if raw and raw[0] in ("analyze", "compare", "export", "fleet") else None
        args = build_parser(command).parse_args(argv)
    try:
        if args.command == "analyze":
            return _analyze(args)
        if args.command in ("compare", "export", "fleet"):
            from gpuutil import _cli_commands

            return _cli_commands.RUN[args.command](args)
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
