"""The fleet layer end to end, against a real Prometheus server (Debian's
``prometheus`` 2.42; scripts/bootstrap.sh installs it, CI runs this test).

A Prometheus on 127.0.0.1 with a temporary config (scrape and evaluation
every second) scrapes (a) a two-rank torchrun CPU job (tests/python/
fleet_job.py: gloo, each rank's device the fake CUPTI, a planted DataLoader
stall, each rank on a GPU named by the documented override) and (b) a
static page served as dcgm-exporter's, listing three GPUs, two of them the
job's. The rules (deploy/prometheus/gpuutil-rules.yml) are loaded once
every target is up. Then, through the HTTP API:

- the job's recorded bucket shares equal its own JSONL totals within one
  scrape interval (the steps the first scrape already held are outside the
  rate's window);
- the allocation ratio is 2/3;
- the starved-pipeline alert is pending (or firing);
- every panel of the Grafana dashboard (deploy/grafana/gpuutil-fleet.json)
  returns data;
- `gpuutil fleet` prints the job and the 2/3, and its HTML page, opened in
  headless Chromium, draws its plots (GPUUTIL_UPDATE_DOCS_IMG=1 refreshes
  docs/img/fleet.png); with no gpuutil series, or no rules loaded, it says
  so on one line and exits 2.

The server, the job and the fake exporter are stopped in `finally`
(the job's process group is killed if it does not exit), and the test
checks nothing it started is still running.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest

from conftest import REPO
from fleet_promtool import RULES, tool
from test_export_html import _chromium, _count_colors, _read_png
from test_live import _fake_cupti

torch = pytest.importorskip("torch")

JOB = Path(__file__).resolve().parent / "fleet_job.py"
DASHBOARD = REPO / "deploy" / "grafana" / "gpuutil-fleet.json"
JOB_ID = "fleet-e2e"
UUIDS = [f"GPU-1b2c3d4e-0000-4000-8000-00000000000{i}" for i in range(3)]  # the job is on 0 and 1
SCRAPE_S = 1.0
REPORT_INTERVAL_S = 0.1  # gpuutil.profile's default report_interval_ms


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dcgm_page() -> bytes:
    """dcgm-exporter's exposition for three GPUs on one host (its labels: UUID, gpu, Hostname, ...)."""
    lines = []
    for name, kind, values in (("DCGM_FI_DEV_GPU_UTIL", "gauge", (97, 95, 0)),
                               ("DCGM_FI_PROF_SM_ACTIVE", "gauge", (0.31, 0.30, 0.0)),
                               ("DCGM_FI_DEV_FB_USED", "gauge", (30210, 30190, 0)),
                               ("DCGM_FI_DEV_POWER_USAGE", "gauge", (182.5, 180.1, 61.0))):
        lines += [f"# HELP {name} {name}.", f"# TYPE {name} {kind}"]
        for i, (uuid, v) in enumerate(zip(UUIDS, values)):
            lines.append(f'{name}{{gpu="{i}",UUID="{uuid}",device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",'
                         f'Hostname="node-1",DCGM_FI_DRIVER_VERSION="550.54.15"}} {v}')
    return ("\n".join(lines) + "\n").encode()


class _Dcgm(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *a):
        pass


def _api(base: str, path: str, **params: Any) -> Any:
    url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as resp:
        doc = json.loads(resp.read())
    assert doc["status"] == "success", doc
    return doc["data"]


def _query(base: str, expr: str) -> List[Dict[str, Any]]:
    return _api(base, "/api/v1/query", query=expr)["result"]


def _wait(what: str, check, timeout_s: float, procs=()) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"{p.args[0]} exited with {p.returncode} while waiting for {what}"
        try:
            result = check()
        except (OSError, ValueError):
            result = None
        if result:
            return result
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _jsonl_steps(path: Path) -> List[Dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        if doc.get("schema") == "gpuutil.report/1":
            out.extend(doc["steps"])
    return out


def _shares(steps: List[Dict[str, Any]]) -> Dict[str, float]:
    totals: Dict[str, int] = {}
    for s in steps:
        for d in s["devices"]:
            for b, ns in d["breakdown_ns"].items():
                totals[b] = totals.get(b, 0) + ns
    wall = sum(totals.values())
    return {b: ns / wall for b, ns in totals.items()}


def _panel_exprs() -> List[List[str]]:
    """Each panel's queries with the template variables as Grafana would fill them for 'All'."""
    doc = json.loads(DASHBOARD.read_text())
    subst = {'"$job"': '".*"', '"$host"': '".*"', '"$rank"': '".*"', "$__range": "5m"}
    panels = []
    for p in doc["panels"]:
        exprs = []
        for t in p.get("targets", []):
            e = t["expr"]
            for k, v in subst.items():
                e = e.replace(k, v)
            exprs.append(e)
        if exprs:
            panels.append(exprs)
    return panels


def _stop(proc: subprocess.Popen, timeout_s: float) -> None:
    """Waits for proc, then ends its process group (never a broad kill)."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_rules_dashboard_and_gpuutil_fleet_against_a_real_prometheus(tmp_path: Path, run_cli) -> None:
    prometheus_exe = tool("prometheus")
    fake = _fake_cupti()
    if not torch.distributed.is_available():  # pragma: no cover
        pytest.skip("this torch build has no torch.distributed")
    out, rules_dir = tmp_path / "job", tmp_path / "rules"
    out.mkdir()
    rules_dir.mkdir()
    prom_port, ports = _free_port(), []
    base = f"http://127.0.0.1:{prom_port}"

    _Dcgm.page = _dcgm_page()
    dcgm = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Dcgm)
    threading.Thread(target=dcgm.serve_forever, daemon=True).start()
    config = tmp_path / "prometheus.yml"

    def write_config() -> None:  # the job's endpoints once it said which ports it bound
        config.write_text(json.dumps({
            "global": {"scrape_interval": f"{SCRAPE_S:g}s", "evaluation_interval": f"{SCRAPE_S:g}s",
                       "scrape_timeout": "900ms"},
            "rule_files": [str(rules_dir / "*.yml")],
            "scrape_configs": [
                {"job_name": "dcgm-exporter", "static_configs": [{"targets": [f"127.0.0.1:{dcgm.server_port}"]}]},
                {"job_name": "gpuutil", "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}]},
            ],
        }))

    def reload() -> None:
        with urllib.request.urlopen(urllib.request.Request(f"{base}/-/reload", method="POST"), timeout=10):
            pass

    write_config()
    prom_log = (tmp_path / "prometheus.log").open("w")
    job_log = (tmp_path / "job.log").open("w")
    prom = job = None
    try:
        prom = subprocess.Popen(
            [prometheus_exe, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--web.enable-lifecycle"],
            stdout=prom_log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait("Prometheus to answer", lambda: _api(base, "/api/v1/status/buildinfo"), 60, [prom])

        # No gpuutil series yet: one line, exit 2.
        empty = run_cli("fleet", "--prometheus", base, "--since", "5m")
        assert empty.returncode == 2
        assert empty.stderr.startswith("gpuutil: error: no gpuutil series in Prometheus at") and \
            empty.stderr.count("\n") == 1, empty.stderr

        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", GPUUTIL_CUPTI_LIBRARY=fake)
        job = subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(JOB),
             "--out", str(out), "--uuids", ",".join(UUIDS[:2]),
             "--job-id", JOB_ID],
            env=env, stdout=job_log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait("both ranks' metrics ports", lambda: all((out / f"port.{r}").exists() for r in (0, 1)), 120,
              [prom, job])
        ports[:] = [int((out / f"port.{r}").read_text()) for r in (0, 1)]
        write_config()
        reload()
        _wait("both ranks' gpuutil_gpu_info in Prometheus",
              lambda: len(_query(base, "gpuutil_gpu_info")) == 2, 180, [prom, job])
        _wait("every target up", lambda: all(t["health"] == "up" for t in
                                             _api(base, "/api/v1/targets")["activeTargets"]), 30, [prom, job])

        # Series but no rules: one line that says to load them.
        norules = run_cli("fleet", "--prometheus", base, "--since", "5m")
        assert norules.returncode == 2 and "load deploy/prometheus/gpuutil-rules.yml" in norules.stderr

        shutil.copyfile(RULES, rules_dir / "gpuutil-rules.yml")
        reload()
        _wait("the job's OEE recorded", lambda: _query(base, "job_id:gpuutil_oee_ratio:rate5m"), 60, [prom, job])
        alerts = _wait("the starved-pipeline alert", lambda: [
            a for a in _api(base, "/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == "GpuutilInputPipelineStarved"], 30, [prom, job])
        assert alerts[0]["state"] in ("pending", "firing")
        assert alerts[0]["labels"]["job_id"] == JOB_ID and alerts[0]["labels"]["bucket"] == "idle_dataloader"

        # While the job steps: every dashboard panel has data; gpuutil fleet reads the server.
        # (the rule groups evaluate independently: the cost group reads the job group's records a cycle later)
        def empty_panels() -> List[List[str]]:
            return [exprs for exprs in _panel_exprs() if not any(_query(base, e) for e in exprs)]

        _wait("every dashboard panel to have data", lambda: not empty_panels(), 30, [prom, job])
        time.sleep(8)  # some history for the page's plots (the job keeps stepping)
        html_page = tmp_path / "fleet.html"
        fleet = run_cli("fleet", "--prometheus", base, "--since", "5m", "--html", html_page)
        assert fleet.returncode == 0, fleet.stderr
        assert "allocation 66.7%" in fleet.stdout, fleet.stdout
        row = next(line for line in fleet.stdout.splitlines() if line.startswith(JOB_ID))
        assert row.split()[1] == "2"  # GPUs
        assert "dataloader" in row  # the top idle cause

        # Freeze: the job stops stepping, its profile and endpoints stay up.
        (out / "stop-steps").touch()
        _wait("both ranks to stop stepping", lambda: all((out / f"stepped.rank{r}.json").exists()
                                                         for r in (0, 1)), 60, [prom, job])
        time.sleep(2 * SCRAPE_S + 2 * REPORT_INTERVAL_S + 1)  # last reports delivered, scraped and evaluated

        allocation = _query(base, "fleet:gpu_allocation_ratio:avg5m")
        assert len(allocation) == 1 and float(allocation[0]["value"][1]) == pytest.approx(2 / 3, abs=1e-9)
        recorded = {r["metric"]["bucket"]: float(r["value"][1])
                    for r in _query(base, f'job_id_bucket:gpuutil_time_ratio:rate5m{{job_id="{JOB_ID}"}}')}
        assert sum(recorded.values()) == pytest.approx(1, abs=1e-9)

        # The page in headless Chromium: the hour bars, the job's lines, its idle causes.
        from gpuutil.export.html import COLORS
        from gpuutil.fleet import html as fleet_html

        shot = tmp_path / "fleet.png"
        subprocess.run([_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--no-first-run", "--disable-background-networking", "--window-size=900,1700",
                        f"--screenshot={shot}", html_page.as_uri()], capture_output=True, text=True, timeout=120)
        assert shot.is_file() and shot.stat().st_size > 0
        width, height, pixels = _read_png(shot)
        counts = _count_colors(pixels, {"hour": fleet_html.BAR_COLOR, "job": fleet_html.JOB_COLORS[0],
                                        "dataloader": COLORS["idle_dataloader"]})
        assert counts["hour"] > 500 and counts["job"] > 500 and counts["dataloader"] > 2000, counts
        if os.environ.get("GPUUTIL_UPDATE_DOCS_IMG") == "1":
            shutil.copyfile(shot, REPO / "docs" / "img" / "fleet.png")
            print(fleet.stdout)  # for docs/fleet.md (pytest -s)
    finally:
        (out / "exit").touch()
        if job is not None:
            _stop(job, 60)
        if prom is not None and prom.poll() is None:
            prom.terminate()
            _stop(prom, 30)
        dcgm.shutdown()
        dcgm.server_close()
        prom_log.close()
        job_log.close()
    assert job.returncode == 0, (tmp_path / "job.log").read_text()[-4000:]
    assert prom.returncode is not None

    # The job's own JSONL totals (complete once it stopped) against the recorded shares.
    steps = {r: _jsonl_steps(out / f"steps.rank{r}.jsonl") for r in (0, 1)}
    stepped = {r: json.loads((out / f"stepped.rank{r}.json").read_text())["steps"] for r in (0, 1)}
    assert {r: len(s) for r, s in steps.items()} == stepped
    jsonl = _shares(steps[0] + steps[1])
    assert jsonl["idle_dataloader"] > 0.5  # the planted stall
    # The steps each rank's first scrape already held are outside the rate's window: at most one scrape
    # interval (and a report batch) of steps; the recorded share lies within that of the JSONL's.
    first_s = SCRAPE_S + 2 * REPORT_INTERVAL_S
    later = []
    for s in steps.values():
        t0 = s[0]["end_ns"]
        later += [x for x in s if x["end_ns"] - t0 > first_s * 1e9]
    bound = _shares(later)
    for bucket, share in jsonl.items():
        tolerance = abs(share - bound[bucket]) + 0.01
        assert recorded.get(bucket, 0.0) == pytest.approx(share, abs=tolerance), (bucket, recorded, jsonl)
    for port in (prom_port, *ports):  # nothing left listening
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, port
