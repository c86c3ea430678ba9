"""The regression gate: compare two runs metric by metric (``gpuutil compare``).

A run is loaded from a gpuutil.report/1 JSON document (``gpuutil analyze
--json``), a JSON Lines file of such reports (``gpuutil.profile(output=
"steps.jsonl")``, one report per line), or a PyTorch profiler / Kineto trace
(analysed on the fly). Both runs are reduced to the same layer, the run
level, by the same code (:func:`run_metrics`): every step and device entry
of the run is pooled, so a report and a JSONL file of the same run give the
same numbers.

Metrics and their direction (which way is worse) are in :data:`METRICS`.
Time metrics (``*_ms``) regress by their relative change in percent; ratio
metrics (``*_pct``) regress by their change in percentage points, so a
0% -> 3% idle share is a 3-point regression rather than an infinite one.
A metric regresses when it moves the worse way by more than the threshold.
The gate fails closed: a gated metric that cannot be compared (missing,
NaN or infinite on either side, a time metric that is not positive) is a
failure of its own (:func:`gate_problems`), never a pass. Pure functions
(no I/O) except :func:`load_run` (gpuutil/_run_file.py, re-exported here).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

from gpuutil._buckets import IDLE_CAUSES, OPTIONAL_BUCKETS
from gpuutil._run_file import RunError, load_run

__all__ = ["METRICS", "DEFAULT_GATED", "MetricDiff", "RunError", "load_run", "run_metrics", "diff_metrics",
           "gate_problems", "render_diff", "diffs_to_json"]

#: host breakdown category -> its compare metric
_HOST_METRICS = {
    "dataloader": "host_dataloader_pct",
    "host_sync": "host_sync_pct",
    "optimizer": "host_optimizer_pct",
    "forward": "host_forward_pct",
    "backward": "host_backward_pct",
}


#: metric -> (direction, unit, description). direction +1: higher is worse
#: (times, idle shares); -1: lower is worse (busy share, MFU, efficiency).
METRICS: Dict[str, tuple] = {
    "step_wall_p50_ms": (+1, "ms", "median step wall time"),
    "step_wall_mean_ms": (+1, "ms", "mean step wall time"),
    "step_wall_p95_ms": (+1, "ms", "95th percentile step wall time"),
    "busy_pct": (-1, "pct", "device busy share of step wall (all devices pooled)"),
    "compute_pct": (-1, "pct", "compute share of step wall"),
    "communication_pct": (+1, "pct", "exposed (not overlapped) communication share"),
    "memory_pct": (+1, "pct", "memcpy/memset-only share"),
    "idle_pct": (+1, "pct", "idle share of step wall"),
    **{f"idle_{c}_pct": (+1, "pct", f"idle share caused by {c}") for c in IDLE_CAUSES},
    **{m: (+1, "pct", f"main host thread's {c} share of step wall (median step)") for c, m in _HOST_METRICS.items()},
    "mfu_pct": (-1, "pct", "model FLOP/s utilisation"),
    "sm_efficiency_pct": (-1, "pct", "estimated SM efficiency (kernel-time weighted)"),
    "achieved_occupancy_pct": (-1, "pct", "estimated achieved occupancy"),
}

#: Metrics gated when ``--metric`` is not given.
DEFAULT_GATED = ("step_wall_p50_ms",)


@dataclass
class MetricDiff:
    metric: str
    base: Optional[float]  # None when unavailable or not finite (then problem says which)
    current: Optional[float]
    change: Optional[float]  # relative % for time metrics, points for pct metrics
    gated: bool
    regressed: bool
    #: why the metric cannot be compared (``is not available in BASE``), or
    #: None. A gated metric with a problem fails the gate (:func:`gate_problems`).
    problem: Optional[str] = None


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    # nearest-rank on the lower side, as the C++ summary's p50
    idx = max(0, min(len(sorted_values) - 1, int(math.ceil(q * len(sorted_values))) - 1))
    return sorted_values[idx]


def _main_threads(step: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per rank, the step's busiest classified host thread (the training
    thread), as the C++ host findings choose it."""
    best: Dict[Any, Dict[str, Any]] = {}

    def classified(h: Dict[str, Any]) -> float:
        b = h.get("breakdown_ns", {})
        return float(h.get("wall_ns", 0)) - float(b.get("other", 0)) - float(b.get("collective", 0))

    for h in step.get("host", []):
        r = h.get("rank", 0)
        if r not in best or classified(h) > classified(best[r]):
            best[r] = h
    return list(best.values())


def run_metrics(reports: Iterable[Dict[str, Any]]) -> Dict[str, Optional[float]]:
    """Run-level metrics of a run (every metric in METRICS; None when undefined)."""
    walls: List[float] = []
    seen_steps = set()
    wall = 0.0
    sums = {k: 0.0 for k in ("compute", "communication", "memory", *("idle_" + c for c in IDLE_CAUSES))}
    optional_seen = set()  # buckets newer than some reports: undefined when no entry has them
    busy = 0.0
    flops = 0.0
    peak_time = 0.0  # sum(wall_s * peak) over entries with flops and peak
    sm_num = sm_den = occ_num = occ_den = 0.0
    host_shares: Dict[str, List[float]] = {c: [] for c in _HOST_METRICS}  # per step and rank
    for rep in reports:
        for step in rep.get("steps", []):
            key = (step.get("step"), step.get("start_ns"))
            if key not in seen_steps:
                seen_steps.add(key)
                walls.append(float(step["wall_ns"]))
            for h in _main_threads(step):
                w = float(h.get("wall_ns", 0))
                if w > 0:
                    for c, shares in host_shares.items():
                        shares.append(100.0 * float(h.get("breakdown_ns", {}).get(c, 0)) / w)
            for d in step.get("devices", []):
                w = float(d.get("wall_ns", 0))
                wall += w
                b = d.get("breakdown_ns", {})
                for k in sums:
                    sums[k] += float(b.get(k, 0))
                optional_seen.update(k for k in OPTIONAL_BUCKETS if k in b)
                busy += float(d.get("busy_ns", 0))
                if d.get("flops") is not None and d.get("peak_flops_per_s"):
                    flops += float(d["flops"])
                    peak_time += w * 1e-9 * float(d["peak_flops_per_s"])
                if d.get("sm_efficiency_est") is not None:
                    sm_num += float(d["sm_efficiency_est"]) * w
                    sm_den += w
                if d.get("achieved_occupancy_est") is not None:
                    occ_num += float(d["achieved_occupancy_est"]) * w
                    occ_den += w
    out: Dict[str, Optional[float]] = {m: None for m in METRICS}
    if walls:
        s = sorted(walls)
        out["step_wall_p50_ms"] = _percentile(s, 0.5) / 1e6
        out["step_wall_p95_ms"] = _percentile(s, 0.95) / 1e6
        out["step_wall_mean_ms"] = statistics.fmean(s) / 1e6
    if wall > 0:
        out["busy_pct"] = 100.0 * busy / wall
        out["compute_pct"] = 100.0 * sums["compute"] / wall
        out["communication_pct"] = 100.0 * sums["communication"] / wall
        out["memory_pct"] = 100.0 * sums["memory"] / wall
        out["idle_pct"] = 100.0 * sum(sums["idle_" + c] for c in IDLE_CAUSES) / wall
        for c in IDLE_CAUSES:
            if "idle_" + c not in OPTIONAL_BUCKETS or "idle_" + c in optional_seen:
                out[f"idle_{c}_pct"] = 100.0 * sums["idle_" + c] / wall
    if host_shares["dataloader"]:
        # The median step, so that warm-up steps (compilation, first batches)
        # do not move a CI gate.
        for c, shares in host_shares.items():
            out[_HOST_METRICS[c]] = statistics.median(shares)
        if wall == 0:
            # A host-only run (no GPU activity): the waits of the training
            # thread are the idle causes there is (docs/exports.md, compare).
            out["idle_dataloader_pct"] = out["host_dataloader_pct"]
            out["idle_host_sync_pct"] = out["host_sync_pct"]
    if peak_time > 0:
        out["mfu_pct"] = 100.0 * flops / peak_time
    if sm_den > 0:
        out["sm_efficiency_pct"] = 100.0 * sm_num / sm_den
    if occ_den > 0:
        out["achieved_occupancy_pct"] = 100.0 * occ_num / occ_den
    return out


def _problem(value: Optional[float], unit: str, label: str) -> Optional[str]:
    """Why one side's value cannot enter a comparison, or None."""
    if value is None:
        return f"is not available in {label}"
    if not math.isfinite(value):
        return f"is {value} in {label}, not a finite number"
    if unit == "ms" and value <= 0:
        return f"is {value:g} ms in {label}: a relative change needs a positive step time on both sides"
    return None


def _finite(value: Optional[float]) -> Optional[float]:
    return value if value is not None and math.isfinite(value) else None


def diff_metrics(
    base: Dict[str, Optional[float]],
    current: Dict[str, Optional[float]],
    gated: Sequence[str],
    max_regression_pct: float,
    labels: Sequence[str] = ("BASE", "CURRENT"),
) -> List[MetricDiff]:
    """One MetricDiff per metric, regression flags set on the gated ones.

    A metric missing on either side, NaN or infinite on either side, or
    (time metrics) not positive on either side has no change and a
    ``problem`` naming the side (``labels``: how BASE and CURRENT are
    named); on a gated metric that fails the gate (:func:`gate_problems`)."""
    if isinstance(max_regression_pct, bool) or not math.isfinite(max_regression_pct) or max_regression_pct < 0:
        raise ValueError(f"max_regression_pct must be a finite number >= 0, got {max_regression_pct!r}")
    out = []
    for m, (direction, unit, _) in METRICS.items():
        b, c = base.get(m), current.get(m)
        problem = _problem(b, unit, labels[0]) or _problem(c, unit, labels[1])
        change: Optional[float] = None
        if problem is None:
            assert b is not None and c is not None
            change = c - b if unit == "pct" else 100.0 * (c - b) / b
            if not math.isfinite(change):
                problem, change = f"changes by {change} from {labels[0]} to {labels[1]}, not a finite amount", None
        is_gated = m in gated
        regressed = bool(is_gated and change is not None and direction * change > max_regression_pct)
        out.append(MetricDiff(m, _finite(b), _finite(c), change, is_gated, regressed, problem))
    return out


def gate_problems(diffs: Sequence[MetricDiff]) -> List[str]:
    """One line per gated metric that cannot be compared (``gated metric M
    is not available in BASE``): each fails the gate, exit 2 from the CLI."""
    return [f"gated metric {d.metric} {d.problem}" for d in diffs if d.gated and d.problem]


def _fmt(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3f}"


def render_diff(diffs: Sequence[MetricDiff], max_regression_pct: float) -> str:
    """The diff table, then one verdict line: PASS only when every gated
    metric was compared and none regressed."""
    rows = []
    for d in diffs:
        unit = METRICS[d.metric][1]
        if d.change is None:
            change = "-"
        else:
            change = f"{d.change:+.2f}{'%' if unit == 'ms' else ' pt'}"
        status = ""
        if d.gated:
            status = "CANNOT COMPARE" if d.problem else ("REGRESSION" if d.regressed else "ok")
        rows.append([d.metric, _fmt(d.base), _fmt(d.current), change, "yes" if d.gated else "", status])
    headers = ["metric", "base", "current", "change", "gated", "status"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i in (0, 4, 5) else c.rjust(widths[i])
                         for i, c in enumerate(cells)).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths), *(fmt(r) for r in rows)]
    bad = [d.metric for d in diffs if d.regressed]
    problems = gate_problems(diffs)
    if problems:
        lines.append(f"FAIL: {'; '.join(problems)}")
    elif bad:
        lines.append(f"FAIL: {', '.join(bad)} regressed by more than {max_regression_pct:g}")
    else:
        lines.append(f"PASS: no gated metric regressed by more than {max_regression_pct:g}")
    return "\n".join(lines) + "\n"


def diffs_to_json(diffs: Sequence[MetricDiff], max_regression_pct: float) -> Dict[str, Any]:
    """The comparison as a JSON-ready dict (no NaN or infinity in it)."""
    return {
        "max_regression": max_regression_pct,
        "regressed": [d.metric for d in diffs if d.regressed],
        "cannot_compare": [d.metric for d in diffs if d.gated and d.problem],
        "metrics": [
            {"metric": d.metric, "base": d.base, "current": d.current, "change": d.change,
             "change_unit": "percent" if METRICS[d.metric][1] == "ms" else "points",
             "gated": d.gated, "regressed": d.regressed, "problem": d.problem}
            for d in diffs
        ],
    }
