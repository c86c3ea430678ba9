#!/usr/bin/env python3
"""What gpuutil's Prometheus exporter costs a rank with the fleet labels
(job_id, UUID, gpuutil_gpu_info, attached seconds, FLOPs, user units): the
time of one scrape's exposition (prometheus_client's generate_latest over
the collector) and of folding one step report (``add``, on the training
thread at each report batch), and how many series one rank exports.

    .venv/bin/python benchmarks/bench_fleet_exporter.py DIR/steps.rank0.jsonl

The JSONL is a rank's steps from a real run (e.g. tests/python/fleet_job.py
under torchrun; its leader's file holds the cross-rank view too). Results
with their command in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import sys
import timeit
from types import SimpleNamespace

from gpuutil import _run_file
from gpuutil.export.prometheus import PrometheusMetrics


def main() -> int:
    path = sys.argv[1]
    reports = list(_run_file.read_reports(path, cluster_records=True))
    metrics = PrometheusMetrics(host="node-1", gpu_uuids=["GPU-00000000-0000-4000-8000-000000000000"])
    metrics.on_profile_start(SimpleNamespace(job_id="bench", rank=0))  # as gpuutil.profile(on_step=metrics) does
    metrics.add_all(reports)
    metrics.count(samples=4, tokens=512, useful_steps=1)
    text = metrics.exposition()
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    per_gpu = [line for line in series if 'UUID="' in line]
    n = 1000
    scrape_s = min(timeit.repeat(metrics.exposition, number=n, repeat=5)) / n
    steps = [r for r in reports if r.get("schema") == "gpuutil.report/1"]
    add_s = min(timeit.repeat(lambda: [metrics.add(r) for r in steps], number=20, repeat=5)) / (20 * len(steps))
    print(f"{len(series)} series ({len(per_gpu)} per GPU), {len(text)} bytes")
    print(f"exposition (one scrape): {scrape_s * 1e6:.0f} us (best of 5 x {n})")
    print(f"add (one step report): {add_s * 1e6:.1f} us (best of 5 x 20 x {len(steps)} reports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
