"""The HTML page of ``gpuutil fleet --html``: one self-contained file
(inline SVG, no script, no network), for a monthly report or a team
without Grafana.

It shows the fleet line and the per-job table of the text output, then
three plots: allocation by hour of day (UTC; bars), OEE and its factors
over the window (one plot per factor, a line per job), and idle causes per
job (a bar per job, each idle bucket's share of its GPU time in the colours
of gpuutil's HTML report, :data:`gpuutil.export.html.COLORS`). Pure
function of a :class:`~gpuutil.fleet.report.FleetReport`.
"""

from __future__ import annotations

import datetime
import html
from typing import Dict, List, Sequence, Tuple

from gpuutil.export.html import COLORS
from gpuutil.fleet.report import HEADER, NOTE, FleetReport, fleet_lines, job_rows

#: Line colours of the jobs, in order (job i gets JOB_COLORS[i % n]).
JOB_COLORS = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#ad1457")
BAR_COLOR = "#1565c0"
_W, _H, _L, _B, _T = 860, 220, 48, 30, 12


def _e(text: object) -> str:
    return html.escape(str(text))


def _frame(ticks: Sequence[Tuple[float, str]] = ((0, "0%"), (0.5, "50%"), (1, "100%"))) -> List[str]:
    ph = _H - _B - _T
    out = [f'<line x1="{_L}" y1="{_T}" x2="{_L}" y2="{_H - _B}" stroke="#444"/>',
           f'<line x1="{_L}" y1="{_H - _B}" x2="{_W - 8}" y2="{_H - _B}" stroke="#444"/>']
    for v, label in ticks:
        y = _T + ph * (1 - v)
        out.append(f'<line x1="{_L - 4}" y1="{y:.1f}" x2="{_W - 8}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{_L - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end" fill="#444">{label}</text>')
    return out


def allocation_by_hour_svg(by_hour: Dict[int, float]) -> str:
    """24 bars, one per hour of day (UTC): the mean allocation in that hour."""
    ph, pw = _H - _B - _T, _W - _L - 8
    bw = pw / 24
    parts = _frame()
    for h in range(24):
        x = _L + h * bw
        parts.append(f'<text x="{x + bw / 2:.1f}" y="{_H - _B + 14}" font-size="10" text-anchor="middle" '
                     f'fill="#444">{h:02d}</text>')
        if h in by_hour:
            v = max(0.0, min(1.0, by_hour[h]))
            parts.append(f'<rect class="hour" x="{x + 2:.1f}" y="{_T + ph * (1 - v):.1f}" width="{bw - 4:.1f}" '
                         f'height="{max(ph * v, 0.5):.1f}" fill="{BAR_COLOR}"><title>{h:02d}:00 UTC '
                         f'{100 * v:.1f}%</title></rect>')
    return (f'<svg class="by-hour" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}">'
            + "".join(parts) + "</svg>")


def series_svg(title: str, series: Dict[str, List[Tuple[float, float]]], colors: Dict[str, str]) -> str:
    """One line per job over time, values 0..1."""
    ph, pw = _H - _B - _T, _W - _L - 8
    times = [t for values in series.values() for t, _ in values]
    parts = _frame()
    if times:
        t0, t1 = min(times), max(times)
        span = (t1 - t0) or 1.0
        for at, anchor in ((t0, "start"), (t1, "end")):
            text = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%m-%d %H:%M:%S UTC")
            x = _L + pw * (at - t0) / span
            parts.append(f'<text x="{x:.1f}" y="{_H - _B + 14}" font-size="10" text-anchor="{anchor}" '
                         f'fill="#444">{text}</text>')
        for job, values in sorted(series.items()):
            pts = " ".join(f"{_L + pw * (t - t0) / span:.1f},{_T + ph * (1 - max(0.0, min(1.0, v))):.1f}"
                           for t, v in values if v == v)
            if pts:
                parts.append(f'<polyline class="job" points="{pts}" fill="none" stroke="{colors[job]}" '
                             f'stroke-width="2.5"><title>{_e(job)}</title></polyline>')
    return (f'<svg class="over-time" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}">'
            + "".join(parts) + "</svg>")


def idle_causes_svg(report: FleetReport) -> str:
    """A horizontal bar per job: each idle cause's share of its GPU time."""
    jobs = [j for j in report.jobs if j.get("gpu_seconds")]
    row_h, label_w = 26, 200
    height = 20 + row_h * max(1, len(jobs))
    pw = _W - label_w - 20
    parts = []
    for i, j in enumerate(jobs):
        y = 10 + i * row_h
        parts.append(f'<text x="4" y="{y + 16}" font-size="12" fill="#222">{_e(j.job_id)}</text>')
        x = float(label_w)
        total = j.get("gpu_seconds") or 1.0
        for bucket, secs in sorted(j.idle_by_cause_s.items(), key=lambda kv: (-kv[1], kv[0])):
            w = pw * max(0.0, secs) / total
            if w < 0.5:
                continue
            parts.append(f'<rect class="cause" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 6}" '
                         f'fill="{COLORS.get(bucket, "#9e9e9e")}"><title>{_e(bucket)} {100 * secs / total:.1f}%'
                         f'</title></rect>')
            x += w
        parts.append(f'<rect x="{label_w}" y="{y}" width="{pw}" height="{row_h - 6}" fill="none" stroke="#bbb"/>')
    return (f'<svg class="idle-causes" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}">'
            + "".join(parts) + "</svg>")


def _legend(items: Dict[str, str]) -> str:
    return '<div class="legend">' + " ".join(
        f'<span><i style="background:{c}"></i>{_e(k)}</span>' for k, c in items.items()) + "</div>"


def render_html(report: FleetReport) -> str:
    """The page."""
    colors = {j.job_id: JOB_COLORS[i % len(JOB_COLORS)] for i, j in enumerate(report.jobs)}
    for factor in report.oee_over_time.values():
        for job in factor:
            colors.setdefault(job, JOB_COLORS[len(colors) % len(JOB_COLORS)])
    causes = sorted({b for j in report.jobs for b, secs in j.idle_by_cause_s.items() if secs > 0},
                    key=lambda b: list(COLORS).index(b) if b in COLORS else 99)
    table = ("<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in HEADER) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in job_rows(report))
             + "</table>")
    body = [f"<h1>gpuutil fleet: {_e(report.url)}</h1>",
            "".join(f"<p>{_e(line)}</p>" for line in fleet_lines(report)), table, f'<p class="note">{_e(NOTE)}</p>',
            "<h2>Allocation by hour of day (UTC)</h2>",
            allocation_by_hour_svg(report.by_hour),
            "<h2>OEE and its factors over time</h2>", _legend({j: colors[j] for j in sorted(colors)})]
    for factor, series in report.oee_over_time.items():
        body.append(f"<h3>{_e(factor)}</h3>")
        body.append(series_svg(factor, series, colors))
    body += ["<h2>Idle causes per job (share of the job's GPU time)</h2>",
             _legend({b: COLORS.get(b, "#9e9e9e") for b in causes}), idle_causes_svg(report)]
    style = ("body{font-family:sans-serif;margin:16px;color:#222}p{margin:4px 0;font-size:13px}"
             "table{border-collapse:collapse;font-size:12px;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 6px;"
             "text-align:right}td:first-child,th:first-child,td:last-child{text-align:left}th{background:#f0f0f0}"
             ".note{color:#555;font-size:11px}"
             ".legend span{margin-right:14px;font-size:12px}.legend i{display:inline-block;width:12px;height:12px;"
             "margin-right:4px;vertical-align:middle}h2{font-size:16px;margin:18px 0 6px}h3{font-size:13px;"
             "margin:8px 0 2px}")
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>gpuutil fleet</title><style>{style}'
            f"</style></head><body>{''.join(body)}</body></html>\n")
