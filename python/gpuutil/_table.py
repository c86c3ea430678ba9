"""Plain-text rendering of a gpuutil.report/1 dict for the terminal.

Used by ``gpuutil analyze`` (cli.py) for its default output: the top
finding, a per-step table (per device; on a host-only run, the main
training thread's host categories per step), a summary block per device, the time outside steps, the cross-rank
table when several ranks were analysed (``summary.ranks``: per rank its
step wall, own time and collective wait, the straggler marked; missing and
short ranks named), the top finding and the other findings (a straggler's
rank, host and cause included), and the non-zero diagnostics. Pure
functions from the report dict to text; no I/O here. Times are shown in
milliseconds, shares in percent of the device's wall time.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from gpuutil._buckets import HOST_CATEGORIES, IDLE_CAUSES, OVERHEAD_CAUSES
_NAME_WIDTH = 60


def _ms(ns: Optional[int]) -> str:
    if ns is None:
        return "-"
    return f"{ns / 1e6:.3f}"


def _pct(part: Optional[float], whole: Optional[float]) -> str:
    if part is None or not whole:
        return "-"
    return f"{100.0 * part / whole:.1f}"


def _ratio_pct(value: Optional[float]) -> str:
    """A 0..1 ratio (SM efficiency, MFU) as a percentage, '-' when null."""
    if value is None:
        return "-"
    return f"{100.0 * value:.1f}%"


def _short(name: str, width: int = _NAME_WIDTH) -> str:
    name = " ".join(name.split())  # no newlines/tabs in a table cell
    if len(name) <= width:
        return name
    return name[: width - 3] + "..."


def _grid(headers: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = ()) -> List[str]:
    """Aligns cells in columns: right-aligned except the columns in `left`."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def fmt(cells: Sequence[str]) -> str:
        parts = [c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(parts).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines.extend(fmt(r) for r in rows)
    return lines


def _multi_rank(report: Dict[str, Any]) -> bool:
    ranks = {d.get("rank", 0) for d in report["summary"]["devices"]}
    for step in report["steps"]:
        ranks.update(d.get("rank", 0) for d in step["devices"])
    ranks.update(s.get("rank", 0) for s in report.get("sources", []))
    return len(ranks) > 1


def _device_label(dev: Dict[str, Any], multi_rank: bool) -> str:
    return f"{dev['rank']}:{dev['device']}" if multi_rank else str(dev["device"])


def _largest_idle(breakdown: Dict[str, int], wall_ns: int) -> str:
    # The device's own turnaround between queued kernels is never "the" cause.
    best = max((c for c in IDLE_CAUSES if c not in OVERHEAD_CAUSES), key=lambda c: breakdown.get("idle_" + c, 0))
    ns = breakdown.get("idle_" + best, 0)
    if ns <= 0:
        return "-"
    return f"{best} {_pct(ns, wall_ns)}%"


def step_table(report: Dict[str, Any]) -> List[str]:
    """One row per step and device."""
    multi = _multi_rank(report)
    headers = ["step", "device", "wall ms", "compute %", "comm %", "memory %", "idle %",
               "largest idle cause", "kernels", "SM eff est", "MFU"]
    rows = []
    for step in report["steps"]:
        for dev in step["devices"]:
            b = dev["breakdown_ns"]
            wall = dev["wall_ns"]
            rows.append([
                str(step["step"]),
                _device_label(dev, multi),
                _ms(wall),
                _pct(b["compute"], wall),
                _pct(b["communication"], wall),
                _pct(b["memory"], wall),
                _pct(dev["idle_ns"], wall),
                _largest_idle(b, wall),
                str(dev["kernels"]),
                _ratio_pct(dev["sm_efficiency_est"]),
                _ratio_pct(dev["mfu"]),
            ])
    if not rows:
        return host_step_table(report)
    return _grid(headers, rows, left=(1, 7))


def host_step_table(report: Dict[str, Any]) -> List[str]:
    """Host-only runs: one row per step (and rank) for the main training
    thread, each host category as a share of the step's wall."""
    from gpuutil.compare import _main_threads

    n = len(report["steps"])
    rows = []
    ranks = set()
    for step in report["steps"]:
        for h in sorted(_main_threads(step), key=lambda h: h.get("rank", 0)):
            ranks.add(h.get("rank", 0))
            wall = h.get("wall_ns") or step.get("wall_ns")
            b = h.get("breakdown_ns", {})
            rows.append([str(step["step"]), str(h.get("rank", 0)), _ms(wall),
                         *(_pct(b.get(c, 0), wall) for c in _HOST_CATEGORIES)])
    if not rows:
        return [f"({n} step{'s' if n != 1 else ''}, no device activity or host ranges)" if n else "(no steps)"]
    head = [f"({n} step{'s' if n != 1 else ''}, no device activity: the main training thread per step)"]
    headers = ["step", "rank", "wall ms", *(f"{c} %" for c in _HOST_CATEGORIES)]
    if len(ranks) < 2:  # one rank: no rank column
        return head + _grid([h for i, h in enumerate(headers) if i != 1], [r[:1] + r[2:] for r in rows])
    return head + _grid(headers, rows)


def _steps_of(report: Dict[str, Any], dev: Dict[str, Any]) -> int:
    n = 0
    for step in report["steps"]:
        if any(d["device"] == dev["device"] and d["rank"] == dev["rank"] for d in step["devices"]):
            n += 1
    return n


def _mean_health(report: Dict[str, Any], dev: Dict[str, Any], key: str) -> Optional[float]:
    """Mean over the device's steps of a health value, None when never sampled."""
    values = []
    for step in report["steps"]:
        for d in step["devices"]:
            if d["device"] == dev["device"] and d["rank"] == dev["rank"]:
                v = (d.get("health") or {}).get(key)
                if v is not None:
                    values.append(float(v))
    return sum(values) / len(values) if values else None


def device_summaries(report: Dict[str, Any]) -> List[str]:
    """A block per device: steps, wall, busy %, each bucket in ms and %, top culprit per cause."""
    multi = _multi_rank(report)
    lines: List[str] = []
    for dev in report["summary"]["devices"]:
        b = dev["breakdown_ns"]
        wall = dev["wall_ns"]
        label = f"rank {dev['rank']} device {dev['device']}" if multi else f"device {dev['device']}"
        if dev.get("name"):
            label += f" ({dev['name']})"
        busy = "-" if dev["busy_pct"] is None else f"{dev['busy_pct']:.1f}%"
        lines.append(f"Summary {label}: {_steps_of(report, dev)} steps, wall {_ms(wall)} ms, busy {busy}")
        rows = []
        for key, label_ in (("compute", "compute"), ("communication", "communication"), ("memory", "memory")):
            rows.append([label_, _ms(b[key]), _pct(b[key], wall), ""])
        for cause in IDLE_CAUSES:
            ns = b.get("idle_" + cause, 0)
            culprits = dev["culprits"].get(cause) or []
            top = ""
            if culprits:
                c = culprits[0]
                top = f"{_short(c['name'] or '(unnamed)')} ({_ms(c['ns'])} ms, x{c['count']})"
            rows.append([f"idle {cause}", _ms(ns), _pct(ns, wall), top])
        lines.extend("  " + line for line in _grid(["bucket", "ms", "%", "top culprit"], rows, left=(0, 3)))
        extra = []
        if dev.get("sm_efficiency_est") is not None:
            extra.append(f"SM efficiency est {_ratio_pct(dev['sm_efficiency_est'])}")
        if dev.get("achieved_occupancy_est") is not None:
            extra.append(f"achieved occupancy est {_ratio_pct(dev['achieved_occupancy_est'])}")
        extra.append(f"MFU {_ratio_pct(dev.get('mfu'))}")
        nvml = _mean_health(report, dev, "nvml_utilization_pct")
        if nvml is not None:
            extra.append(f"NVML utilization.gpu {nvml:.1f}% (duty cycle; exact busy {busy})")
        extra.append(f"kernels {dev['kernels']}")
        lines.append("  " + ", ".join(extra))
        lines.append("")
    if not report["summary"]["devices"]:
        lines.extend(host_summaries(report))
    return lines


_HOST_CATEGORIES = HOST_CATEGORIES


def host_summaries(report: Dict[str, Any]) -> List[str]:
    """Host-only runs: per rank, the main training thread's time summed
    over the steps, by category (sums to its wall)."""
    from gpuutil.compare import _main_threads

    totals: Dict[int, Dict[str, int]] = {}
    for step in report.get("steps", []):
        for h in _main_threads(step):
            t = totals.setdefault(int(h.get("rank", 0)), {"wall_ns": 0, "steps": 0})
            t["wall_ns"] += int(h.get("wall_ns", 0))
            t["steps"] += 1
            for c in _HOST_CATEGORIES:
                t[c] = t.get(c, 0) + int(h.get("breakdown_ns", {}).get(c, 0))
    lines: List[str] = []
    for rank, t in sorted(totals.items()):
        wall = t["wall_ns"]
        where = f" (rank {rank})" if len(totals) > 1 else ""
        lines.append(f"Summary host, main training thread{where}: {t['steps']} steps, wall {_ms(wall)} ms")
        rows = [[c, _ms(t.get(c, 0)), _pct(t.get(c, 0), wall)] for c in _HOST_CATEGORIES]
        lines.extend("  " + line for line in _grid(["category", "ms", "% of wall"], rows, left=(0,)))
        lines.append("")
    return lines


def outside_steps(report: Dict[str, Any]) -> str:
    s = report["summary"]
    span = s["trace_span_ns"]
    pct = _pct(s["outside_steps_ns"], span)
    pct_text = "" if pct == "-" else f" ({pct}%)"
    line = f"Time outside steps: {_ms(s['outside_steps_ns'])} ms of {_ms(span)} ms trace span{pct_text}"
    # Not outside steps: the last step's backlog and unrecorded end
    # (docs/accounting.md, "The last step").
    notes = []
    if s.get("last_step_backlog_ns"):
        notes.append(f"the last step's device backlog ran {_ms(s['last_step_backlog_ns'])} ms past it")
    if s.get("last_step_unrecorded_ns"):
        notes.append(f"{_ms(s['last_step_unrecorded_ns'])} ms at the end of the last step recorded nothing and "
                     "was left out")
    return line + ("; " + "; ".join(notes) if notes else "")


def _ratio(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


def _rank_list(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def _straggler_notes(report: Dict[str, Any]) -> Dict[int, str]:
    notes: Dict[int, str] = {}
    for f in report.get("findings", []):
        if f.get("id") == "straggler" and f.get("rank") is not None:
            notes.setdefault(int(f["rank"]), f"straggler ({f.get('cause') or '?'})")
    return notes


def _cluster_caveats(cluster: Dict[str, Any]) -> List[str]:
    """Lines naming the ranks the comparison lacks and what it could not match."""
    lines: List[str] = []
    named = (("missing_ranks", "missing ranks (no steps received)"),
             ("short_ranks", "short ranks (fewer steps than the others)"),
             ("lost_ranks", "lost ranks (went silent)"))
    parts = [f"{label}: {_rank_list(cluster[key])}" for key, label in named if cluster.get(key)]
    if parts:
        lines.append("  " + "; ".join(parts))
    counts = (("collective_mismatches", "collective mismatches"), ("collectives_dropped", "collectives dropped"),
              ("late_steps", "late steps"))
    parts = [f"{cluster[key]} {label}" for key, label in counts if cluster.get(key)]
    if parts:
        lines.append("  " + ", ".join(parts))
    if cluster.get("off"):
        lines.append(f"  cross-rank exchange off: {cluster['off']}")
    return lines


def ranks_lines(report: Dict[str, Any]) -> List[str]:
    """The cross-rank table (one row per rank), or nothing for a single-rank report."""
    s = report["summary"]
    ranks = s.get("ranks")
    if not ranks:
        return []
    cluster = s.get("cluster") or {}
    head = f"Ranks: world size {cluster.get('world_size', len(ranks))}"
    if cluster.get("steps_compared") is not None:
        head += f", {cluster['steps_compared']} steps compared"
    if cluster.get("collective_instances") is not None:
        head += f", {cluster['collective_instances']} collectives matched"
    if cluster.get("straggler_threshold_ns") is not None:
        head += f", straggler threshold {_ms(cluster['straggler_threshold_ns'])} ms"
    bases = {r.get("basis") for r in ranks}
    if len(bases) == 1 and bases <= {"device", "host"}:
        head += f", times from {bases.pop()} timelines"
    mixed = len(bases) > 1
    skew = any(r.get("start_skew_p50_ns") is not None for r in ranks)
    throttled = any(r.get("throttled_steps") for r in ranks)
    notes = _straggler_notes(report)
    headers = ["rank", "host", "steps", "step wall p50 ms", "own p50 ms", "coll wait p50 ms",
               "transfer total ms", "rel perf"]
    headers += ["basis"] * mixed + ["start skew p50 ms"] * skew + ["throttled steps"] * throttled
    headers += ["note"] * bool(notes)
    rows = []
    for r in ranks:
        row = [str(r["rank"]), _short(str(r.get("host") or "-"), 32), str(r.get("steps", "-")),
               _ms(r.get("step_wall_p50_ns")), _ms(r.get("own_p50_ns")), _ms(r.get("collective_wait_p50_ns")),
               _ms(r.get("collective_transfer_ns")), _ratio(r.get("relative_perf"))]
        row += [str(r.get("basis") or "-")] * mixed + [_ms(r.get("start_skew_p50_ns"))] * skew
        row += [str(r.get("throttled_steps", 0))] * throttled
        row += [notes.get(int(r["rank"]), "")] * bool(notes)
        rows.append(row)
    lines = [head]
    lines.extend("  " + line for line in _grid(headers, rows, left=(1, len(headers) - 1) if notes else (1,)))
    lines.extend(_cluster_caveats(cluster))
    return lines


def workload_line(report: Dict[str, Any]) -> Optional[str]:
    """"workload: inference (no backward or optimizer ops; ...)", or None for
    a report without the key (older reports)."""
    w = report.get("workload")
    if not w:
        return None
    evidence = f" ({w['evidence']})" if w.get("evidence") else ""
    return f"workload: {w['kind']}{evidence}"


def top_finding(report: Dict[str, Any]) -> str:
    f = report["summary"].get("top_finding")
    if not f:
        return "No finding"
    return f"Top finding: {f['title']} \u2014 {f['fix']}"


def top_finding_lines(report: Dict[str, Any]) -> List[str]:
    """The top finding's line, then its evidence and recoverable time (what
    both `gpuutil analyze` and ``gpuutil.format(prof.summary())`` print)."""
    lines = [top_finding(report)]
    f = report["summary"].get("top_finding")
    if f and f.get("evidence"):
        lines.append(f"   evidence: {f['evidence']}; recoverable: {recoverable_text(f)}")
    return lines


def diagnostics_lines(report: Dict[str, Any]) -> List[str]:
    lines = []
    for d in report["diagnostics"]:
        line = f"{d['severity']}: {d['name']} ({d['count']}): {d['description']}"
        if d.get("example"):
            line += f" (e.g. {_short(d['example'], 100)})"
        lines.append(line)
    return lines


def recoverable_text(f: Dict[str, Any]) -> str:
    """"12.345 ms (6.2% of step time)", or, for a note that recovers nothing
    by itself (pageable copies, reserved memory, graph capture), what it is."""
    ns = f.get("recoverable_ns") or 0
    if ns <= 0:
        return "none by itself (a note: its time, if any, is counted in another finding)"
    share = f.get("share_of_wall")
    return f"{_ms(ns)} ms" + ("" if share is None else f" ({100.0 * share:.1f}% of step time)")


def findings_lines(report: Dict[str, Any]) -> List[str]:
    """Every finding after the top one: title, evidence, recoverable time, fix."""
    lines: List[str] = []
    for i, f in enumerate(report.get("findings", [])[1:], 2):
        lines.append(f"{i}. {f['title']}")
        if f.get("id") == "straggler" and f.get("rank") is not None:
            host = f" ({f['host']})" if f.get("host") else ""
            lines.append(f"   rank {f['rank']}{host}, cause: {f.get('cause') or '?'}")
        if f.get("evidence"):
            lines.append(f"   evidence: {f['evidence']}")
        lines.append(f"   recoverable: {recoverable_text(f)}; fix: {f['fix']}")
    if lines:
        lines.insert(0, "Other findings:")
    return lines


def render_report(report: Dict[str, Any], finance: Optional[Any] = None) -> str:
    """The full human-readable report, ending with a newline.

    It leads with the top finding (the one with the most recoverable time).
    ``finance``, a gpuutil.finance.FinanceInputs with any input set, adds
    the cost / idle GPU time / OEE block.
    """
    report = clean_strings(report)
    lines: List[str] = []
    for src in report.get("sources", []):
        lines.append(f"Trace {src['path']} (rank {src['rank']}, steps from {src['steps_source'] or '?'})")
    workload = workload_line(report)
    if workload:
        lines.append(workload)
    lines.extend(top_finding_lines(report))
    lines.append("")
    lines.extend(step_table(report))
    lines.append("")
    lines.extend(device_summaries(report))
    lines.append(outside_steps(report))
    ranks = ranks_lines(report)
    if ranks:
        lines.append("")
        lines.extend(ranks)
    others = findings_lines(report)
    if others:
        lines.append("")
        lines.extend(others)
    if finance is not None and finance.any():
        from gpuutil.finance import finance_lines

        lines.append("")
        lines.extend(finance_lines(report, finance))
    diags = diagnostics_lines(report)
    if diags:
        lines.append("")
        lines.extend(diags)
    return sanitize("\n".join(lines)) + "\n"


# C0 controls but tab and newline, DEL and C1 controls: what a crafted name
# in a trace could use to drive the terminal (escape sequences).
_CONTROL = {c: "?" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]}
# In one cell (a name, a title) tab and newline are controls too: a newline
# in a kernel or record_function name must not split a table line.
_CELL_CONTROL = {**_CONTROL, 0x09: "?", 0x0A: "?"}


def sanitize(text: str) -> str:
    """Text safe to print on a terminal: control characters from trace
    strings (ESC, CSI, BEL, carriage returns...) become '?'."""
    return text.translate(_CONTROL)


def clean_strings(obj: Any) -> Any:
    """A copy of a report, summary or record whose strings (keys too) have
    every control character, newline and tab included, replaced by '?': what
    the text renderers interpolate can neither drive the terminal nor break
    a line. Text stays text: '<' and '>' (C++ template kernel names) are
    kept; the HTML report escapes them."""
    if isinstance(obj, str):
        return obj.translate(_CELL_CONTROL)
    if isinstance(obj, dict):
        return {clean_strings(k) if isinstance(k, str) else k: clean_strings(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clean_strings(v) for v in obj]
    return obj
