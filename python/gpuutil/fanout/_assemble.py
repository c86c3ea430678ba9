"""The cluster report from the ranks' results: every rank's RankStep batch
goes into one gpuutil._core.ClusterAssembler as it arrives (in any order:
the view is finished once, at the end, so it does not depend on the
order), its compact summary is kept as a short JSON string, and finish()
renders the report, deterministic for a given set of traces (sorted by
rank; no host names of workers, timings or process ids), so the local
pool, Dask and Ray give the same bytes. Its own_by_step holds every rank's
own time in the newest OWN_STEPS steps (the HTML report's heat strip).

summary.ranks, summary.cluster and the straggler findings are exactly what
``gpuutil.analyze`` of the same traces gives (the same assembler, fed the
same batches): the assembler keeps every step's samples (its window is
never reached) as the in-process analysis does.
"""

from __future__ import annotations

import json

from gpuutil import _core
from gpuutil.fanout._errors import FanoutError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional

#: Newest finished steps kept with per-rank detail in summary.cluster.recent_steps (as gpuutil.analyze).
RECENT_STEPS = 8
#: Newest compared steps in own_by_step (every rank's own time per step: the HTML heat strip).
OWN_STEPS = 64
_ALL = 1 << 40  # a window no trace reaches: every step's samples are kept


class ClusterBuilder:
    """Collects the ranks' results; finish() gives the report (see the module's paragraph)."""

    def __init__(self, world_size: int, skipped: List[Dict[str, Any]], inputs: int, per_step: bool = False) -> None:
        self._assembler = _core.ClusterAssembler(world_size, _ALL, _ALL if per_step else OWN_STEPS)
        self._world_size = world_size
        self._skipped = list(skipped)
        self._inputs = inputs
        self._summaries: Dict[int, str] = {}
        self._bytes = 0
        self._per_step: Optional[Dict[int, List[Dict[str, Any]]]] = {} if per_step else None
        #: After finish(), with per_step: the per-rank, per-step rows (--ranks-out).
        self.rows: Optional[List[Dict[str, Any]]] = None

    def add(self, rank: int, name: str, result: Dict[str, Any], on_error: str) -> None:
        """One rank's result (the worker's dict); errors fail or are set aside."""
        error = result.get("error")
        if error is None and result.get("rank") != rank:
            error = f"{name}: analysed as rank {result.get('rank')}, discovered as rank {rank}"
        if error is None:
            error, got, _ = self._assembler.ingest(result["batch_json"])
        if error:
            if on_error == "fail":
                raise FanoutError(error)
            self._skipped.append({"rank": rank, "input": name, "reason": error})
            return
        self._bytes += int(result.get("bytes_read") or 0)
        self._summaries[rank] = result["summary_json"]
        if self._per_step is not None:
            self._per_step[rank] = [
                {"step": s["step"], "basis": s["basis"], "categories_ns": s["categories_ns"]}
                for s in json.loads(result["batch_json"])["steps"]
            ]

    @property
    def analyzed(self) -> int:
        return len(self._summaries)

    def finish(self) -> Dict[str, Any]:
        """The cluster report (docs/report-schema.md, "The cluster report")."""
        if not self._summaries:
            reasons = "; ".join(s["reason"] for s in self._skipped[:3])
            raise FanoutError(f"no rank could be analysed ({reasons})" if reasons else "no rank could be analysed")
        self._assembler.advance(True)
        view = json.loads(self._assembler.view_json())
        cluster = view["cluster"]
        steps_all = cluster["recent_steps"]
        cluster["recent_steps"] = steps_all[-RECENT_STEPS:]
        if self._skipped:
            cluster["missing_reasons"] = sorted(
                self._skipped, key=lambda s: (s["rank"] is None, s["rank"] or 0, s["input"] or ""))
        details: List[Dict[str, Any]] = []
        grouped: Dict[str, List[Dict[str, Any]]] = {}
        diagnostics: Dict[str, Dict[str, Any]] = {}
        steps_max = 0
        for rank in sorted(self._summaries):
            s = json.loads(self._summaries.pop(rank))
            steps_max = max(steps_max, int(s.get("steps") or 0))
            for f in s.get("findings") or []:
                grouped.setdefault(f["id"], []).append(dict(f, rank=rank))
            for d in s.get("diagnostics") or []:
                agg = diagnostics.get(d["name"])
                if agg is None:
                    diagnostics[d["name"]] = dict(d, ranks=1)
                else:
                    agg["count"] += d.get("count") or 0
                    agg["ranks"] += 1
            top = (s.get("findings") or [None])[0]
            details.append({
                "rank": rank,
                "input": s.get("input"),
                "steps": s.get("steps"),
                "steps_source": s.get("steps_source"),
                "steps_wall_ns": s.get("steps_wall_ns"),
                "step_wall_p50_ns": s.get("step_wall_p50_ns"),
                "devices": [{k: d.get(k) for k in ("device", "name", "wall_ns", "busy_pct", "idle_pct", "mfu")}
                            for d in s.get("devices") or []],
                "top_finding": None if top is None else {k: top.get(k) for k in ("id", "title", "recoverable_ns")},
                "diagnostics": {d["name"]: d.get("count") for d in s.get("diagnostics") or []},
            })
        findings = list(view["findings"]) + [_group(fs) for _, fs in sorted(grouped.items())]
        findings.sort(key=lambda f: -int(f.get("recoverable_ns") or 0))  # stable: stragglers first on ties
        report: Dict[str, Any] = {
            "schema": _core.report_schema(),
            "kind": "cluster",
            "source": {"inputs": self._inputs, "world_size": self._world_size, "ranks_analyzed": len(details),
                       "bytes": self._bytes},
            "summary": {
                "ranks_analyzed": len(details),
                "steps": steps_max,
                "ranks": view["ranks"],
                "cluster": cluster,
                "top_finding": findings[0] if findings else None,
            },
            "findings": findings,
            "diagnostics": [diagnostics[k] for k in sorted(diagnostics)],
            "ranks_detail": details,
            "own_by_step": _own_by_step(steps_all[-OWN_STEPS:], [int(r["rank"]) for r in view["ranks"]]),
        }
        if self._per_step is not None:
            self.rows = _rows(steps_all, self._per_step)
            self._per_step = None
        return report


def _group(found: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One finding per id over the ranks that have it: the costliest rank's
    words, the ranks, and the recoverable time summed over them."""
    found.sort(key=lambda f: (-int(f.get("recoverable_ns") or 0), f["rank"]))
    first = found[0]
    ranks = sorted({f["rank"] for f in found})
    out = {k: v for k, v in first.items() if k != "rank"}
    if len(ranks) > 1:
        out["title"] = f"{first['title']} (and {len(ranks) - 1} other rank{'s' if len(ranks) > 2 else ''})"
    out["recoverable_ns"] = sum(int(f.get("recoverable_ns") or 0) for f in found)
    out["ranks"] = ranks
    return out


def _own_by_step(steps: List[Dict[str, Any]], ranks: List[int]) -> Dict[str, Any]:
    """Every rank's own time (wall - collective wait) in each of the newest
    compared steps, as a matrix: one row per rank of ``ranks``, one column
    per step (oldest first), null where the rank has no such step."""
    col = {rank: i for i, rank in enumerate(ranks)}
    own: List[List[Optional[int]]] = [[None] * len(steps) for _ in ranks]
    for j, s in enumerate(steps):
        for r in s["ranks"]:
            i = col.get(int(r["rank"]))
            if i is not None:
                own[i][j] = r["own_ns"]
    return {"steps": [s["step"] for s in steps], "straggler": [s.get("straggler") for s in steps],
            "ranks": ranks, "own_ns": own}


def _rows(steps: List[Dict[str, Any]], per_step: Dict[int, List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """The per-rank, per-step table (--ranks-out): the view's compared steps
    joined with each rank's own breakdown of the step."""
    cats: Dict[Any, Dict[str, Any]] = {}
    for rank, items in per_step.items():
        for it in items:
            cats[(rank, it["step"])] = it
    rows = []
    for s in steps:
        for r in s["ranks"]:
            own = cats.get((r["rank"], s["step"]), {})
            row = {"rank": r["rank"], "step": s["step"], "wall_ns": r["wall_ns"],
                   "collective_wait_ns": r["collective_wait_ns"], "own_ns": r["own_ns"],
                   "straggler": s.get("straggler") == r["rank"], "basis": own.get("basis")}
            for name, ns in sorted((own.get("categories_ns") or {}).items()):
                row[f"{name}_ns"] = ns
            rows.append(row)
    rows.sort(key=lambda x: (x["rank"], x["step"]))
    return rows
