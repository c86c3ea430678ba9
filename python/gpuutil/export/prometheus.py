"""Prometheus export of gpuutil step reports, through ``prometheus_client``.

:class:`PrometheusMetrics` is the running totals of
:class:`gpuutil.export.prometheus_families.ReportTotals` (fold step reports
and cluster records with ``add``, or pass it as ``gpuutil.profile(
on_step=metrics)``) delivered by the ``prometheus_client`` package, the one
exposition, server and push path (``pip install 'gpuutil[prometheus]'``):

- :meth:`PrometheusMetrics.exposition`: the text format 0.0.4, from
  ``generate_latest`` over a registry holding :meth:`collector`;
- :meth:`PrometheusMetrics.register`: the collector in a registry (default
  ``prometheus_client.REGISTRY``), read at each scrape;
- :func:`serve`: ``start_http_server`` in a daemon thread, on 127.0.0.1
  unless ``addr`` says otherwise (prometheus_client's own default is every
  interface); one per process: pick a port per rank, e.g. ``9400 +
  local_rank``;
- :func:`push`: ``push_to_gateway`` with the grouping key
  ``job/{job}/job_id/{job_id}/rank/{rank}/host/{host}``, so neither ranks
  nor jobs overwrite each other.

Importing this module needs nothing beyond gpuutil; each of those raises
:class:`PrometheusClientMissing` (an ImportError naming the package) when
``prometheus_client`` is not installed. Its multiprocess mode aggregates
its own Gauge/Counter files and does not apply to a collector: under
torchrun each rank serves its own port or pushes with its own grouping key.
"""

from __future__ import annotations

from typing import Any, Iterator

from gpuutil.export.prometheus_families import ReportTotals

MISSING = "Prometheus export needs the 'prometheus_client' package: pip install 'gpuutil[prometheus]'"


class PrometheusClientMissing(ImportError):
    """prometheus_client is not installed; the message says what to install."""


def _client() -> Any:
    """The prometheus_client module (with its ``core``), or PrometheusClientMissing."""
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as e:
        raise PrometheusClientMissing(MISSING) from e
    return prometheus_client


class MetricsCollector:
    """A prometheus_client collector over a PrometheusMetrics (read at each scrape)."""

    def __init__(self, metrics: ReportTotals) -> None:
        self.metrics = metrics
        self._core = _client().core

    def collect(self) -> Iterator[Any]:
        for name, kind, help_, samples in self.metrics.families():
            labels = list(samples[0][0])
            # CounterMetricFamily takes the name without "_total" and adds it to the samples.
            family = self._core.CounterMetricFamily if kind == "counter" else self._core.GaugeMetricFamily
            fam = family(name, help_, labels=labels)
            for sample_labels, value in samples:
                if list(sample_labels) != labels:  # a family keeps one label set; never split one
                    raise ValueError(f"{name}: samples with different label names")
                fam.add_metric(list(sample_labels.values()), value)
            yield fam

    def describe(self) -> Iterator[Any]:
        return iter(())  # families change with the reports; nothing to pre-declare


def _registry(metrics: ReportTotals) -> Any:
    """A private registry holding only these totals."""
    registry = _client().CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(metrics))
    return registry


class PrometheusMetrics(ReportTotals):
    """Running totals of step reports, exposed through prometheus_client."""

    def exposition(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of the totals."""
        return _client().generate_latest(_registry(self)).decode("utf-8")

    def collector(self) -> MetricsCollector:
        """These totals as a prometheus_client collector (the families of
        :meth:`families`, read at each scrape)."""
        return MetricsCollector(self)

    def register(self, registry: Any = None) -> MetricsCollector:
        """Registers :meth:`collector` with ``registry`` (default:
        ``prometheus_client.REGISTRY``); returns the collector (unregister
        it with ``registry.unregister(collector)``)."""
        collector = self.collector()
        (_client().REGISTRY if registry is None else registry).register(collector)
        return collector


def serve(metrics: ReportTotals, port: int = 0, addr: str = "127.0.0.1") -> Any:
    """Serves ``GET /metrics`` with prometheus_client's ``start_http_server``
    from a daemon thread; returns the server.

    Bound to loopback by default (prometheus_client alone would listen on
    every interface); pass ``addr="0.0.0.0"`` deliberately to expose it.
    Each connection gets its own thread, so a slow or idle client never
    blocks a scrape. ``port=0`` picks a free port (``server.server_port``).
    Stop with ``server.shutdown(); server.server_close()``.
    """
    server, _thread = _client().start_http_server(port, addr=addr, registry=_registry(metrics))
    return server


def push(metrics: ReportTotals, gateway: str, job: str = "gpuutil", rank: int = 0, timeout_s: float = 10.0) -> None:
    """PUTs the totals to a pushgateway with prometheus_client's
    ``push_to_gateway``, grouping key job (the pushgateway's scrape-job
    label), job_id, rank and host (values with ``/`` or spaces are
    base64-encoded in the path, as the pushgateway specifies).
    Raises OSError (urllib.error.URLError) when the gateway is unreachable
    or answers an error.
    """
    _client().push_to_gateway(gateway, job=job, registry=_registry(metrics),
                              grouping_key={"job_id": metrics.job_id, "rank": str(rank), "host": metrics.host},
                              timeout=timeout_s)
