#!/usr/bin/env python3
"""Generates deploy/grafana/gpuutil-fleet.json, the fleet dashboard, from
the one definition below (PANELS), with grafana-foundation-sdk's typed
builders pinned to Grafana 11.6's schema (requirements-dev.txt).

    .venv/bin/python scripts/gen_grafana_dashboard.py          # writes the file
    .venv/bin/python scripts/gen_grafana_dashboard.py --check  # exit 1 when stale

Why the SDK rather than JSON written by hand: its builders and models are
generated from Grafana's own schema (the dashboard kind and each panel
plugin's options), so a misspelt option or a wrong type fails here, and
tests/python/test_fleet_dashboard.py reads the committed JSON back through
the same models (Dashboard.from_json) to check it against that schema. The
output is deterministic (sorted keys, fixed ids), so regenerating gives the
same bytes.

The queries use the recording rules of deploy/prometheus/gpuutil-rules.yml
and dcgm-exporter's series joined to gpuutil's jobs on UUID; docs/fleet.md
says what each panel shows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from grafana_foundation_sdk.builders import barchart, common as common_b, dashboard as dash_b, heatmap, prometheus
from grafana_foundation_sdk.builders import stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, dashboard
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

OUT = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "gpuutil-fleet.json"
UID = "gpuutil-fleet"
DS = dashboard.DataSourceRef(type_val="prometheus", uid="${datasource}")

# dcgm-exporter's per-GPU series with the job (and rank) gpuutil reports on
# that GPU; GPUs no job is attached to are left out.
_JOB_OF_GPU = ('* on (UUID) group_left (job_id, rank) '
               'max by (UUID, job_id, rank) (gpuutil_gpu_info{job_id=~"$job", host=~"$host", rank=~"$rank"})')
_JOB = '{job_id=~"$job"}'

#: One query: (expr, legend, extra) where extra may set "format", "instant", "interval".
Query = Tuple[str, str, Dict[str, Any]]

#: The definition: rows, each a title and its panels (kind, title, unit, queries, description).
PANELS: List[Tuple[str, List[Dict[str, Any]]]] = [
    ("Fleet: allocation (playbook step 1)", [
        {"kind": "stat", "title": "GPU allocation", "unit": "percentunit", "w": 4,
         "desc": "GPUs attached to a running job / all GPUs dcgm-exporter lists (gpuutil's own GPUs without it), "
                 "averaged over 5 minutes.",
         "queries": [("fleet:gpu_allocation_ratio:avg5m", "allocation", {})]},
        {"kind": "stat", "title": "Fleet OEE", "unit": "percentunit", "w": 4,
         "desc": "Allocation x the GPU-weighted OEE of the jobs whose OEE is known.",
         "queries": [("fleet:gpuutil_oee_ratio:rate5m", "OEE", {})]},
        {"kind": "stat", "title": "GPUs attached / all", "unit": "none", "w": 4,
         "desc": "GPUs with a running gpuutil profile, and every GPU of the fleet.",
         "queries": [("fleet:gpus_attached:count", "attached", {}), ("fleet:gpus:count", "all", {})]},
        {"kind": "timeseries", "title": "Allocation over time", "unit": "percentunit", "w": 12,
         "desc": "The diurnal shape: GPUs idle overnight are a scheduling problem no profiler finds.",
         "queries": [("fleet:gpu_allocation_ratio:avg5m", "allocation", {})]},
        {"kind": "barchart", "title": "Allocation by hour of day (UTC), over the dashboard's range",
         "unit": "percentunit", "w": 12,
         "desc": "Mean allocation per hour of day: the hours preemptible backfill could fill.",
         "queries": [('avg by (hour) (avg_over_time(fleet_hour:gpu_allocation_ratio:avg5m[$__range]))', "{{hour}}",
                      {"format": PromQueryFormat.TABLE, "instant": True})]},
        {"kind": "heatmap", "title": "Allocation heatmap: hour of day (UTC) x day", "unit": "percentunit", "w": 12,
         "desc": "One cell per day and hour of day.",
         "queries": [('avg by (hour) (avg_over_time(fleet_hour:gpu_allocation_ratio:avg5m[1d]))', "{{hour}}",
                      {"format": PromQueryFormat.HEATMAP, "interval": "1d"})]},
    ]),
    ("GPUs: dcgm-exporter's pairs, per GPU with its job", [
        {"kind": "timeseries", "title": "GPU_UTIL vs SM_ACTIVE", "unit": "percentunit", "w": 8,
         "desc": "High GPU_UTIL with low SM_ACTIVE: a small kernel holds the device. DCGM_FI_PROF_SM_ACTIVE is "
                 "commented out in dcgm-exporter's default counters: enable it.",
         "queries": [(f"DCGM_FI_DEV_GPU_UTIL / 100 {_JOB_OF_GPU}", "{{job_id}} rank {{rank}} GPU_UTIL", {}),
                     (f"DCGM_FI_PROF_SM_ACTIVE {_JOB_OF_GPU}", "{{job_id}} rank {{rank}} SM_ACTIVE", {})]},
        {"kind": "timeseries", "title": "FB_USED vs SM_ACTIVE", "unit": "bytes", "w": 8, "right_axis": "B",
         "desc": "High FB_USED with low SM_ACTIVE: memory held, device idle (a stuck process, a leaked cache, the "
                 "caching allocator's high-water mark).",
         "queries": [(f"DCGM_FI_DEV_FB_USED * 1048576 {_JOB_OF_GPU}", "{{job_id}} rank {{rank}} FB_USED", {}),
                     (f"DCGM_FI_PROF_SM_ACTIVE {_JOB_OF_GPU}", "{{job_id}} rank {{rank}} SM_ACTIVE", {})]},
        {"kind": "timeseries", "title": "POWER", "unit": "watt", "w": 8,
         "desc": "Low power on a heavy job: stalls.",
         "queries": [(f"DCGM_FI_DEV_POWER_USAGE {_JOB_OF_GPU}", "{{job_id}} rank {{rank}}", {})]},
    ]),
    ("Jobs: gpuutil's accounting", [
        {"kind": "timeseries", "title": "GPU time by bucket", "unit": "percentunit", "w": 12, "stack": True,
         "desc": "Each bucket's share of the job's GPU time (compute, communication, memory, idle by cause).",
         "queries": [(f"job_id_bucket:gpuutil_time_ratio:rate5m{_JOB}", "{{job_id}} {{bucket}}", {})]},
        {"kind": "timeseries", "title": "MFU", "unit": "percentunit", "w": 12,
         "desc": "Model FLOP/s over the GPUs' peak at the run's dtype, while allocated.",
         "queries": [(f"job_id:gpuutil_mfu_ratio:rate5m{_JOB}", "{{job_id}}", {})]},
        {"kind": "timeseries", "title": "OEE = availability x performance x quality", "unit": "percentunit", "w": 12,
         "desc": "Availability: share of the held GPU time in training steps; performance: MFU in steps; "
                 "quality: useful steps / steps (1 when not counted).",
         "queries": [(f"job_id:gpuutil_oee_ratio:rate5m{_JOB}", "{{job_id}} OEE", {}),
                     (f"job_id:gpuutil_availability_ratio:rate5m{_JOB}", "{{job_id}} availability", {}),
                     (f"job_id:gpuutil_performance_ratio:rate5m{_JOB}", "{{job_id}} performance", {}),
                     (f"job_id:gpuutil_quality_ratio:rate5m{_JOB}", "{{job_id}} quality", {})]},
        {"kind": "timeseries", "title": "Stragglers: relative performance per rank", "unit": "percentunit", "w": 12,
         "desc": "The fastest rank's own time over each rank's (1 = fastest), from the leader's cross-rank view; "
                 "the slowest rank sets the pace.",
         "queries": [('gpuutil_rank_relative_perf{job_id=~"$job", host=~"$host", rank=~"$rank"}',
                      "{{job_id}} rank {{rank}}", {})]},
        {"kind": "timeseries", "title": "Cost per unit", "unit": "currencyUSD", "w": 12,
         "desc": "GPU time held x the GPU-hour price (fleet:gpu_price_usd_per_hour) over steps, samples or 1M "
                 "tokens.",
         "queries": [(f"job_id:gpuutil_cost_per_step_usd:rate5m{_JOB}", "{{job_id}} per step", {}),
                     (f"job_id:gpuutil_cost_per_sample_usd:rate5m{_JOB}", "{{job_id}} per sample", {}),
                     (f"job_id:gpuutil_cost_per_million_tokens_usd:rate5m{_JOB}", "{{job_id}} per 1M tokens", {})]},
        {"kind": "table", "title": "Allocated-but-idle GPU-hours and the top idle cause, over the dashboard's range",
         "unit": "none", "w": 12,
         "desc": "GPU-hours the job held without busy time (GPU time held minus busy GPU time; "
                 "job_id:gpuutil_allocated_idle_gpus:rate5m is the same per hour), and the idle bucket with the "
                 "largest share now.",
         "queries": [('(sum by (job_id) (increase(gpuutil_gpu_attached_seconds_total{job_id=~"$job"}[$__range])) - '
                      'sum by (job_id) (increase(gpuutil_time_seconds_total{job_id=~"$job", '
                      'bucket=~"compute|communication|memory"}[$__range]))) / 3600',
                      "{{job_id}}", {"format": PromQueryFormat.TABLE, "instant": True}),
                     ('topk by (job_id) (1, job_id_bucket:gpuutil_time_ratio:rate5m{job_id=~"$job", '
                      'bucket=~"idle_.*"})', "{{job_id}} {{bucket}}", {"format": PromQueryFormat.TABLE,
                                                                       "instant": True})]},
    ]),
]


def _query(ref: str, expr: str, legend: str, extra: Dict[str, Any]) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)
    if "format" in extra:
        q = q.format(extra["format"])
    if extra.get("instant"):
        q = q.instant()
    else:
        q = q.range()
    if "interval" in extra:
        q = q.interval(extra["interval"])
    return q


def _panel(spec: Dict[str, Any], panel_id: int, x: int, y: int) -> Any:
    kind = spec["kind"]
    if kind == "stat":
        p = stat.Panel().graph_mode(common.BigValueGraphMode.AREA).reduce_options(
            common_b.ReduceDataOptions().calcs(["lastNotNull"]))
    elif kind == "barchart":
        p = barchart.Panel().x_field("hour").show_value(common.VisibilityMode.NEVER)
    elif kind == "heatmap":
        p = heatmap.Panel().calculate(False)
    elif kind == "table":
        p = table.Panel()
    else:
        p = timeseries.Panel().legend(
            common_b.VizLegendOptions().display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM).show_legend(True))
        if spec.get("stack"):
            p = p.stacking(common_b.StackingConfig().mode(common.StackingMode.NORMAL)).fill_opacity(60)
        if spec.get("right_axis"):
            p = p.override_by_query(spec["right_axis"], [
                dashboard.DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
                dashboard.DynamicConfigValue(id_val="unit", value="percentunit")])
    w, h = spec["w"], 8
    p = (p.id(panel_id).title(spec["title"]).description(spec["desc"]).datasource(DS).unit(spec["unit"])
         .grid_pos(dashboard.GridPos(h=h, w=w, x=x, y=y)))
    for i, (expr, legend, extra) in enumerate(spec["queries"]):
        p = p.with_target(_query("ABCDEFGH"[i], expr, legend, extra))
    return p


def _variable(name: str, label: str, query: str) -> dash_b.QueryVariable:
    return (dash_b.QueryVariable(name).label(label).datasource(DS).query(query).multi(True).include_all(True)
            .all_value(".*").refresh(dashboard.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dashboard.VariableSort.ALPHABETICAL_ASC))


def build() -> dashboard.Dashboard:
    """The dashboard model."""
    d = (dash_b.Dashboard("gpuutil fleet: allocation, OEE, cost per unit").uid(UID)
         .description("gpuutil's jobs beside dcgm-exporter's GPUs (docs/fleet.md); queries over "
                      "deploy/prometheus/gpuutil-rules.yml")
         .tags(["gpuutil", "gpu", "dcgm"]).time("now-24h", "now").refresh("1m").timezone("utc")
         .tooltip(dashboard.DashboardCursorSync.CROSSHAIR)
         .with_variable(dash_b.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
         .with_variable(_variable("job", "job_id", "label_values(gpuutil_gpu_info, job_id)"))
         .with_variable(_variable("host", "host", 'label_values(gpuutil_gpu_info{job_id=~"$job"}, host)'))
         .with_variable(_variable("rank", "rank",
                                  'label_values(gpuutil_gpu_info{job_id=~"$job", host=~"$host"}, rank)')))
    panel_id, y = 1, 0
    for row_title, specs in PANELS:
        d = d.with_row(dash_b.Row(row_title).id(panel_id).grid_pos(dashboard.GridPos(h=1, w=24, x=0, y=y)))
        panel_id, y, x = panel_id + 1, y + 1, 0
        for spec in specs:
            if x + spec["w"] > 24:
                x, y = 0, y + 8
            d = d.with_panel(_panel(spec, panel_id, x, y))
            panel_id, x = panel_id + 1, x + spec["w"]
        y += 8
    return d.build()


def render(model: Optional[dashboard.Dashboard] = None) -> str:
    """The dashboard JSON text (sorted keys, 2-space indent, final newline)."""
    return json.dumps(model if model is not None else build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run scripts/gen_grafana_dashboard.py", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
