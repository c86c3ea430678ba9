"""One report from many: a live run's ``steps.jsonl`` (one
``gpuutil.report/1`` record per step) merged into a single report, so that
``gpuutil analyze steps.jsonl`` and ``gpuutil export html steps.jsonl``
show what ``prof.summary()`` showed for the run.

The run-level parts come from the C++ core, the same code a live session's
``prof.summary()`` runs (``_core.run_totals_of_reports``: the reports are
folded into run totals, and the run's findings are the rules of
docs/findings.md over those totals): the findings (titles in words, the
run's share, "in N of M steps" in the evidence), the workload (its step
count is the run's) and the time outside steps (gaps between steps, and
``torch.compile`` warm-up steps). The last ``gpuutil.cluster/1`` record
of a distributed leader's file adds the cross-rank view
(``summary.ranks``/``summary.cluster``) and its straggler findings, ranked
among the others as ``prof.summary()`` ranks them. Steps are concatenated
in file order; the summary sums each (rank, device) over the steps (wall,
breakdown, kernels; culprits merged by name) and diagnostics are summed by
name. Pure functions.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional, Tuple

_CLUSTER = "gpuutil.cluster/"
#: The run record a live profile writes as its JSONL's last line at stop
#: (docs/report-schema.md, "The run record").
RUN_SCHEMA = "gpuutil.run/1"
_RUN = "gpuutil.run/"


def is_run_record(rec: "Dict[str, Any]") -> bool:
    return str(rec.get("schema", "")).startswith(_RUN)


def counted_step(step: "Dict[str, Any]") -> bool:
    """False for a step kept out of the run's figures: a torch.compile
    warm-up or a step reported incomplete (its wall is outside time)."""
    return not step.get("compile_warmup") and step.get("complete", True) is not False


def _in_figures(report: "Dict[str, Any]") -> bool:
    return counted_step((report.get("steps") or [{}])[0])


def _is_file_of_reports(head: bytes) -> bool:
    """True when a file's first bytes are a gpuutil report (JSON or JSONL),
    not a Kineto trace."""
    text = head.lstrip().decode("utf-8", "replace")
    return text.startswith("{") and '"schema"' in text[:200] and '"gpuutil.' in text[:300]


def rank_findings(findings: "List[Dict[str, Any]]", cluster: "List[Dict[str, Any]]") -> "List[Dict[str, Any]]":
    """The run's findings followed by the cross-rank ones, most recoverable
    first (a stable sort: equal times keep that order). What
    ``prof.summary()``, ``gpuutil analyze`` and the HTML report list."""
    return sorted(list(findings) + list(cluster), key=lambda f: -int(f.get("recoverable_ns") or 0))


def run_totals(reports: "List[Dict[str, Any]]", run: "Optional[Dict[str, Any]]" = None) -> "Dict[str, Any]":
    """The C++ run totals of step reports (``_core.run_totals_of_reports``):
    the shape of ``Session.run_totals_json`` (findings, workload, outside
    time). ``run``: the file's run record, whose outside time (before the
    first step, after the last) replaces the gaps between the steps."""
    import json

    from gpuutil import _core

    docs = [json.dumps(r) for r in reports]
    if run is None:
        return json.loads(_core.run_totals_of_reports(docs))
    named = {k: int(v) for k, v in (run.get("outside_steps_breakdown_ns") or {}).items()}
    return json.loads(_core.run_totals_of_reports(docs, int(run.get("outside_steps_ns", 0)), named))


def _latest_cluster(records: "List[Dict[str, Any]]") -> "Optional[Dict[str, Any]]":
    from gpuutil.integrations.metrics import cluster_view

    for rec in reversed(records):
        view = cluster_view(rec)
        if view is not None:
            return view
    return None


def _with_cluster(report: "Dict[str, Any]", view: "Optional[Dict[str, Any]]") -> "Dict[str, Any]":
    """`report` with a live leader's cross-rank view (when it has none of its own)."""
    if view is None or "ranks" in report.get("summary", {}):
        return report
    findings = rank_findings(report.get("findings", []), view["findings"])
    summary = dict(report.get("summary", {}), ranks=view["ranks"], cluster=view["cluster"],
                   top_finding=findings[0] if findings else None)
    return dict(report, summary=summary, findings=findings)


def merge_reports(records: "List[Dict[str, Any]]") -> "Dict[str, Any]":
    """One report for a file's records: step reports (one is returned as it
    is) and, from a distributed leader's file, cluster records."""
    reports = [r for r in records if str(r.get("schema", "")).startswith("gpuutil.report/")]
    view = _latest_cluster([r for r in records if str(r.get("schema", "")).startswith(_CLUSTER)])
    runs = [r for r in records if is_run_record(r)]
    run = runs[-1] if runs else None
    if len(reports) == 1 and run is None:
        return _with_cluster(reports[0], view)
    first = reports[0]
    steps = [s for r in reports for s in r.get("steps", [])]
    # The run's figures are its training steps': a compile warm-up or an
    # incomplete step is listed with its mark but counted outside steps, as
    # prof.summary() counts it.
    counted = [r for r in reports if _in_figures(r)] or reports
    devices: Dict[Tuple[int, int], Dict[str, Any]] = {}
    culprits: Dict[Tuple[int, int], Dict[str, Dict[str, List[int]]]] = {}
    for r in counted:
        for d in r.get("summary", {}).get("devices", []):
            key = (d.get("rank", 0), d.get("device", 0))
            m = devices.setdefault(key, {"device": key[1], "rank": key[0], "name": d.get("name"), "wall_ns": 0,
                                         "breakdown_ns": {}, "kernels": 0, "sm_efficiency_est": None,
                                         "achieved_occupancy_est": None, "mfu": None, "hfu": None})
            m["wall_ns"] += d.get("wall_ns", 0)
            m["kernels"] += d.get("kernels", 0)
            for k, v in d.get("breakdown_ns", {}).items():
                m["breakdown_ns"][k] = m["breakdown_ns"].get(k, 0) + v
            for cause, items in (d.get("culprits") or {}).items():
                for c in items:
                    tally = culprits.setdefault(key, {}).setdefault(cause, {}).setdefault(c["name"], [0, 0])
                    tally[0] += c.get("ns", 0)
                    tally[1] += c.get("count", 0)
    for key, m in devices.items():
        wall = m["wall_ns"]
        busy = sum(m["breakdown_ns"].get(k, 0) for k in ("compute", "communication", "memory"))
        m["busy_pct"] = 100.0 * busy / wall if wall else None
        m["idle_pct"] = 100.0 * (wall - busy) / wall if wall else None
        m["culprits"] = {
            cause: [{"name": n, "ns": t[0], "count": t[1]} for n, t in sorted(v.items(), key=lambda x: -x[1][0])[:5]]
            for cause, v in culprits.get(key, {}).items()
        }
    totals = run_totals(reports, run)
    ranked = rank_findings(totals["findings"], view["findings"] if view else [])
    diags: Dict[str, Dict[str, Any]] = {}
    for r in reports:
        for d in r.get("diagnostics", []):
            m = diags.setdefault(d["name"], dict(d, count=0))
            m["count"] += d.get("count", 0)
    walls = sorted(s.get("wall_ns", 0) for r in counted for s in r.get("steps", []))
    summary = {
        "steps": totals["steps"],
        "steps_wall_ns": totals["steps_wall_ns"],
        "trace_span_ns": totals["steps_wall_ns"] + totals["outside_steps_ns"],
        "outside_steps_ns": totals["outside_steps_ns"],
        "outside_steps_breakdown_ns": totals.get("outside_steps_breakdown_ns", {}),
        "step_wall_p50_ns": walls[(len(walls) - 1) // 2] if walls else None,
        "devices": list(devices.values()),
        "top_finding": ranked[0] if ranked else None,
    }
    for key in ("compile_warmup_steps", "incomplete_steps"):
        if totals.get(key):
            summary[key] = totals[key]
    if run is not None and run.get("steps_source"):
        summary["steps_source"] = run["steps_source"]
    if view is not None:
        summary["ranks"] = view["ranks"]
        summary["cluster"] = view["cluster"]
    return {
        "schema": first.get("schema"),
        "sources": first.get("sources", []),
        "flops_source": first.get("flops_source"),
        "workload": totals.get("workload") or reports[-1].get("workload", first.get("workload")),
        "loaders": totals.get("loaders", []),  # with their periodic stalls over the run
        "steps": steps,
        "summary": summary,
        "findings": ranked,
        "diagnostics": list(diags.values()),
    }
