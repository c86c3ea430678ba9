"""The single flattening of a step report into tracker metrics.

Every sink and callback logs exactly these keys, so dashboards line up
across W&B, MLflow, TensorBoard, Lightning and Hugging Face:

* ``gpuutil/step_wall_ms``
* per device, summed over the step's devices (absent in host-only mode):
  ``gpuutil/busy_pct``, ``gpuutil/compute_pct``, ``gpuutil/communication_pct``,
  ``gpuutil/memory_pct``, ``gpuutil/idle_<cause>_pct`` for every idle cause
  (``idle_dataloader_pct``, ``idle_host_sync_pct``, ...), ``gpuutil/mfu`` (and ``gpuutil/hfu`` when hardware FLOPs are known)
  (only when known);
* the main training thread's host breakdown (the thread with the most
  categorised time): ``gpuutil/host_<category>_pct`` and
  ``gpuutil/host_<category>_ms`` for dataloader, forward, backward,
  optimizer, host_sync, collective and other.

Percentages are of the step's wall time. Values are plain floats; a metric
whose value is unknown (null in the report) is left out, never NaN.

The cross-rank view (several ranks analysed, or the leader rank of a live
``torch.distributed`` job) flattens the same way with
:func:`cluster_metrics`, from a ``gpuutil.cluster/1`` record, a report with
``summary.ranks`` or a ``prof.summary()``:

* per rank ``N``: ``gpuutil/cluster/rankN/step_wall_p50_ms``, ``.../own_p50_ms``
  (step wall minus collective wait), ``.../collective_wait_p50_ms``,
  ``.../collective_wait_ms`` and ``.../collective_transfer_ms`` (sums over the
  compared steps), ``.../relative_perf`` (1.0 = fastest rank),
  ``.../start_skew_p50_ms`` (when the clocks are aligned), ``.../steps``,
  ``.../throttled_steps``;
* ``gpuutil/cluster/world_size``, ``gpuutil/cluster/missing_ranks`` and
  ``gpuutil/cluster/short_ranks`` (counts), ``gpuutil/cluster/lost_ranks``
  (live only), ``gpuutil/cluster/collective_mismatches`` and
  ``gpuutil/cluster/straggler_rank`` (the rank of the straggler finding with
  the most recoverable time, -1 when there is none).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

PREFIX = "gpuutil/"
CLUSTER_PREFIX = PREFIX + "cluster/"
CLUSTER_SCHEMA = "gpuutil.cluster/1"


def _pct(part: float, whole: float) -> Optional[float]:
    return 100.0 * part / whole if whole else None


def main_host_thread(step: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The host thread with the most categorised (non-"other") time."""
    hosts = step.get("host") or []
    if not hosts:
        return None
    return max(hosts, key=lambda h: sum(v for k, v in h["breakdown_ns"].items() if k != "other"))


def flat_metrics(report: Dict[str, Any]) -> Dict[str, float]:
    """Flattens a one-step report (``prof.reports[i]``) into ``{"gpuutil/...": float}``."""
    out: Dict[str, float] = {}
    steps = report.get("steps") or []
    if not steps:
        return out
    step = steps[0]
    wall = float(step["wall_ns"])
    out[PREFIX + "step_wall_ms"] = wall / 1e6

    devices = step.get("devices") or []
    if devices:
        dev_wall = float(sum(d["wall_ns"] for d in devices))
        totals: Dict[str, float] = {}
        for d in devices:
            for k, v in d["breakdown_ns"].items():
                totals[k] = totals.get(k, 0.0) + v
        busy = totals.get("compute", 0.0) + totals.get("communication", 0.0) + totals.get("memory", 0.0)
        for key, value in [("busy", busy)] + sorted(totals.items()):
            pct = _pct(value, dev_wall)
            if pct is not None:
                out[f"{PREFIX}{key}_pct"] = pct
        for key in ("mfu", "hfu"):
            values = [d.get(key) for d in devices if d.get(key) is not None]
            if values:
                out[PREFIX + key] = sum(values) / len(values)

    host = main_host_thread(step)
    if host is not None:
        for k, v in host["breakdown_ns"].items():
            out[f"{PREFIX}host_{k}_ms"] = v / 1e6
            pct = _pct(v, float(host["wall_ns"]))
            if pct is not None:
                out[f"{PREFIX}host_{k}_pct"] = pct
    return out


def step_number(report: Dict[str, Any]) -> int:
    """The step number of a one-step report (0 when it has no step)."""
    steps = report.get("steps") or []
    return int(steps[0]["step"]) if steps else 0


def cluster_view(record: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The cross-rank view in any of its containers, or None when it has none.

    ``record`` is a ``gpuutil.cluster/1`` record (``ranks``/``cluster`` at the
    top), a report (under ``summary``) or a ``prof.summary()`` (at the top).
    Returns ``{"ranks": [...], "cluster": {...}, "findings": [...]}``; the
    findings are the container's, the straggler ones among them.
    """
    summary = record.get("summary")
    holder = summary if isinstance(summary, dict) and "ranks" in summary else record
    ranks = holder.get("ranks")
    if not isinstance(ranks, list):
        return None
    findings = record.get("findings")
    if findings is None and isinstance(summary, dict):
        findings = summary.get("findings")
    return {"ranks": ranks, "cluster": holder.get("cluster") or {}, "findings": list(findings or [])}


def stragglers(findings: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The straggler findings, most recoverable time first."""
    found = [f for f in findings if f.get("id") == "straggler" and f.get("rank") is not None]
    return sorted(found, key=lambda f: -int(f.get("recoverable_ns") or 0))


def _rank_metrics(r: Dict[str, Any]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    base = f"{CLUSTER_PREFIX}rank{int(r['rank'])}/"
    for key, name in (("step_wall_p50_ns", "step_wall_p50_ms"), ("own_p50_ns", "own_p50_ms"),
                      ("collective_wait_p50_ns", "collective_wait_p50_ms"),
                      ("collective_wait_ns", "collective_wait_ms"),
                      ("collective_transfer_ns", "collective_transfer_ms"),
                      ("start_skew_p50_ns", "start_skew_p50_ms")):
        if r.get(key) is not None:
            out[base + name] = float(r[key]) / 1e6
    for key in ("relative_perf", "steps", "throttled_steps"):
        if r.get(key) is not None:
            out[base + key] = float(r[key])
    return out


def cluster_metrics(record: Dict[str, Any]) -> Dict[str, float]:
    """Flattens a cross-rank view into ``{"gpuutil/cluster/...": float}``
    (empty when ``record`` has none; see the module docstring for the keys)."""
    view = cluster_view(record)
    if view is None:
        return {}
    out: Dict[str, float] = {}
    for r in view["ranks"]:
        out.update(_rank_metrics(r))
    cluster = view["cluster"]
    if cluster.get("world_size") is not None:
        out[CLUSTER_PREFIX + "world_size"] = float(cluster["world_size"])
    for key in ("missing_ranks", "short_ranks", "lost_ranks"):
        if key in cluster:
            out[CLUSTER_PREFIX + key] = float(len(cluster[key] or []))
    if cluster.get("collective_mismatches") is not None:
        out[CLUSTER_PREFIX + "collective_mismatches"] = float(cluster["collective_mismatches"])
    found = stragglers(view["findings"])
    out[CLUSTER_PREFIX + "straggler_rank"] = float(found[0]["rank"]) if found else -1.0
    return out


def cluster_step(record: Dict[str, Any]) -> int:
    """The step a cross-rank view is logged at: the latest step it compared
    (``cluster.recent_steps``), else the furthest ``last_step`` of a rank, else 0."""
    view = cluster_view(record)
    if view is None:
        return 0
    recent = [int(s["step"]) for s in view["cluster"].get("recent_steps") or [] if s.get("step") is not None]
    if recent:
        return max(recent)
    last = [int(r["last_step"]) for r in view["ranks"] if r.get("last_step") is not None]
    return max(last) if last else 0
