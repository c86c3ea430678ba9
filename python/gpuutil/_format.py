"""``gpuutil.format(obj)``: the text a person reads, for anything gpuutil
hands out: a report (``gpuutil.analyze()``, a step report from
``prof.reports``), a live summary (``prof.summary()``), or a cluster record
(``gpuutil.cluster/1``). Pure functions over the dicts; the report layout is
the one ``gpuutil analyze`` prints (``_table.py``).
"""

from __future__ import annotations

from typing import Any, Dict, List

from gpuutil import _table


def _ms(ns: Any) -> str:
    return "-" if ns is None else f"{ns / 1e6:.1f} ms"


def render_summary(s: Dict[str, Any]) -> str:
    """A live profile's ``summary()``: steps, wall, where the time went,
    findings, what was off."""
    lines: List[str] = []
    source = f" (steps from {s['steps_source']})" if s.get("steps_source") else ""
    lines.append(f"{s.get('steps', 0)} steps{source}: {_ms(s.get('steps_wall_ns'))} in steps, "
                 f"{_ms(s.get('outside_steps_ns'))} between them")
    workload = _table.workload_line(s)
    if workload:
        lines.append(workload)
    for d in s.get("devices", []):
        wall = d.get("wall_ns") or 0
        parts = ", ".join(f"{k} {100.0 * v / wall:.1f}%" for k, v in d.get("breakdown_ns", {}).items() if v and wall)
        lines.append(f"  rank {d.get('rank', 0)} device {d.get('device', 0)} {d.get('name') or ''}: {parts}".rstrip())
    for h in s.get("host", []):
        wall = h.get("wall_ns") or 0
        if not wall:
            continue
        parts = ", ".join(f"{k} {100.0 * v / wall:.1f}%" for k, v in h.get("breakdown_ns", {}).items() if v)
        lines.append(f"  host thread {h.get('name') or h.get('tid')} (rank {h.get('rank', 0)}): {parts}")
    if s.get("ranks"):
        lines.extend(_table.ranks_lines({"summary": {"ranks": s["ranks"], "cluster": s.get("cluster") or {}},
                                         "findings": s.get("findings", [])}))
    # The run's findings as `gpuutil analyze` prints a report's (the same
    # list, in the same order, as analyze and the HTML of the run's JSONL).
    findings = s.get("findings") or []
    lines.extend(_table.top_finding_lines({"summary": {"top_finding": findings[0] if findings else None}}))
    lines.extend(_table.findings_lines({"findings": findings}))
    for reason in s.get("gpu_collection_off") or []:
        lines.append(f"note: {reason}")
    lost = s.get("sink_write_failed")
    if lost:
        lines.append(f"warning: {lost['count']} step reports could not be written to {lost.get('path') or 'the file'}: "
                     f"{lost.get('example') or 'write failed'} (the file holds every other step, no partial line)")
    return "\n".join(lines)


def format(obj: Dict[str, Any]) -> str:  # noqa: A001 - the public name is gpuutil.format
    """Text for a report, a ``prof.summary()`` or a cluster record.

    ::

        print(gpuutil.format(prof.summary()))
        print(gpuutil.format(gpuutil.analyze("trace.json.gz")))
    """
    if not isinstance(obj, dict):
        raise TypeError(f"gpuutil.format takes a report, summary or cluster dict, not {type(obj).__name__}")
    obj = _table.clean_strings(obj)  # names from traces and record_function: no control characters
    schema = str(obj.get("schema", ""))
    if schema.startswith("gpuutil.report/"):
        return _table.render_report(obj)
    if schema.startswith("gpuutil.cluster/"):
        report = {"summary": {"ranks": obj.get("ranks", []), "cluster": obj.get("cluster") or {}},
                  "findings": obj.get("findings", [])}
        lines = _table.ranks_lines(report)
        for f in obj.get("findings", []):
            lines.append(f"- {f['title']}; fix: {f['fix']}")
        return "\n".join(lines)
    if "steps_wall_ns" in obj and "findings" in obj:
        return render_summary(obj)
    raise ValueError("gpuutil.format: not a gpuutil report, summary or cluster record (no 'schema' or summary keys)")
