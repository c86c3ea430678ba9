"""gpuutil's Prometheus totals inside the ``prometheus_client`` library.

:class:`MetricsCollector` turns a :class:`gpuutil.export.prometheus.
PrometheusMetrics` into a prometheus_client collector: at each scrape it
yields the same families (names, HELP with scope, labels, values) as the
built-in text exposition, as Gauge/Counter metric families, so a registry
holding it serves them through prometheus_client's HTTP server
(``start_http_server``), its exposition (``generate_latest``) and its
pushgateway client (``push_to_gateway``). Importing this module needs
``prometheus_client`` (``pip install gpuutil[prometheus]``).

prometheus_client's multiprocess mode aggregates its own Gauge/Counter
objects through files and does not apply to collectors like this one:
under torchrun each rank serves its own port or pushes with its own
grouping key (``rank``, ``host``), as :func:`push_with_client` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

try:
    from prometheus_client import CollectorRegistry, push_to_gateway
    from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily
except ImportError as e:  # pragma: no cover - exercised only without the package
    raise ImportError(
        "this needs the 'prometheus_client' package (pip install gpuutil[prometheus]); without it use "
        "gpuutil.export.prometheus.serve() or .exposition()"
    ) from e

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil.export.prometheus import PrometheusMetrics


class MetricsCollector:
    """A prometheus_client collector over a PrometheusMetrics (read at each scrape)."""

    def __init__(self, metrics: "PrometheusMetrics") -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        for name, kind, help_, samples in self.metrics.families():
            labels = list(samples[0][0]) if samples else []
            if kind == "counter":
                # prometheus_client adds "_total" to a counter's samples itself.
                fam: Any = CounterMetricFamily(name.removesuffix("_total"), help_, labels=labels)
            else:
                fam = GaugeMetricFamily(name, help_, labels=labels)
            for sample_labels, value in samples:
                if list(sample_labels) != labels:  # families keep one label set; never split one
                    raise ValueError(f"{name}: samples with different label names")
                fam.add_metric(list(sample_labels.values()), value)
            yield fam

    def describe(self) -> Iterator[Any]:
        return iter(())  # families change with the reports; nothing to pre-declare


def register(metrics: "PrometheusMetrics", registry: Any = None) -> MetricsCollector:
    collector = MetricsCollector(metrics)
    (REGISTRY if registry is None else registry).register(collector)
    return collector


def push_with_client(metrics: "PrometheusMetrics", gateway: str, job: str, rank: int, timeout_s: float) -> int:
    """push() through prometheus_client's push_to_gateway; returns 200 on success
    (the client raises on an HTTP error)."""
    registry = CollectorRegistry()
    registry.register(MetricsCollector(metrics))
    push_to_gateway(gateway, job=job, registry=registry, grouping_key={"rank": str(rank), "host": metrics.host},
                    timeout=timeout_s)
    return 200
