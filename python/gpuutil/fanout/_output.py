"""What a person reads of a cluster report: render_text() shows the
cluster line, the slowest and fastest ranks and every straggler, never one
line per rank of a 1,024-rank job (the per-rank table is --ranks-out's,
gpuutil.fanout._ranks_out). read_cluster_report() reads one back from a
file for ``gpuutil export html`` (its page: gpuutil.export.html).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional

#: Ranks shown at each end of the text table.
SHOWN_RANKS = 5


def _ms(ns: Optional[int]) -> str:
    return "-" if ns is None else f"{ns / 1e6:.1f}"


def _rank_line(r: Dict[str, Any], stragglers: Dict[int, Dict[str, Any]]) -> str:
    perf = r.get("relative_perf")
    mark = f"straggler ({stragglers[r['rank']].get('cause')})" if r["rank"] in stragglers else ""
    return (f"{r['rank']:>6}  {str(r.get('host') or '')[:28]:<28} {r.get('steps', 0):>5}  "
            f"{_ms(r.get('step_wall_p50_ns')):>10}  {_ms(r.get('own_p50_ns')):>10}  "
            f"{_ms(r.get('collective_wait_p50_ns')):>10}  {'-' if perf is None else f'{perf:.3f}':>6}  {mark}")


def render_text(report: Dict[str, Any]) -> str:
    """The cluster report as text (see the module's paragraph)."""
    from gpuutil._table import sanitize

    summary = report["summary"]
    cluster = summary["cluster"]
    ranks: List[Dict[str, Any]] = summary["ranks"]
    stragglers = {f["rank"]: f for f in report["findings"] if f.get("id") == "straggler" and "rank" in f}
    lines = [
        f"Cluster: {summary['ranks_analyzed']} of {cluster['world_size']} ranks analysed, "
        f"{cluster['steps_compared']} steps compared, {cluster['collective_instances']} collective instances "
        f"matched ({report['source']['bytes'] / 1e6:.1f} MB of traces)",
    ]
    if cluster.get("missing_ranks"):
        lines.append(f"Missing ranks: {len(cluster['missing_ranks'])}"
                     + "".join(f"; rank {m['rank']}: {m['reason']}" if m["rank"] is not None
                               else f"; {m['input']}: {m['reason']}"
                               for m in (cluster.get("missing_reasons") or [])[:3]))
    lines.append("")
    header = (f"{'rank':>6}  {'host':<28} {'steps':>5}  {'wall p50 ms':>10}  {'own p50 ms':>10}  "
              f"{'wait p50 ms':>10}  {'perf':>6}")
    by_own = sorted(ranks, key=lambda r: (-(r.get("own_p50_ns") or 0), r["rank"]))
    if len(by_own) <= 2 * SHOWN_RANKS:
        lines += ["Ranks, slowest first (own time = wall - collective wait):", header]
        lines += [_rank_line(r, stragglers) for r in by_own]
    else:
        lines += [f"Slowest {SHOWN_RANKS} ranks (own time = wall - collective wait):", header]
        lines += [_rank_line(r, stragglers) for r in by_own[:SHOWN_RANKS]]
        lines += ["", f"Fastest {SHOWN_RANKS} ranks:", header]
        lines += [_rank_line(r, stragglers) for r in by_own[-SHOWN_RANKS:]]
        shown = {r["rank"] for r in by_own[:SHOWN_RANKS] + by_own[-SHOWN_RANKS:]}
        more = [r for r in by_own if r["rank"] in stragglers and r["rank"] not in shown]
        if more:
            lines += ["", "Other stragglers:", header] + [_rank_line(r, stragglers) for r in more]
    lines.append("")
    if stragglers:
        lines.append(f"Stragglers: {len(stragglers)}")
        for f in [f for f in report["findings"] if f.get("id") == "straggler"][:SHOWN_RANKS]:
            lines.append(f"  {f['title']}")
            lines.append(f"    {f['evidence']}")
    else:
        lines.append("Stragglers: none (no rank's own time per step stands out)")
    others = [f for f in report["findings"] if f.get("id") != "straggler"][:3]
    if others:
        lines += ["", "Top findings across ranks:"]
        for f in others:
            lines.append(f"  {f['title']}")
            lines.append(f"    fix: {f['fix']}")
    diags = [d for d in report.get("diagnostics") or [] if d.get("severity") != "info"]
    if diags:
        lines += ["", "Diagnostics: " + ", ".join(f"{d['name']} x{d['count']} on {d['ranks']} ranks" for d in diags)]
    return "\n".join(sanitize(line) for line in lines) + "\n"


def read_cluster_report(path: str) -> Optional[Dict[str, Any]]:
    """The cluster report in the JSON file at ``path`` (``gpuutil analyze
    ... --json`` of many ranks), or None when the file is something else
    (a per-job report, a steps JSONL, a trace: read as before) or cannot
    be read (its reader names the problem). Only the first 512 bytes are
    read for that: the report's "kind" follows its "schema"."""
    import json
    import re

    try:
        with open(path, "rb") as f:
            head = f.read(512)
            if not re.match(rb'\s*\{\s*"schema"\s*:\s*"gpuutil\.report/\d+"\s*,\s*"kind"\s*:\s*"cluster"', head):
                return None
            f.seek(0)
            report = json.load(f)
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and report.get("kind") == "cluster" else None
