"""One report from many: a live run's ``steps.jsonl`` (one
``gpuutil.report/1`` record per step) merged into a single report, so that
``gpuutil analyze steps.jsonl`` prints the same table as for a trace.

Steps are concatenated in file order; the summary sums each (rank, device)
over the steps (wall, breakdown, kernels; culprits merged by name), the
findings are summed by id (recoverable time and wall; the title and fix of
the last step that had the finding), and diagnostics are summed by name.
Cluster records (``gpuutil.cluster/1``) are skipped. Pure functions.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Tuple


def _is_file_of_reports(head: bytes) -> bool:
    """True when a file's first bytes are a gpuutil report (JSON or JSONL),
    not a Kineto trace."""
    text = head.lstrip().decode("utf-8", "replace")
    return text.startswith("{") and '"schema"' in text[:200] and '"gpuutil.' in text[:300]


def merge_reports(reports: List[Dict[str, Any]]) -> Dict[str, Any]:
    reports = [r for r in reports if str(r.get("schema", "")).startswith("gpuutil.report/")]
    if len(reports) == 1:
        return reports[0]
    first = reports[0]
    steps = [s for r in reports for s in r.get("steps", [])]
    devices: Dict[Tuple[int, int], Dict[str, Any]] = {}
    culprits: Dict[Tuple[int, int], Dict[str, Dict[str, List[int]]]] = {}
    for r in reports:
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
    findings: Dict[str, Dict[str, Any]] = {}
    worst: Dict[str, Tuple[int, Any, Dict[str, Any]]] = {}  # id -> (recoverable ns, step, finding) of its worst step
    seen_in: Dict[str, int] = {}
    wall_total = sum(s.get("wall_ns", 0) for s in steps)
    for r in reports:
        step = (r.get("steps") or [{}])[0].get("step")
        for f in r.get("findings", []):
            m = findings.setdefault(f["id"], dict(f, recoverable_ns=0))
            m["recoverable_ns"] += f.get("recoverable_ns", 0)
            seen_in[f["id"]] = seen_in.get(f["id"], 0) + 1
            if f["id"] not in worst or f.get("recoverable_ns", 0) > worst[f["id"]][0]:
                worst[f["id"]] = (f.get("recoverable_ns", 0), step, f)
    for fid, f in findings.items():
        # A per-step title quotes that step's numbers; over the run, say how
        # often it fired and what it costs in all, and quote the worst step.
        f["share_of_wall"] = f["recoverable_ns"] / wall_total if wall_total else None
        _, step, w = worst[fid]
        share = f"{100.0 * f['share_of_wall']:.1f}% of step time recoverable" if wall_total else "recoverable time unknown"
        f["title"] = f"{fid} in {seen_in[fid]} of {len(reports)} steps: {share}"
        f["evidence"] = f"worst step {step}: {w.get('title', '')}; {w.get('evidence', '')}".rstrip("; ")
        if "fix" in w:
            f["fix"] = w["fix"]
    ranked = sorted(findings.values(), key=lambda f: -f["recoverable_ns"])
    diags: Dict[str, Dict[str, Any]] = {}
    for r in reports:
        for d in r.get("diagnostics", []):
            m = diags.setdefault(d["name"], dict(d, count=0))
            m["count"] += d.get("count", 0)
    walls = sorted(s.get("wall_ns", 0) for s in steps)
    summary = {
        "steps": len(steps),
        "steps_wall_ns": wall_total,
        "trace_span_ns": (steps[-1]["end_ns"] - steps[0]["start_ns"]) if steps else 0,
        "outside_steps_ns": max(0, (steps[-1]["end_ns"] - steps[0]["start_ns"]) - wall_total) if steps else 0,
        "step_wall_p50_ns": walls[(len(walls) - 1) // 2] if walls else None,
        "devices": list(devices.values()),
        "top_finding": ranked[0] if ranked else None,
    }
    return {
        "schema": first.get("schema"),
        "sources": first.get("sources", []),
        "flops_source": first.get("flops_source"),
        "workload": reports[-1].get("workload", first.get("workload")),
        "steps": steps,
        "summary": summary,
        "findings": ranked,
        "diagnostics": list(diags.values()),
    }
