"""Tests of the OpenTelemetry exporter (python/gpuutil/export/otel.py).

Runs only when opentelemetry-sdk is installed (requirements-dev.txt pins
it): records a real trace's report through an in-memory metric reader and
checks the step-wall histogram count and that the per-bucket time adds up
to the step wall, with rank/host/device attributes.
"""

from __future__ import annotations

import pytest

sdk_metrics = pytest.importorskip("opentelemetry.sdk.metrics", reason="opentelemetry-sdk not installed")
export_mod = pytest.importorskip("opentelemetry.sdk.metrics.export")

RESNET = "kineto_resnet50_nw4_v100.json.gz"


def test_report_metrics_are_recorded_with_attributes(trace, installed_gpuutil):
    from gpuutil.export import otel

    report = installed_gpuutil.analyze(trace(RESNET))
    reader = export_mod.InMemoryMetricReader()
    provider = sdk_metrics.MeterProvider(metric_readers=[reader])
    otel.record_reports([report], meter=provider.get_meter("test"))
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    wall = metrics["gpuutil.step.wall"].data.data_points
    assert sum(p.count for p in wall) == len(report["steps"])
    total_wall_s = sum(p.sum for p in wall)
    times = metrics["gpuutil.step.time"].data.data_points
    assert sum(p.value for p in times) == pytest.approx(total_wall_s, rel=1e-9)
    attrs = dict(times[0].attributes)
    assert attrs["rank"] == 0 and attrs["device"] == 0 and "host" in attrs and "bucket" in attrs
