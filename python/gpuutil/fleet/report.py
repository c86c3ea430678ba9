"""``gpuutil fleet``: the fleet's allocation, OEE and cost per unit over a
window, per job, from a Prometheus server that scrapes gpuutil's exporters
(and dcgm-exporter) with deploy/prometheus/gpuutil-rules.yml loaded.

:func:`collect` runs the queries of :mod:`gpuutil.fleet.queries` (instant
queries at one time, plus the range queries the HTML page plots) into a
:class:`FleetReport`; :func:`render_text` prints the table (fleet line,
allocation by hour of day, one row per job: GPUs, GPU-hours held and idle,
OEE and its factors, cost per step / sample / 1M tokens, the top idle
cause); :mod:`gpuutil.fleet.html` draws the page. An empty result (no
gpuutil series in the window, or rules not loaded) raises
:class:`~gpuutil.fleet.client.FleetError` with one line that says which.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from gpuutil.fleet import queries
from gpuutil.fleet.client import FleetError, PrometheusClient


@dataclass
class JobFigures:
    """One job's figures over the window (None: not known)."""

    job_id: str
    values: Dict[str, Optional[float]] = field(default_factory=dict)
    idle_by_cause_s: Dict[str, float] = field(default_factory=dict)

    def get(self, key: str) -> Optional[float]:
        return self.values.get(key)

    @property
    def top_idle(self) -> Optional[tuple]:
        """(cause, share of the job's GPU time) of its largest idle bucket."""
        if not self.idle_by_cause_s:
            return None
        bucket, secs = max(self.idle_by_cause_s.items(), key=lambda kv: (kv[1], kv[0]))
        total = self.get("gpu_seconds")
        return bucket[len("idle_"):], (secs / total if total else None)

    def cost_per(self, unit: str, price: Optional[float]) -> Optional[float]:
        """USD per step / sample / token: the GPU-hours held x price over the units."""
        hours, n = self.get("gpu_hours"), self.get(unit)
        if not _known(price) or not _known(hours) or not _known(n) or not n:
            return None
        return hours * price / n


@dataclass
class FleetReport:
    url: str
    window: str
    at_s: float
    fleet: Dict[str, Optional[float]]
    by_hour: Dict[int, float]
    jobs: List[JobFigures]
    oee_over_time: Dict[str, Dict[str, List[tuple]]] = field(default_factory=dict)  # factor -> job -> [(t, v)]
    allocation_over_time: List[tuple] = field(default_factory=list)


def _one(client: PrometheusClient, expr: str, at_s: float) -> Optional[float]:
    result = client.query(expr, at_s)
    return result[0]["value"] if result else None


def collect(client: PrometheusClient, window: str, at_s: Optional[float] = None,
            with_series: bool = False) -> FleetReport:
    """The figures over ``window`` ending at ``at_s`` (default: now)."""
    window_s = queries.duration_s(window)
    at_s = time.time() if at_s is None else at_s
    jobs: Dict[str, JobFigures] = {}
    for name, expr in queries.job_queries(window).items():
        for r in client.query(expr, at_s):
            job = r["metric"].get("job_id")
            if job is None:
                continue
            figures = jobs.setdefault(job, JobFigures(job))
            if name == "idle_by_cause":
                figures.idle_by_cause_s[r["metric"].get("bucket", "?")] = r["value"]
            else:
                figures.values[name] = r["value"]
    for figures in jobs.values():
        v = figures.values
        if v.get("quality") is None and "steps" in v:
            v["quality"] = 1.0  # no useful-steps counter: all steps count as useful (said in the table's note)
        factors = [v.get(k) for k in ("availability", "performance", "quality")]
        if all(_known(f) for f in factors):
            v["oee"] = factors[0] * factors[1] * factors[2]
    fleet = {name: _one(client, expr, at_s) for name, expr in queries.fleet_queries(window).items()
             if name != "by_hour"}
    weighted = [(j.get("oee"), j.get("gpu_hours")) for j in jobs.values()
                if _known(j.get("oee")) and _known(j.get("gpu_hours")) and j.get("gpu_hours")]
    if weighted and _known(fleet.get("allocation")):
        fleet["oee"] = fleet["allocation"] * sum(o * h for o, h in weighted) / sum(h for _, h in weighted)
    by_hour = {}
    for r in client.query(queries.fleet_queries(window)["by_hour"], at_s):
        try:
            by_hour[int(r["metric"].get("hour", ""))] = r["value"]
        except ValueError:
            continue
    no_series = FleetError(f"no gpuutil series in Prometheus at {client.base_url} over the last {window}: is a "
                           "gpuutil exporter scraped there (docs/fleet.md)?")
    if fleet.get("price") is None:  # recorded at every evaluation once the rules are loaded
        if not client.query(f'count(last_over_time({{__name__=~"gpuutil_.+"}}[{window}]))', at_s):
            raise no_series
        raise FleetError(f"Prometheus at {client.base_url} has gpuutil series but not the fleet rules' (no "
                         "fleet:gpu_price_usd_per_hour): load deploy/prometheus/gpuutil-rules.yml (rule_files)")
    if not jobs and fleet.get("gpus") is None:
        raise no_series
    report = FleetReport(client.base_url, window, at_s, fleet, by_hour,
                         sorted(jobs.values(), key=lambda j: j.job_id))
    if with_series:
        step = max(1.0, window_s / 240)
        start = at_s - window_s
        for factor, expr in queries.OEE_FACTORS.items():
            report.oee_over_time[factor] = {r["metric"].get("job_id", "?"): r["values"]
                                            for r in client.query_range(expr, start, at_s, step)}
        rows = client.query_range(queries.ALLOCATION_OVER_TIME, start, at_s, step)
        report.allocation_over_time = rows[0]["values"] if rows else []
    return report


def _known(v: Optional[float]) -> bool:
    return v is not None and v == v and abs(v) != float("inf")  # NaN: a ratio of nothing


def _pct(v: Optional[float]) -> str:
    return f"{100 * v:.1f}%" if _known(v) else "-"


def _num(v: Optional[float], fmt: str = "{:.4g}") -> str:
    return fmt.format(v) if _known(v) else "-"


def _usd(v: Optional[float]) -> str:
    return f"${v:.4g}" if _known(v) else "-"


HEADER = ("job_id", "GPUs", "GPU-h", "idle GPU-h", "OEE", "avail", "perf", "quality", "$/step", "$/sample",
          "$/1M tok", "top idle cause")
NOTE = ("OEE = availability (share of the GPU time held that was in training steps) x performance (MFU in steps) x "
        "quality (useful steps / steps; 100% when not counted); fleet OEE = allocation x the jobs' OEE weighted by "
        "GPU-hours; docs/fleet.md.")


def fleet_lines(report: FleetReport) -> List[str]:
    """The fleet's lines above the table."""
    f = report.fleet
    when = datetime.datetime.fromtimestamp(report.at_s, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"Fleet at {report.url}, last {report.window} to {when}",
             f"GPUs {_num(f.get('gpus'), '{:.0f}')}, allocation {_pct(f.get('allocation'))} (GPUs attached to a "
             f"running job), fleet OEE {_pct(f.get('oee'))}, price {_usd(f.get('price'))}/GPU-h"]
    if report.by_hour:
        hours = " ".join(f"{h:02d}:{100 * v:.0f}%" for h, v in sorted(report.by_hour.items()))
        lines.append(f"allocation by hour of day (UTC): {hours}")
    return lines


def job_rows(report: FleetReport) -> List[tuple]:
    """One row of :data:`HEADER`'s columns per job, as text."""
    rows = []
    price = report.fleet.get("price")
    for j in report.jobs:
        top = j.top_idle
        per_m = j.cost_per("tokens", price)
        rows.append((j.job_id, _num(j.get("gpus"), "{:.0f}"), _num(j.get("gpu_hours")),
                     _num(j.get("idle_gpu_hours")), _pct(j.get("oee")), _pct(j.get("availability")),
                     _pct(j.get("performance")), _pct(j.get("quality")), _usd(j.cost_per("steps", price)),
                     _usd(j.cost_per("samples", price)), _usd(None if per_m is None else per_m * 1e6),
                     "-" if top is None else f"{top[0]} {_pct(top[1])}"))
    return rows


def render_text(report: FleetReport) -> str:
    """The table ``gpuutil fleet`` prints."""
    first, *rest = fleet_lines(report)
    lines = [first, *("  " + line for line in rest), ""]
    rows = job_rows(report)
    widths = [max(len(str(r[i])) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    for r in [HEADER, *rows]:
        lines.append("  ".join(str(c).ljust(w) if i in (0, 11) else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    lines += ["", NOTE]
    return "\n".join(lines) + "\n"
