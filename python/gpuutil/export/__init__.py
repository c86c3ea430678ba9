"""Exporters of gpuutil reports to the tools users already run.

- :mod:`gpuutil.export.perfetto`: Chrome trace / Perfetto timeline JSON with
  an idle-cause track (from trace files, through the C++ core);
- :mod:`gpuutil.export.prometheus`: Prometheus text exposition, a local
  HTTP endpoint and a pushgateway push (needs prometheus_client), over the
  pure totals of :mod:`gpuutil.export.prometheus_families`;
- :mod:`gpuutil.export.otel`: OpenTelemetry metrics (needs opentelemetry-api);
- :mod:`gpuutil.export.html`: a self-contained HTML report with plots.

Each reads gpuutil.report/1 dicts (or trace files) and never the collectors.
See docs/exports.md.
"""
