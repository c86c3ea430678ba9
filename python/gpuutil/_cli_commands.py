"""The ``gpuutil`` subcommands besides ``analyze`` (gpuutil.cli): ``export``
(Perfetto, HTML, Prometheus), ``compare`` (the regression gate,
gpuutil.compare) and ``fleet`` (a Prometheus server's fleet figures,
gpuutil.fleet): each one's argument parser and what it runs. Imported only
when one of them is asked for, so ``gpuutil analyze`` starts without them.
"""

from __future__ import annotations

import os
import sys

from gpuutil import _api
from gpuutil._cli_common import _emit, _error, _non_negative_float, _streamed, _trace_error_text, _type_error, _warn

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import argparse
    from typing import Any, Dict, List


def _add_export_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    e = sub.add_parser(
        "export",
        help="export a run as a Perfetto trace, an HTML report or Prometheus metrics",
        description="perfetto: Chrome trace JSON of the timeline with an idle-cause track (INPUT: trace files, "
        "one per rank). html: self-contained HTML report with plots. prometheus: text exposition. "
        "html/prometheus INPUT: a report JSON, a steps JSONL, or trace files.",
    )
    e.add_argument("format", choices=("perfetto", "html", "prometheus"), help="output format")
    e.add_argument("inputs", nargs="+", metavar="INPUT", help="trace file(s), report JSON or steps JSONL")
    e.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of stdout")
    e.add_argument("--host", default=None, help="host label for prometheus (default: this host's name)")


def _load_reports(paths: List[str]) -> List[Dict[str, Any]]:
    from gpuutil import compare

    if len(paths) == 1:
        notes: List[str] = []
        reports = compare.load_run(paths[0], cluster_records=True, notes=notes)
        _warn(notes)
        return reports
    try:
        return [_api.analyze(paths)]
    except _api.TraceError as e:
        raise compare.RunError(str(e)) from None


def _export(args: "argparse.Namespace") -> int:
    from gpuutil import compare

    paths = [os.fsdecode(p) for p in args.inputs]
    try:
        if args.format == "perfetto":
            from gpuutil import _merge
            from gpuutil.export import perfetto

            for p in paths:
                if _streamed(p):
                    continue  # read once, by the importer
                try:
                    with open(p, "rb") as f:
                        own = _merge._is_file_of_reports(f.read(512))
                except OSError:
                    own = False
                if own:
                    return _error(f"cannot export {p} to perfetto: it holds gpuutil reports, not a trace (the "
                                  "timeline needs the trace's events); export html or prometheus take reports", 2)

            out = perfetto.chrome_trace_json(paths) + "\n"
        elif args.format == "html":
            from gpuutil.export import html

            from gpuutil.fanout._output import read_cluster_report

            fanned = read_cluster_report(paths[0]) if len(paths) == 1 and not _streamed(paths[0]) else None
            out = html.render_html([fanned] if fanned is not None else _reports_of(paths),
                                   title=f"gpuutil report: {os.path.basename(paths[0])}")
        else:
            from gpuutil.export import prometheus

            try:
                out = prometheus.PrometheusMetrics(host=args.host).add_all(_reports_of(paths)).exposition()
            except prometheus.PrometheusClientMissing as e:
                return _error(str(e), 2)
    except (_api.TraceError, compare.RunError) as e:
        return _error(_trace_error_text(e, paths), 2)
    except ValueError as e:  # step reports the core cannot fold into run totals (html)
        return _error(f"cannot read {paths[0]}: {e}", 2)
    return _emit(out, args.output)


def _reports_of(paths: List[str]) -> List[Dict[str, Any]]:
    """The reports export html/prometheus shows: `-`, a FIFO or a pipe is a
    trace read once by the importer; files may be gpuutil's own reports."""
    if any(_streamed(p) for p in paths):
        return [_api.analyze(paths)]
    return _load_reports(paths)


def _add_compare_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from gpuutil import compare

    c = sub.add_parser(
        "compare",
        help="compare two runs metric by metric; exit 1 on a regression (a CI gate)",
        description="Compare two runs (report JSON, steps JSONL, or trace) metric by metric. "
        "Exit 0: no gated metric regressed past the threshold; 1: a regression; 2: unreadable input.",
    )
    c.add_argument("base", metavar="BASE", help="baseline run: report JSON, steps JSONL, or Kineto trace")
    c.add_argument("current", metavar="CURRENT", help="run under test, same formats")
    c.add_argument("--metric", action="append", choices=sorted(compare.METRICS), default=None,
                   metavar="M", help="metric to gate on (repeatable; default: "
                   + ", ".join(compare.DEFAULT_GATED) + "); one of: " + ", ".join(compare.METRICS))
    c.add_argument("--max-regression", type=_non_negative_float, default=5.0, metavar="PCT",
                   help="allowed regression: percent for *_ms metrics, percentage points for *_pct (default 5)")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _compare(args: "argparse.Namespace") -> int:
    import json

    from gpuutil import compare

    notes: List[str] = []
    try:
        base = compare.run_metrics(compare.load_run(os.fsdecode(args.base), notes=notes))
        cur = compare.run_metrics(compare.load_run(os.fsdecode(args.current), notes=notes))
    except compare.RunError as e:
        return _error(str(e), 2)
    _warn(notes)
    gated = tuple(args.metric) if args.metric else compare.DEFAULT_GATED
    labels = (f"BASE ({os.fsdecode(args.base)})", f"CURRENT ({os.fsdecode(args.current)})")
    diffs = compare.diff_metrics(base, cur, gated, args.max_regression, labels)
    problems = compare.gate_problems(diffs)
    if problems:  # fails closed: a gate that cannot compare a gated metric is no pass
        return _error("; ".join(problems), 2)
    if args.json:
        sys.stdout.write(json.dumps(compare.diffs_to_json(diffs, args.max_regression), indent=2) + "\n")
    else:
        sys.stdout.write(compare.render_diff(diffs, args.max_regression))
    sys.stdout.flush()
    return 1 if any(d.regressed for d in diffs) else 0


def _since(text: str) -> str:
    from gpuutil.fleet.queries import duration_s

    try:
        duration_s(text)
    except ValueError as e:
        raise _type_error(str(e)) from None
    return text


def _add_fleet_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    f = sub.add_parser(
        "fleet",
        help="allocation, OEE and cost per unit per job, from a Prometheus server (docs/fleet.md)",
        description="Query a Prometheus server that scrapes gpuutil's exporters (and dcgm-exporter) with "
        "deploy/prometheus/gpuutil-rules.yml loaded: a table of the fleet's allocation and, per job, GPU-hours "
        "held and idle, OEE and its factors, cost per unit and the top idle cause. Exit 2: a bad URL, an "
        "unreachable server or no data.",
    )
    f.add_argument("--prometheus", required=True, metavar="URL", help="the server, e.g. http://prometheus:9090")
    f.add_argument("--since", type=_since, default="7d", metavar="DURATION",
                   help="the window, a Prometheus duration ending now (default: 7d)")
    f.add_argument("--html", default=None, metavar="FILE",
                   help="also write a self-contained HTML page with plots to FILE")
    f.add_argument("-o", "--output", default=None, metavar="FILE", help="write the table to FILE instead of stdout")


def _fleet(args: "argparse.Namespace") -> int:
    from gpuutil.fleet import client, report

    try:
        prom = client.PrometheusClient(args.prometheus)
        figures = report.collect(prom, args.since, with_series=args.html is not None)
    except client.FleetError as e:
        return _error(str(e), 2)
    if args.html is not None:
        from gpuutil.fleet import html as fleet_html

        code = _emit(fleet_html.render_html(figures), args.html)
        if code:
            return code
    return _emit(report.render_text(figures), args.output)


#: Each subcommand's parser and what it runs (gpuutil.cli.build_parser, main).
ADD_PARSER = {"compare": _add_compare_parser, "export": _add_export_parser, "fleet": _add_fleet_parser}
RUN = {"compare": _compare, "export": _export, "fleet": _fleet}
