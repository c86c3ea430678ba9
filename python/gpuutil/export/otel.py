"""OpenTelemetry metrics from gpuutil step reports (optional dependency).

:func:`record_reports` records each step's numbers with an OpenTelemetry
``Meter``: histograms of step wall time, counters of time per bucket
(compute, communication, memory, idle_<cause>), attributes rank, host and
device. It needs ``opentelemetry-api`` (and an SDK with an exporter
configured by the application); without it, importing this module raises
ImportError with the package to install.
"""

from __future__ import annotations

import socket
from typing import Any, Dict, Iterable, Optional

try:
    from opentelemetry import metrics as _otel_metrics
except ImportError as e:  # pragma: no cover - exercised only without the package
    raise ImportError("gpuutil.export.otel needs the 'opentelemetry-api' package (pip install "
                      "opentelemetry-api opentelemetry-sdk)") from e

from gpuutil._buckets import IDLE_CAUSES
from gpuutil._report_check import check_report
_BUCKETS = ("compute", "communication", "memory", *("idle_" + c for c in IDLE_CAUSES))


class OtelRecorder:
    """Records reports on a Meter (default: the global meter provider's 'gpuutil' meter)."""

    def __init__(self, meter: Optional[Any] = None, host: Optional[str] = None) -> None:
        self.meter = meter or _otel_metrics.get_meter("gpuutil")
        self.host = host if host is not None else socket.gethostname()
        self._wall = self.meter.create_histogram("gpuutil.step.wall", unit="s", description="step wall time")
        self._time = self.meter.create_counter("gpuutil.step.time", unit="s",
                                               description="step wall time by bucket; sums to step wall")
        self._busy = self.meter.create_histogram("gpuutil.step.busy_ratio", unit="1",
                                                 description="busy share of each step")

    def add(self, report: Dict[str, Any]) -> None:
        for step in report.get("steps", []):
            for d in step.get("devices", []):
                attrs = {"rank": int(d.get("rank", 0)), "device": int(d.get("device", 0)), "host": self.host}
                wall = int(d.get("wall_ns", 0))
                self._wall.record(wall / 1e9, attrs)
                if wall > 0:
                    self._busy.record(int(d.get("busy_ns", 0)) / wall, attrs)
                for b in _BUCKETS:
                    self._time.add(int(d.get("breakdown_ns", {}).get(b, 0)) / 1e9, {**attrs, "bucket": b})


def record_reports(reports: Iterable[Dict[str, Any]], meter: Optional[Any] = None) -> OtelRecorder:
    """Records reports read back from files (each is checked first: a
    malformed one raises ValueError naming its first bad field, before
    anything is recorded)."""
    reports = list(reports)
    for i, r in enumerate(reports):
        check_report(r, f"report {i}")
    rec = OtelRecorder(meter)
    for r in reports:
        rec.add(r)
    return rec
