"""Tests of `gpuutil fleet`'s failures, each one stderr line and exit 2:
a bad URL, an unreachable server, a server that is not Prometheus (HTML,
or HTTP errors), a query the server refuses, a bad --since, and a server
with no gpuutil series. (Its output against a real Prometheus is pinned in
test_fleet_e2e.py.) Fake servers on 127.0.0.1 stand in for the others.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest


def _serve(status: int, body: bytes, content_type: str = "application/json"):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def fake_server():
    servers = []

    def start(status, body, content_type="application/json"):
        servers.append(_serve(status, body, content_type))
        return f"http://127.0.0.1:{servers[-1].server_port}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.startswith("gpuutil: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


@pytest.mark.parametrize("url", ["prometheus:9090", "ftp://host:21", "http://", "http://h:99999", "http://h/?x=1"])
def test_a_bad_url_is_one_line(run_cli, url):
    err = _one_line_error(run_cli("fleet", "--prometheus", url))
    assert "--prometheus" in err


def test_an_unreachable_server_is_one_line(run_cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    err = _one_line_error(run_cli("fleet", "--prometheus", f"http://127.0.0.1:{port}"))
    assert f"cannot reach Prometheus at http://127.0.0.1:{port}" in err


def test_a_server_that_is_not_prometheus_is_one_line(run_cli, fake_server):
    err = _one_line_error(run_cli("fleet", "--prometheus", fake_server(404, b"<html>not here</html>", "text/html")))
    assert "answered HTTP 404" in err and "is it a Prometheus server?" in err
    err = _one_line_error(run_cli("fleet", "--prometheus", fake_server(200, b"<html>a web page</html>", "text/html")))
    assert "did not answer with the Prometheus API's JSON" in err


def test_a_refused_query_gives_the_servers_own_reason(run_cli, fake_server):
    body = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error:\nunexpected"}).encode()
    err = _one_line_error(run_cli("fleet", "--prometheus", fake_server(400, body)))
    assert "refused the query: bad_data: parse error: unexpected" in err


def test_no_gpuutil_series_is_one_line(run_cli, fake_server):
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    err = _one_line_error(run_cli("fleet", "--prometheus", fake_server(200, body), "--since", "30d"))
    assert "no gpuutil series in Prometheus at" in err and "over the last 30d" in err


def test_a_bad_window_exits_2(run_cli):
    proc = run_cli("fleet", "--prometheus", "http://127.0.0.1:9", "--since", "a week")
    assert proc.returncode == 2
    assert "not a Prometheus duration" in proc.stderr
