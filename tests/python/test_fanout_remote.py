"""Rank traces read where they live (issue 30): an `s3://` bucket on a local
S3-compatible server (moto's server mode on 127.0.0.1, ThreadedMotoServer,
as s3fs's own test suite uses; read through s3fs) and `http://` URLs from a
local http.server, holding gzip traces. The fan-out's report from the URLs
equals its report from the same files read locally.

The traces are 4 ranks made by benchmarks/make_rank_traces.py from the
shared hta_nccl_a100_rank0.json.gz (rank 2 a DataLoader straggler), so the
reports compared carry a straggler, its cause and the others' wait. The
S3 endpoint reaches fsspec two ways: `storage_options` of
gpuutil.analyze_ranks, and for the CLI fsspec's environment configuration
(FSSPEC_S3_ENDPOINT_URL / FSSPEC_S3_KEY / FSSPEC_S3_SECRET), which the
local pool's worker processes inherit.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from conftest import REPO, traces_dir

gpuutil = pytest.importorskip("gpuutil")
boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

BASE_NAME = "hta_nccl_a100_rank0.json.gz"
RANKS = 4
STRAGGLER = 2
BUCKET = "traces"
KEY, SECRET = "testing", "testing"


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_rank_traces", REPO / "benchmarks" / "make_rank_traces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory) -> Path:
    base = traces_dir() / BASE_NAME
    if not base.is_file():
        pytest.skip(f"base trace {base} not found (set GPUUTIL_TRACES_DIR)")
    out = tmp_path_factory.mktemp("ranks")
    _load_generator().make_rank_traces(out, RANKS, STRAGGLER, 25.0, base=base)
    return out


@pytest.fixture(scope="module")
def s3_endpoint(local_dir: Path) -> Iterator[str]:
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET, region_name="us-east-1"
        )
        s3.create_bucket(Bucket=BUCKET)
        for p in sorted(local_dir.iterdir()):
            s3.upload_file(str(p), BUCKET, f"job/{p.name}")
        yield endpoint
    finally:
        server.stop()


@pytest.fixture(scope="module")
def http_base(local_dir: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(local_dir))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep the test's output clean
        pass


@pytest.fixture(scope="module")
def local_report(local_dir: Path) -> Dict[str, Any]:
    return gpuutil.analyze_ranks([str(local_dir)], jobs=2)


def _comparable(report: Dict[str, Any]) -> Dict[str, Any]:
    """The report without the one field that names where each input lives
    (ranks_detail[].input: a path or a URL; hosts are base names)."""
    out = dict(report)
    out["ranks_detail"] = [{k: v for k, v in d.items() if k != "input"} for d in report["ranks_detail"]]
    return out


def test_local_report_has_the_planted_straggler(local_report: Dict[str, Any]) -> None:
    found = [(f["rank"], f["cause"]) for f in local_report["findings"] if f["id"] == "straggler"]
    assert found == [(STRAGGLER, "dataloader")]


def test_s3_prefix_read_through_storage_options_gives_the_local_report(
    s3_endpoint: str, local_report: Dict[str, Any]
) -> None:
    opts = {"endpoint_url": s3_endpoint, "key": KEY, "secret": SECRET}
    remote = gpuutil.analyze_ranks([f"s3://{BUCKET}/job/"], jobs=2, storage_options=opts)
    assert _comparable(remote) == _comparable(local_report)
    assert [r["host"] for r in remote["summary"]["ranks"]] == [f"rank{r:05d}.json.gz" for r in range(RANKS)]


def test_http_urls_give_the_local_report(http_base: str, local_report: Dict[str, Any]) -> None:
    urls = [f"{http_base}/rank{r:05d}.json.gz" for r in range(RANKS)]
    remote = gpuutil.analyze_ranks(urls, jobs=2)
    assert _comparable(remote) == _comparable(local_report)


def test_cli_reads_an_s3_glob_with_the_endpoint_from_the_environment(
    s3_endpoint: str, local_dir: Path, gpuutil_exe: str
) -> None:
    env = dict(
        os.environ,
        FSSPEC_S3_ENDPOINT_URL=s3_endpoint,
        FSSPEC_S3_KEY=KEY,
        FSSPEC_S3_SECRET=SECRET,
        AWS_DEFAULT_REGION="us-east-1",
    )
    remote = subprocess.run(
        [gpuutil_exe, "analyze", f"s3://{BUCKET}/job/rank*.json.gz", "--json", "--jobs", "2", "--no-progress"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert remote.returncode == 0, remote.stderr
    local = subprocess.run(
        [gpuutil_exe, "analyze", str(local_dir), "--json", "--jobs", "2", "--no-progress"],
        capture_output=True, text=True, timeout=120,
    )
    assert local.returncode == 0, local.stderr
    assert _comparable(json.loads(remote.stdout)) == _comparable(json.loads(local.stdout))
