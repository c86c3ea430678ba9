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
"""

from __future__ import annotations

from typing import Any, Dict, Optional

PREFIX = "gpuutil/"


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
