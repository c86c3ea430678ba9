"""The PromQL of ``gpuutil fleet``: the fleet and per-job figures over a
window, built on the recording rules of deploy/prometheus/gpuutil-rules.yml
(the same definitions as the Grafana dashboard; docs/fleet.md).

Figures over the window are ratios of the increases of gpuutil's counters
over it, with the rules' definitions (GPU-hours held = the attached-seconds
counter's increase; idle = held minus busy; availability = step time over
time held; performance = FLOPs over peak x step time; quality = useful
steps over steps; cost per step = the GPU-hours' cost over the steps), so
they are exact over any window, where an average of the 5-minute rules
would weigh a job's first minutes (whose rates are young) like any other.
Pure: strings in, strings out.
"""

from __future__ import annotations

import re
from typing import Dict

_DURATION = re.compile(r"^(?:[0-9]+(?:ms|s|m|h|d|w|y))+$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_s(text: str) -> float:
    """A Prometheus duration ("7d", "1h30m") in seconds; ValueError otherwise."""
    if not _DURATION.match(text):
        raise ValueError(f"not a Prometheus duration (e.g. 30m, 7d, 4w): {text!r}")
    total = sum(int(n) * _UNIT_S[u] for n, u in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", text))
    if total <= 0:
        raise ValueError(f"must be longer than 0: {text!r}")
    return float(total)


_BUSY = 'bucket=~"compute|communication|memory"'


def job_queries(window: str) -> Dict[str, str]:
    """name -> instant query, each a vector by job_id (idle_by_cause by job_id and bucket)."""
    w = window
    held = f"sum by (job_id) (increase(gpuutil_gpu_attached_seconds_total[{w}]))"
    busy = f"sum by (job_id) (increase(gpuutil_time_seconds_total{{{_BUSY}}}[{w}]))"
    return {
        "gpus": f"max_over_time(job_id:gpuutil_gpu_info:count[{w}])",
        "gpu_hours": f"{held} / 3600",
        "idle_gpu_hours": f"clamp_min({held} - ({busy} or {held} * 0), 0) / 3600",
        "availability": f"clamp_max(sum by (job_id) (increase(gpuutil_step_wall_seconds_total[{w}])) / "
                        f"({held} > 0), 1)",
        "performance": f"sum by (job_id) (increase(gpuutil_flops_total[{w}])) / sum by (job_id) "
                       f"((last_over_time(gpuutil_peak_flops[{w}]) and last_over_time(gpuutil_flops_total[{w}]))"
                       f" * increase(gpuutil_step_wall_seconds_total[{w}]))",
        "quality": f"clamp_max(sum by (job_id) (increase(gpuutil_useful_steps_total[{w}])) / "
                   f"sum by (job_id) (increase(gpuutil_steps_total[{w}])), 1)",
        "steps": f"max by (job_id) (increase(gpuutil_steps_total[{w}]))",
        "samples": f"sum by (job_id) (increase(gpuutil_samples_total[{w}]))",
        "tokens": f"sum by (job_id) (increase(gpuutil_tokens_total[{w}]))",
        "gpu_seconds": f"sum by (job_id) (increase(gpuutil_time_seconds_total[{w}]))",
        "idle_by_cause": f'sum by (job_id, bucket) (increase(gpuutil_time_seconds_total{{bucket=~"idle_.*"}}[{w}]))',
    }


def fleet_queries(window: str) -> Dict[str, str]:
    """name -> instant query without labels (hour: by hour)."""
    w = window
    return {
        "allocation": f"avg_over_time(fleet:gpu_allocation_ratio:avg5m[{w}])",
        "gpus": f"max_over_time(fleet:gpus:count[{w}])",
        "price": "fleet:gpu_price_usd_per_hour",
        "by_hour": f"avg by (hour) (avg_over_time(fleet_hour:gpu_allocation_ratio:avg5m[{w}]))",
    }


#: Range queries for the HTML page's "OEE factors over time".
OEE_FACTORS = {
    "OEE": "job_id:gpuutil_oee_ratio:rate5m",
    "availability": "job_id:gpuutil_availability_ratio:rate5m",
    "performance": "job_id:gpuutil_performance_ratio:rate5m",
    "quality": "job_id:gpuutil_quality_ratio:rate5m",
}
ALLOCATION_OVER_TIME = "fleet:gpu_allocation_ratio:avg5m"
