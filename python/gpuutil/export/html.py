"""A self-contained HTML report with plots (``gpuutil export html``).

One HTML file, no scripts, no network: the plots are inline SVG drawn here.
For each (rank, device), up to :data:`MAX_DEVICES`:

- a per-step stacked breakdown: compute, communication, memory and each
  idle cause as a share of the step's wall time (the bars reach 100%
  because the breakdown is exact);
- utilisation over steps: busy %, estimated SM efficiency, MFU and, when
  counters were sampled, NVML utilization.gpu.

A host-only run (no device activity: a CPU job, a live run without CUPTI)
gets, per rank, a per-step stacked breakdown of its main training thread's
host categories (:data:`HOST_COLORS`; they sum to the step's wall too).

When several ranks were analysed (a report's ``summary.ranks``, or a live
leader's ``gpuutil.cluster/1`` record among the reports; the last one
counts), a "Ranks" table: per rank its step wall, own time and collective
wait (p50 per step), relative performance and start skew, the straggler
marked, the missing and short ranks named (more than :data:`ALL_RANKS_MAX`
ranks: the :data:`SHOWN_RANKS` slowest and fastest by own time and every
straggler), then the heat strip of own time per step by rank
(gpuutil.export._heat_strip) when the report carries per-step times of
two or more ranks.

A cluster report (``"kind": "cluster"``, the fan-out's: ``gpuutil
analyze`` of many rank traces) has no per-step device detail: its page is
the cluster line, that Ranks table, the heat strip, its findings (grouped
over ranks) and its diagnostics.

Then the run's findings, once (the top one leads the page; a straggler's
with its rank, host and cause): the list ``prof.summary()`` and ``gpuutil
analyze`` show for the same input, in the same order (``_merge``: a JSONL's
step reports go through the C++ run totals), then the diagnostics. Colours are fixed per
bucket (:data:`COLORS`) so a reader and a test can tell them apart. Pure
function from report dicts to text.
"""

from __future__ import annotations

import html
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gpuutil import _merge
from gpuutil._buckets import IDLE_CAUSES
from gpuutil.export import _heat_strip
from gpuutil.integrations.metrics import CLUSTER_SCHEMA, cluster_view, stragglers
BUCKETS = ("compute", "communication", "memory", *("idle_" + c for c in IDLE_CAUSES))
COLORS: Dict[str, str] = {
    "compute": "#2e7d32",
    "communication": "#1565c0",
    "memory": "#6a1b9a",
    "idle_dataloader": "#ef6c00",
    "idle_host_sync": "#c62828",
    "idle_collective": "#00838f",
    "idle_launch": "#f9a825",
    "idle_host": "#8d6e63",
    "idle_dependency": "#5c6bc0",
    "idle_unattributed": "#9e9e9e",
    "idle_kernel_gap": "#cfd8dc",
}
HOST_COLORS: Dict[str, str] = {
    "dataloader": "#ef6c00",
    "forward": "#2e7d32",
    "backward": "#00897b",
    "optimizer": "#6a1b9a",
    "host_sync": "#c62828",
    "collective": "#1565c0",
    "other": "#9e9e9e",
}
LINE_COLORS: Dict[str, str] = {
    "busy %": "#000000",
    "SM efficiency est %": "#d81b60",
    "MFU %": "#1e88e5",
    "NVML utilization %": "#43a047",
}
MAX_DEVICES = 8
#: Up to this many ranks the Ranks table lists them all; beyond, the slowest and fastest SHOWN_RANKS and the stragglers.
ALL_RANKS_MAX = 32
SHOWN_RANKS = 10
_RANKS_STYLE = (".ranks{border-collapse:collapse;font-size:12px}.ranks th,.ranks td{border:1px solid #e0e0e0;"
                "padding:3px 6px;text-align:right}.ranks td:nth-child(2),.ranks td:last-child{text-align:left}"
                ".ranks tr.straggler{background:#ffebee}.ranks tr.gap td{text-align:center;color:#757575}")
_W, _H, _PAD_L, _PAD_B, _PAD_T = 880, 260, 48, 28, 10


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _device_series(reports: Sequence[Dict[str, Any]]) -> Dict[Tuple[int, int], List[Dict[str, Any]]]:
    out: Dict[Tuple[int, int], List[Dict[str, Any]]] = {}
    for rep in reports:
        for step in rep.get("steps", []):
            for d in step.get("devices", []):
                out.setdefault((int(d.get("rank", 0)), int(d.get("device", 0))), []).append(
                    dict(d, _step=step.get("step"), _counted=_merge.counted_step(step)))
    return out


# Steps kept out of the run's figures (_merge.counted_step) are plotted, but
# not in the shares above the plots, as prof.summary() counts them.
def _kept_out(entries: Sequence[Dict[str, Any]]) -> str:
    n = sum(1 for e in entries if not e.get("_counted", True))
    return f", {n} kept out (compile warm-up or incomplete)" if n else ""


def _axes(y_label: str) -> List[str]:
    parts = []
    plot_h = _H - _PAD_B - _PAD_T
    for pct in (0, 25, 50, 75, 100):
        y = _PAD_T + plot_h * (1 - pct / 100)
        parts.append(f'<line x1="{_PAD_L}" y1="{y:.1f}" x2="{_W}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{_PAD_L - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{pct}%</text>')
    parts.append(f'<text x="12" y="{_PAD_T + plot_h / 2:.1f}" font-size="11" '
                 f'transform="rotate(-90 12 {_PAD_T + plot_h / 2:.1f})" text-anchor="middle">{_e(y_label)}</text>')
    return parts


def _host_series(reports: Sequence[Dict[str, Any]]) -> Dict[int, List[Dict[str, Any]]]:
    """Per rank, the main training thread of each step (host-only runs)."""
    from gpuutil.compare import _main_threads

    out: Dict[int, List[Dict[str, Any]]] = {}
    for rep in reports:
        for step in rep.get("steps", []):
            for h in _main_threads(step):
                out.setdefault(int(h.get("rank", 0)), []).append(
                    dict(h, _step=step.get("step"), _counted=_merge.counted_step(step)))
    return out


def stacked_breakdown_svg(entries: Sequence[Dict[str, Any]], colors: Optional[Dict[str, str]] = None) -> str:
    """SVG of the per-step stacked breakdown (share of wall per bucket;
    ``colors``: the buckets and their colours, :data:`COLORS` by default,
    :data:`HOST_COLORS` for a host thread's categories)."""
    colors = COLORS if colors is None else colors
    n = max(1, len(entries))
    plot_w = _W - _PAD_L
    plot_h = _H - _PAD_B - _PAD_T
    bw = plot_w / n
    gap = min(2.0, bw * 0.15)
    parts = [f'<svg class="breakdown" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
             f'viewBox="0 0 {_W} {_H}" role="img" aria-label="per-step breakdown">']
    parts.extend(_axes("share of step wall"))
    for i, d in enumerate(entries):
        wall = d.get("wall_ns") or 0
        if wall <= 0:
            continue
        x = _PAD_L + i * bw
        y = float(_PAD_T + plot_h)
        for b, color in colors.items():
            ns = d.get("breakdown_ns", {}).get(b, 0)
            if ns <= 0:
                continue
            h = plot_h * ns / wall
            y -= h
            parts.append(f'<rect x="{x + gap / 2:.2f}" y="{y:.2f}" width="{max(0.5, bw - gap):.2f}" height="{h:.2f}" '
                         f'fill="{color}"><title>step {_e(d["_step"])} {b}: {ns / 1e6:.3f} ms '
                         f'({100 * ns / wall:.1f}%)</title></rect>')
    step_labels = [0, n - 1] if n > 1 else [0]
    for i in step_labels:
        if i < len(entries):
            x = _PAD_L + (i + 0.5) * bw
            parts.append(f'<text x="{x:.1f}" y="{_H - 8}" font-size="11" text-anchor="middle">'
                         f'step {_e(entries[i]["_step"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _utilisation_series(entries: Sequence[Dict[str, Any]]) -> Dict[str, List[Optional[float]]]:
    series: Dict[str, List[Optional[float]]] = {k: [] for k in LINE_COLORS}
    for d in entries:
        wall = d.get("wall_ns") or 0
        series["busy %"].append(100.0 * d.get("busy_ns", 0) / wall if wall else None)
        sm = d.get("sm_efficiency_est")
        series["SM efficiency est %"].append(None if sm is None else 100.0 * sm)
        mfu = d.get("mfu")
        series["MFU %"].append(None if mfu is None else 100.0 * mfu)
        nv = (d.get("health") or {}).get("nvml_utilization_pct")
        series["NVML utilization %"].append(None if nv is None else float(nv))
    return {k: v for k, v in series.items() if any(x is not None for x in v)}


def utilisation_svg(entries: Sequence[Dict[str, Any]]) -> str:
    """SVG line chart of the utilisation numbers over steps."""
    n = max(1, len(entries))
    plot_w = _W - _PAD_L
    plot_h = _H - _PAD_B - _PAD_T
    parts = [f'<svg class="utilisation" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
             f'viewBox="0 0 {_W} {_H}" role="img" aria-label="utilisation over steps">']
    parts.extend(_axes("percent"))
    for name, values in _utilisation_series(entries).items():
        pts = []
        for i, v in enumerate(values):
            if v is None:
                continue
            x = _PAD_L + (i + 0.5) * plot_w / n
            y = _PAD_T + plot_h * (1 - max(0.0, min(100.0, v)) / 100)
            pts.append(f"{x:.2f},{y:.2f}")
        if not pts:
            continue
        color = LINE_COLORS[name]
        if len(pts) == 1:
            x, y = pts[0].split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="4" fill="{color}"><title>{_e(name)}</title></circle>')
        else:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="3" points="{" ".join(pts)}">'
                         f'<title>{_e(name)}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def _legend(items: Dict[str, str]) -> str:
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{c}"></i>{_e(k)}</span>' for k, c in items.items()) + "</div>"


def _ms(ns: Optional[int]) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def _latest_cluster_view(reports: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    for rep in reversed(reports):
        view = cluster_view(rep)
        if view is not None:
            return view
    return None


def _rank_names(cluster: Dict[str, Any]) -> str:
    named = (("missing_ranks", "Missing ranks (no steps received)"),
             ("short_ranks", "Short ranks (fewer steps than the others)"),
             ("lost_ranks", "Lost ranks (went silent)"))
    parts = [f"{label}: {', '.join(str(r) for r in cluster[key])}" for key, label in named if cluster.get(key)]
    if cluster.get("off"):
        parts.append(f"cross-rank exchange off: {cluster['off']}")
    return f"<p class=\"rank-gaps\">{_e('. '.join(parts))}.</p>" if parts else ""


def ranks_table(view: Dict[str, Any]) -> str:
    """The "Ranks" section of a cross-rank view (:func:`cluster_view`)."""
    cluster = view["cluster"]
    notes = {int(f["rank"]): f"straggler ({f.get('cause') or '?'})" for f in reversed(stragglers(view["findings"]))}
    head = (f"<p>World size {_e(cluster.get('world_size', len(view['ranks'])))}, "
            f"{_e(cluster.get('steps_compared', '-'))} steps compared; times are medians per step "
            f"(transfer: total over the compared steps); relative perf 1.000 = the fastest rank.</p>")
    cols = ("rank", "host", "steps", "step wall p50 ms", "own p50 ms", "collective wait p50 ms",
            "transfer total ms", "relative perf", "start skew p50 ms", "note")
    rows = []
    for r in _shown_ranks(view["ranks"], notes):
        if r is None:
            rows.append(f'<tr class="gap"><td colspan="{len(cols)}">{_e(_gap_text(view["ranks"]))}</td></tr>')
            continue
        perf = r.get("relative_perf")
        cells = (r.get("rank"), r.get("host") or "-", r.get("steps", "-"), _ms(r.get("step_wall_p50_ns")),
                 _ms(r.get("own_p50_ns")), _ms(r.get("collective_wait_p50_ns")),
                 _ms(r.get("collective_transfer_ns")), "-" if perf is None else f"{perf:.3f}",
                 _ms(r.get("start_skew_p50_ns")), notes.get(int(r["rank"]), ""))
        cls = ' class="straggler"' if int(r["rank"]) in notes else ""
        rows.append(f"<tr{cls}>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    table = ("<table class=\"ranks\"><thead><tr>" + "".join(f"<th>{_e(c)}</th>" for c in cols)
             + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    return "<h2>Ranks</h2>" + head + table + _rank_names(cluster)


def _shown_ranks(ranks: List[Dict[str, Any]], notes: Dict[int, str]) -> List[Optional[Dict[str, Any]]]:
    """The table's rows: every rank up to ALL_RANKS_MAX; else the slowest
    SHOWN_RANKS by own time (p50) and the other stragglers, a gap (None),
    the fastest SHOWN_RANKS."""
    if len(ranks) <= ALL_RANKS_MAX:
        return list(ranks)
    by_own = sorted(ranks, key=lambda r: (-(r.get("own_p50_ns") or 0), r["rank"]))
    head = by_own[:SHOWN_RANKS]
    tail = by_own[-SHOWN_RANKS:]
    shown = {int(r["rank"]) for r in head + tail}
    head += [r for r in by_own if int(r["rank"]) in notes and int(r["rank"]) not in shown]
    return [*head, None, *tail]


def _gap_text(ranks: List[Dict[str, Any]]) -> str:
    return (f"{len(ranks)} ranks: above, the {SHOWN_RANKS} slowest by own time and every straggler; below, the "
            f"{SHOWN_RANKS} fastest (every rank: gpuutil analyze --ranks-out FILE)")


def _straggler_causes(view: Dict[str, Any]) -> Dict[int, str]:
    return {int(f["rank"]): str(f.get("cause") or "?") for f in stragglers(view["findings"])}


def _cluster_page(report: Dict[str, Any], title: str) -> List[str]:
    """The body of a cluster report's page (see the module's paragraph)."""
    view = cluster_view(report)
    summary = report.get("summary") or {}
    cluster = summary.get("cluster") or {}
    findings = report.get("findings") or []
    body: List[str] = [f"<h1>{_e(title)}</h1>"]
    if findings:
        body.append(f'<p class="top">Top finding: <b>{_e(findings[0].get("title", ""))}</b> — '
                    f'{_e(findings[0].get("fix", ""))}</p>')
    src = report.get("source") or {}
    body.append(f"<p class=\"src\">Cluster report: {_e(summary.get('ranks_analyzed', '-'))} of "
                f"{_e(cluster.get('world_size', '-'))} ranks analysed, {_e(cluster.get('steps_compared', '-'))} "
                f"steps compared, {_e(cluster.get('collective_instances', '-'))} collective instances matched "
                f"({(src.get('bytes') or 0) / 1e6:.1f} MB of traces read).</p>")
    if view is not None and view["ranks"]:
        body.append(ranks_table(view))
        reasons = cluster.get("missing_reasons") or []
        if reasons:
            body.append("<ul class=\"missing\">" + "".join(
                f"<li>{_e('rank ' + str(m['rank']) if m.get('rank') is not None else m.get('input'))}: "
                f"{_e(m.get('reason'))}</li>" for m in reasons[:SHOWN_RANKS]) + "</ul>")
        mat = _heat_strip.matrix_of(report, view)
        if mat is not None:
            body.append(_heat_strip.section(mat, _straggler_causes(view)))
    body.append("<h2>Findings</h2>")
    body.append(_finding_list(findings))
    diags = report.get("diagnostics") or []
    if diags:
        body.append("<h2>Diagnostics</h2><ul>" + "".join(
            f"<li>{_e(d.get('severity'))}: {_e(d.get('name'))} ({_e(d.get('count'))} on {_e(d.get('ranks'))} "
            f"ranks): {_e(d.get('description'))}</li>" for d in diags) + "</ul>")
    return body


def _finding_ranks(f: Dict[str, Any]) -> str:
    ranks = f.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        return ""
    shown = ", ".join(str(r) for r in ranks[:16]) + (f" and {len(ranks) - 16} more" if len(ranks) > 16 else "")
    return f"Ranks: {_e(shown)}<br>"


def _finding_where(f: Dict[str, Any]) -> str:
    if f.get("id") != "straggler" or f.get("rank") is None:
        return _finding_ranks(f)
    host = f" ({f['host']})" if f.get("host") else ""
    return f"Rank {_e(f['rank'])}{_e(host)}, cause: {_e(f.get('cause') or '?')}<br>"


def _recoverable(f: Dict[str, Any]) -> str:
    ns = int(f.get("recoverable_ns") or 0)
    if ns <= 0:
        return "none by itself (a note: its time, if any, is counted in another finding)"
    return f"{ns / 1e6:.1f} ms ({100 * (f.get('share_of_wall') or 0):.1f}% of step time)"


def _finding_list(findings: Sequence[Dict[str, Any]]) -> str:
    if not findings:
        return "<p>No finding: nothing crossed a threshold.</p>"
    rows = []
    for f in findings:
        rows.append(f"<li><b>{_e(f.get('title', ''))}</b><br>{_finding_where(f)}"
                    f"Evidence: {_e(f.get('evidence', ''))}<br>"
                    f"Recoverable: {_e(_recoverable(f))}<br>Fix: {_e(f.get('fix', ''))}</li>")
    return "<ol class=\"findings\">" + "".join(rows) + "</ol>"


def _host_sections(reports: Sequence[Dict[str, Any]]) -> List[str]:
    """A host-only run: per rank, the main training thread's per-step
    stacked breakdown by host category."""
    hosts = sorted(_host_series(reports).items())
    if not hosts:
        return ["<p>No device activity and no host ranges in the steps.</p>"]
    parts = ["<p>No device activity in the steps: where the main training thread's time went, step by step.</p>"]
    for rank, entries in hosts[:MAX_DEVICES]:
        counted = [e for e in entries if e.get("_counted", True)] or entries
        wall = sum(e.get("wall_ns", 0) for e in counted)
        shares = ", ".join(f"{c} {100 * sum(e.get('breakdown_ns', {}).get(c, 0) for e in counted) / wall:.1f}%"
                           for c in HOST_COLORS if wall)
        where = f"rank {rank} " if len(hosts) > 1 else ""
        parts.append(f"<h2>{where}host, main training thread: {len(counted)} steps{_e(_kept_out(entries))} "
                     f"({_e(shares)})</h2>")
        parts.append("<h3>Per-step host breakdown</h3>")
        parts.append(_legend(HOST_COLORS))
        parts.append(stacked_breakdown_svg(entries, HOST_COLORS).replace('class="breakdown"', 'class="host-breakdown"', 1))
    return parts


def render_html(reports: Sequence[Dict[str, Any]], title: str = "gpuutil report") -> str:
    """The self-contained HTML page for a run (one report or a JSONL's reports)."""
    records = [r for r in reports if r.get("schema") == CLUSTER_SCHEMA]
    runs = [r for r in reports if _merge.is_run_record(r)]
    reports = [r for r in reports if r.get("schema") != CLUSTER_SCHEMA and not _merge.is_run_record(r)]
    fanned = [r for r in reports if r.get("kind") == "cluster"]
    if fanned:
        return _page(title, _cluster_page(fanned[-1], title), True)
    view = _latest_cluster_view(reports + records[-1:])
    series = _device_series(reports)
    # The run's findings, once: a JSONL's step reports folded by the C++ run
    # totals (what prof.summary() and `gpuutil analyze` list), a report's
    # own findings, and a live view's cross-rank ones (cumulative: its last
    # record only).
    if reports:
        findings = _merge.merge_reports(reports + records[-1:] + runs[-1:]).get("findings", [])
    else:
        findings = _merge.rank_findings([], records[-1].get("findings", []) if records else [])
    body: List[str] = [f"<h1>{_e(title)}</h1>"]
    if findings:
        body.append(f'<p class="top">Top finding: <b>{_e(findings[0].get("title", ""))}</b> — '
                    f'{_e(findings[0].get("fix", ""))}</p>')
    for rep in reports[:1]:
        for s in rep.get("sources", []):
            body.append(f"<p class=\"src\">Trace {_e(s.get('path'))} (rank {_e(s.get('rank'))}, "
                        f"steps from {_e(s.get('steps_source') or '?')})</p>")
    shown = sorted(series.items())[:MAX_DEVICES]
    if not shown:
        body.extend(_host_sections(reports))
    for (rank, device), entries in shown:
        name = next((e.get("name") for e in entries if e.get("name")), "")
        counted = [e for e in entries if e.get("_counted", True)] or entries
        wall = sum(e.get("wall_ns", 0) for e in counted)
        busy = sum(e.get("busy_ns", 0) for e in counted)
        busy_txt = f"{100 * busy / wall:.1f}%" if wall else "-"
        body.append(f"<h2>rank {rank} device {device}{' (' + _e(name) + ')' if name else ''}: "
                    f"{len(counted)} steps{_e(_kept_out(entries))}, busy {busy_txt}</h2>")
        body.append("<h3>Per-step breakdown</h3>")
        body.append(_legend(COLORS))
        body.append(stacked_breakdown_svg(entries))
        body.append("<h3>Utilisation over steps</h3>")
        body.append(_legend({k: LINE_COLORS[k] for k in _utilisation_series(entries)}))
        body.append(utilisation_svg(entries))
    if len(series) > MAX_DEVICES:
        body.append(f"<p>{len(series) - MAX_DEVICES} more devices not plotted.</p>")
    if view is not None and view["ranks"]:
        body.append(ranks_table(view))
        mat = _heat_strip.matrix_of(reports[-1] if reports else {}, view)
        if mat is not None:
            body.append(_heat_strip.section(mat, _straggler_causes(view)))
    body.append("<h2>Findings</h2>")
    body.append(_finding_list(findings))
    diags = reports[-1].get("diagnostics", []) if reports else []
    if diags:
        body.append("<h2>Diagnostics</h2><ul>" + "".join(
            f"<li>{_e(d.get('severity'))}: {_e(d.get('name'))} ({_e(d.get('count'))}): {_e(d.get('description'))}</li>"
            for d in diags) + "</ul>")
    return _page(title, body, view is not None and bool(view["ranks"]))


def _page(title: str, body: List[str], with_ranks: bool) -> str:
    style = ("body{font-family:sans-serif;margin:20px;max-width:920px;color:#212121;background:#fff}"
             ".legend span{display:inline-block;margin-right:12px;font-size:12px}"
             ".legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}"
             "svg{display:block;margin:6px 0 18px}.top{font-size:15px;padding:8px;background:#fff3e0}"
             ".findings li{margin-bottom:8px;font-size:13px}")
    if with_ranks:
        style += _RANKS_STYLE
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{style}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
