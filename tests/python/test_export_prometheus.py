"""Tests of the Prometheus exporter (python/gpuutil/export/prometheus.py,
prometheus_families.py).

The exposition must parse with prometheus_client's own parser, carry rank,
host and device labels, keep the bucket identity (buckets sum to step
wall), include device health when counters were sampled, be served on
127.0.0.1 unless told otherwise, answer a scrape while slow and idle
clients hold connections, reach a pushgateway with a job/rank/host grouping
key (a local fake gateway here), and say which package to install when
prometheus_client is missing. The fleet labels (job_id, UUID, gpu_info,
FLOPs, user units) are pinned in test_fleet_series.py.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

from gpuutil.export import prometheus

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client not installed (requirements-dev.txt)")

RESNET = "kineto_resnet50_nw4_v100.json.gz"


@pytest.fixture(scope="module")
def report(trace, installed_gpuutil):
    return installed_gpuutil.analyze(trace(RESNET))


def _families(text):
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def test_exposition_parses_with_prometheus_client(report):
    text = prometheus.PrometheusMetrics(host="node-7").add_all([report]).exposition()
    fams = _families(text)
    for name in ("gpuutil_steps", "gpuutil_step_wall_seconds", "gpuutil_busy_seconds", "gpuutil_time_seconds",
                 "gpuutil_busy_ratio", "gpuutil_finding_recoverable_seconds"):
        assert name in fams, sorted(fams)
    walls = [s for s in fams["gpuutil_step_wall_seconds"].samples]
    assert walls and all(s.labels["rank"] == "0" and s.labels["host"] == "node-7" for s in walls)
    assert walls[0].labels["device"] == "0"
    # Buckets sum to the step wall (the accounting identity survives export).
    buckets = [s for s in fams["gpuutil_time_seconds"].samples if s.name == "gpuutil_time_seconds_total"]
    assert {s.labels["bucket"] for s in buckets} >= {"compute", "idle_dataloader", "idle_unattributed"}
    assert sum(s.value for s in buckets) == pytest.approx(walls[0].value, rel=1e-9)
    steps = next(s for s in fams["gpuutil_steps"].samples if s.name == "gpuutil_steps_total")
    assert steps.value == len(report["steps"])


def test_health_counters_are_exported_with_units(report):
    rep = dict(report)
    rep["steps"] = [dict(s, devices=[dict(d, health={"power_w": 300.0, "temperature_c": 71.0,
                                                      "energy_j": 12.5, "throttle_power_ns": 2_000_000,
                                                      "nvml_utilization_pct": 88.0})
                                     for d in s["devices"]]) for s in report["steps"]]
    fams = _families(prometheus.PrometheusMetrics(host="h").add_all([rep]).exposition())
    assert fams["gpuutil_power_watts"].samples[0].value == 300.0
    assert fams["gpuutil_temperature_celsius"].samples[0].value == 71.0
    assert fams["gpuutil_nvml_utilization_ratio"].samples[0].value == pytest.approx(0.88)
    n = len(report["steps"])
    energy = next(s for s in fams["gpuutil_energy_joules"].samples if s.name.endswith("_total"))
    assert energy.value == pytest.approx(12.5 * n)
    thr = next(s for s in fams["gpuutil_throttle_power_seconds"].samples if s.name.endswith("_total"))
    assert thr.value == pytest.approx(0.002 * n)


def test_label_values_are_escaped():
    m = prometheus.PrometheusMetrics(host='we"ird\\host', job_id="j/1 \"x\"")
    m.add({"steps": [{"step": 0, "wall_ns": 10, "devices": [{"rank": 3, "device": 1, "wall_ns": 10, "busy_ns": 5,
                                                            "breakdown_ns": {"compute": 5, "idle_host": 5}}]}]})
    fams = _families(m.exposition())
    s = fams["gpuutil_busy_ratio"].samples[0]
    assert s.labels == {"job_id": 'j/1 "x"', "rank": "3", "host": 'we"ird\\host', "device": "1", "UUID": ""}
    assert s.value == 0.5


def test_http_endpoint_serves_on_loopback(report):
    metrics = prometheus.PrometheusMetrics(host="h").add_all([report])
    server = prometheus.serve(metrics, port=0)
    try:
        assert server.socket.getsockname()[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = resp.read().decode()
        assert "gpuutil_busy_ratio" in _families(body)
        # Live updates: a new report shows up on the next scrape.
        metrics.add(report)
        with urllib.request.urlopen(url, timeout=10) as resp:
            steps = next(s for s in _families(resp.read().decode())["gpuutil_steps"].samples
                         if s.name == "gpuutil_steps_total")
        assert steps.value == 2 * len(report["steps"])
    finally:
        server.shutdown()
        server.server_close()


def test_push_to_gateway_uses_rank_and_host_grouping(report):
    received = {}

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802
            received["path"] = self.path
            received["body"] = self.rfile.read(int(self.headers["Content-Length"])).decode()
            received["type"] = self.headers["Content-Type"]
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    gw = http.server.HTTPServer(("127.0.0.1", 0), Gateway)
    t = threading.Thread(target=gw.serve_forever, daemon=True)
    t.start()
    try:
        metrics = prometheus.PrometheusMetrics(host="node 1").add_all([report])
        prometheus.push(metrics, f"127.0.0.1:{gw.server_port}", job="nightly", rank=2)
    finally:
        gw.shutdown()
        gw.server_close()
    # prometheus_client's push_to_gateway sends it (values with spaces are
    # base64-encoded in the path, as the pushgateway documents).
    assert _grouping(received["path"]) == {"job": "nightly", "job_id": metrics.job_id, "rank": "2", "host": "node 1"}
    assert "gpuutil_time_seconds" in _families(received["body"])
    assert received["type"].startswith("text/plain")


def _grouping(path):
    """A pushgateway URL path as {label: value} (plain or @base64 values)."""
    import base64
    import urllib.parse

    parts = path.split("/")[2:]  # after "/metrics"
    out = {}
    for key, value in zip(parts[::2], parts[1::2]):
        if key.endswith("@base64"):
            key, value = key[: -len("@base64")], base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        out[key] = urllib.parse.unquote(value)
    return out


def _samples(text):
    return sorted((s.name, tuple(sorted(s.labels.items())), s.value)
                  for f in parser.text_string_to_metric_families(text) for s in f.samples)


def test_register_puts_the_same_series_in_a_registry_until_unregistered(report):
    """metrics.register(registry): that registry's exposition gives exactly
    the samples of metrics.exposition() (names, labels, values; counters
    keep their _total names), read at each scrape, until unregistered."""
    from prometheus_client import CollectorRegistry, generate_latest

    metrics = prometheus.PrometheusMetrics(host="node-7").add_all([report])
    registry = CollectorRegistry()
    collector = metrics.register(registry)
    ours = _samples(metrics.exposition())
    assert _samples(generate_latest(registry).decode()) == ours
    assert any(name == "gpuutil_steps_total" for name, _, _ in ours)
    metrics.add(report)
    assert _samples(generate_latest(registry).decode()) == _samples(metrics.exposition()) != ours
    registry.unregister(collector)
    assert generate_latest(registry) == b""


def test_cli_export_prometheus(run_cli, trace):
    proc = run_cli("export", "prometheus", trace(RESNET), "--host", "ci")
    assert proc.returncode == 0, proc.stderr
    fams = _families(proc.stdout)
    assert fams["gpuutil_busy_ratio"].samples[0].labels["host"] == "ci"


def _one_step_metrics():
    metrics = prometheus.PrometheusMetrics(host="h")
    metrics.add({"steps": [{"step": 0, "wall_ns": 10, "devices": [{"rank": 0, "device": 0, "wall_ns": 10,
                                                                  "busy_ns": 5, "breakdown_ns": {"compute": 5}}]}]})
    return metrics


def test_the_endpoint_binds_loopback_unless_told_otherwise():
    metrics = _one_step_metrics()
    for kwargs, address in (({}, "127.0.0.1"), ({"addr": "127.0.0.2"}, "127.0.0.2")):
        server = prometheus.serve(metrics, **kwargs)
        try:
            assert server.socket.getsockname()[0] == address
            with urllib.request.urlopen(f"http://{address}:{server.server_port}/metrics", timeout=5) as resp:
                assert "gpuutil_steps_total" in resp.read().decode()
        finally:
            server.shutdown()
            server.server_close()


def test_slow_and_idle_clients_do_not_block_a_scrape():
    """Eight clients trickling their request one byte a second and 200 idle
    connections stay connected while a scrape is answered at once (the
    hand-written endpoint this replaced refused every scrape meanwhile)."""
    server = prometheus.serve(_one_step_metrics())
    address = ("127.0.0.1", server.server_port)
    slow, idle = [], []
    for conns, n in ((slow, 8), (idle, 200)):
        for _ in range(n):
            conns.append(socket.create_connection(address))
            time.sleep(0.002)  # paced: the server's listen backlog is 5, a burst waits on SYN retries
    stop = threading.Event()
    request = b"GET /metrics HTTP/1.1\r\nHost: gpuutil-test\r\n"

    def trickle():
        for i in range(len(request)):
            for s in slow:
                s.sendall(request[i:i + 1])
            if stop.wait(1.0):
                return

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        time.sleep(1.5)  # two bytes each so far: every slow client is mid-request
        start_s = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        elapsed_s = time.monotonic() - start_s
        assert "gpuutil_steps_total" in body
        assert elapsed_s < 2.0, elapsed_s
        assert trickler.is_alive()  # still trickling: the scrape did not wait for them
        for s in slow + idle:  # nobody was answered or closed: no data, no EOF
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
    finally:
        stop.set()
        trickler.join()
        for s in slow + idle:
            s.close()
        server.shutdown()
        server.server_close()


def test_without_prometheus_client_each_path_names_the_package_to_install(report, tmp_path):
    """With prometheus_client missing, gpuutil still imports; exposition,
    register, collector, serve and push raise an ImportError naming the
    extra to install, and `gpuutil export prometheus` prints it on one line
    and exits 2."""
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    script = textwrap.dedent('''
        import sys
        sys.modules["prometheus_client"] = None  # as if not installed
        import gpuutil
        from gpuutil import cli
        from gpuutil.export import prometheus
        m = prometheus.PrometheusMetrics(host="h")
        for call in (m.exposition, m.register, m.collector, lambda: prometheus.serve(m),
                     lambda: prometheus.push(m, "127.0.0.1:9")):
            try:
                call()
                print("no error")
            except ImportError as e:
                print(e)
        sys.exit(cli.main(["export", "prometheus", sys.argv[1]]))
    ''')
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    message = "Prometheus export needs the 'prometheus_client' package: pip install 'gpuutil[prometheus]'"
    assert proc.stdout.splitlines() == [message] * 5
    assert proc.returncode == 2
    assert proc.stderr == f"gpuutil: error: {message}\n"
