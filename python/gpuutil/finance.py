"""The figures finance asks for, from a report and the user's inputs.

Given $/GPU-hour and (optionally) samples or tokens per step and a quality
factor, :func:`finance_figures` computes, over every (rank, device) of the
report:

- GPU time and its cost (sum of step wall per device, so 8 GPUs x 1 h = 8
  GPU-hours), the idle part of it and the cost of that idle time;
- effective cost per unit: cost / (steps x units per step), where units
  per step counts the whole job's samples or tokens in one step (global
  batch);
- OEE = availability x performance x quality, with the utilisation
  playbook's definitions as gpuutil can see them in one run (the same as
  the Prometheus rules, deploy/prometheus/gpuutil-rules.yml, docs/fleet.md):
  availability is the share of the GPU time the run held (its steps and
  the time outside them: start-up, evaluation, checkpoints) that was spent
  in training steps; performance is MFU in those steps (achieved FLOP/s
  over peak; falls back to estimated SM efficiency, labelled, when FLOPs
  are unknown), so availability x performance is MFU over the time held;
  quality is the user's fraction of useful output (1.0 when not supplied,
  and said so). GPU time no job holds is the fleet's availability loss
  (allocation), seen only by ``gpuutil fleet``.

Pure function of the report dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional


@dataclass
class FinanceInputs:
    usd_per_gpu_hour: Optional[float] = None
    samples_per_step: Optional[float] = None
    tokens_per_step: Optional[float] = None
    quality: Optional[float] = None

    def any(self) -> bool:
        return any(v is not None for v in (self.usd_per_gpu_hour, self.samples_per_step, self.tokens_per_step,
                                           self.quality))


def finance_figures(report: Dict[str, Any], inputs: FinanceInputs) -> Dict[str, Any]:
    """A dict of the figures (None where an input is missing)."""
    devs = report.get("summary", {}).get("devices", [])
    gpu_ns = sum(int(d.get("wall_ns", 0)) for d in devs)
    busy_ns = sum(sum(int(d["breakdown_ns"].get(k, 0)) for k in ("compute", "communication", "memory"))
                  for d in devs)
    idle_ns = gpu_ns - busy_ns
    hours = gpu_ns / 3.6e12
    idle_hours = idle_ns / 3.6e12
    steps = int(report.get("summary", {}).get("steps", 0))
    out: Dict[str, Any] = {"gpu_hours": hours, "idle_gpu_hours": idle_hours,
                           "idle_share": (idle_ns / gpu_ns) if gpu_ns else None,
                           "cost_usd": None, "idle_cost_usd": None, "cost_per_sample_usd": None,
                           "cost_per_million_tokens_usd": None}
    if inputs.usd_per_gpu_hour is not None:
        out["cost_usd"] = hours * inputs.usd_per_gpu_hour
        out["idle_cost_usd"] = idle_hours * inputs.usd_per_gpu_hour
        if inputs.samples_per_step and steps:
            out["cost_per_sample_usd"] = out["cost_usd"] / (steps * inputs.samples_per_step)
        if inputs.tokens_per_step and steps:
            out["cost_per_million_tokens_usd"] = out["cost_usd"] / (steps * inputs.tokens_per_step) * 1e6
    summary = report.get("summary", {})
    steps_wall_ns = int(summary.get("steps_wall_ns", 0))
    held_ns = steps_wall_ns + int(summary.get("outside_steps_ns", 0))
    availability = (steps_wall_ns / held_ns) if (held_ns and gpu_ns) else None
    weighted = [(d.get("mfu"), int(d.get("wall_ns", 0))) for d in devs]
    perf_source = None
    overall = None
    if weighted and all(m is not None for m, _ in weighted) and gpu_ns:
        overall = sum(m * w for m, w in weighted) / gpu_ns
        perf_source = "MFU"
    else:
        sm = [(d.get("sm_efficiency_est"), int(d.get("wall_ns", 0))) for d in devs]
        if sm and all(s is not None for s, _ in sm) and gpu_ns:
            overall = sum(s * w for s, w in sm) / gpu_ns
            perf_source = "SM efficiency est"
    performance = overall
    quality = inputs.quality if inputs.quality is not None else 1.0
    out.update({"availability": availability, "performance": performance, "performance_source": perf_source,
                "quality": quality, "quality_supplied": inputs.quality is not None,
                "oee": (availability * performance * quality) if (availability is not None and performance
                                                                   is not None) else None})
    return out


def finance_lines(report: Dict[str, Any], inputs: FinanceInputs) -> List[str]:
    """The 'Finance' block of the text report."""
    f = finance_figures(report, inputs)
    lines = ["Finance:"]
    gpu = f"  GPU time {f['gpu_hours']:.4f} GPU-h, idle {f['idle_gpu_hours']:.4f} GPU-h"
    if f["idle_share"] is not None:
        gpu += f" ({100 * f['idle_share']:.1f}%)"
    lines.append(gpu)
    if f["cost_usd"] is not None:
        lines.append(f"  cost ${f['cost_usd']:.4f}, of which idle ${f['idle_cost_usd']:.4f}"
                     f" (at ${inputs.usd_per_gpu_hour:g}/GPU-h)")
    if f["cost_per_sample_usd"] is not None:
        lines.append(f"  effective cost per sample ${f['cost_per_sample_usd']:.6g}")
    if f["cost_per_million_tokens_usd"] is not None:
        lines.append(f"  effective cost per 1M tokens ${f['cost_per_million_tokens_usd']:.6g}")
    if f["oee"] is not None:
        q = f"{f['quality']:.3g}" + ("" if f["quality_supplied"] else " (not supplied; assumed)")
        lines.append(f"  OEE {100 * f['oee']:.1f}% = availability {100 * f['availability']:.1f}% (time held in steps) x "
                     f"performance {100 * f['performance']:.1f}% ({f['performance_source']} in steps) x quality {q}")
    else:
        lines.append("  OEE - (needs MFU: pass --flops-per-step, or a trace with launch configs)")
    return lines
