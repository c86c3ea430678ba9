"""The Prometheus HTTP API for ``gpuutil fleet``: instant and range queries
over ``urllib`` (no dependency), every failure as one line.

:class:`PrometheusClient` checks the URL when it is made
(:class:`FleetError` for anything that is not ``http(s)://host[:port][/path]``),
and raises :class:`FleetError` with one line for an unreachable server, an
HTTP error, an answer that is not the API's JSON, or a query the server
refuses (its own error text).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional


class FleetError(Exception):
    """A problem ``gpuutil fleet`` reports on one line (exit 2)."""


def check_url(url: str) -> str:
    """The base URL without a trailing slash, or FleetError."""
    parsed = urllib.parse.urlsplit(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise FleetError(f"--prometheus: not an http(s) URL of a Prometheus server: {url!r}")
    try:
        parsed.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise FleetError(f"--prometheus: bad port in {url!r}") from None
    if parsed.query or parsed.fragment:
        raise FleetError(f"--prometheus: the URL takes no query or fragment: {url!r}")
    return url.strip().rstrip("/")


class PrometheusClient:
    """Queries one Prometheus server (``base_url``, e.g. http://prometheus:9090)."""

    def __init__(self, base_url: str, timeout_s: float = 30.0) -> None:
        self.base_url = check_url(base_url)
        self.timeout_s = timeout_s

    def _get(self, path: str, params: Dict[str, str]) -> Any:
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:  # noqa: S310 - http(s) checked
                body = resp.read()
        except urllib.error.HTTPError as e:
            body = e.read()
            error = _api_error(body)
            if error is None:
                raise FleetError(f"{self.base_url} answered HTTP {e.code} {e.reason} to {path}: is it a "
                                 "Prometheus server?") from None
            raise FleetError(f"Prometheus at {self.base_url} refused the query: {error}") from None
        except urllib.error.URLError as e:
            reason = e.reason.strerror if isinstance(e.reason, OSError) and e.reason.strerror else e.reason
            raise FleetError(f"cannot reach Prometheus at {self.base_url}: {reason}") from None
        except (socket.timeout, TimeoutError):
            raise FleetError(f"Prometheus at {self.base_url} did not answer within {self.timeout_s:g} s") from None
        except OSError as e:
            raise FleetError(f"cannot reach Prometheus at {self.base_url}: {e.strerror or e}") from None
        try:
            doc = json.loads(body)
        except ValueError:
            raise FleetError(f"{self.base_url}{path} did not answer with the Prometheus API's JSON: is it a "
                             "Prometheus server?") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            error = _api_error(body) or "no status"
            raise FleetError(f"Prometheus at {self.base_url} refused the query: {error}")
        return doc.get("data")

    def query(self, expr: str, time_s: Optional[float] = None) -> List[Dict[str, Any]]:
        """An instant query: [{"metric": {...}, "value": float}]."""
        params = {"query": expr}
        if time_s is not None:
            params["time"] = f"{time_s:.3f}"
        data = self._get("/api/v1/query", params)
        if not isinstance(data, dict) or data.get("resultType") not in ("vector", "scalar"):
            raise FleetError(f"Prometheus at {self.base_url} answered an unexpected result to {expr!r}")
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": float(data["result"][1])}]
        return [{"metric": r["metric"], "value": float(r["value"][1])} for r in data["result"]]

    def query_range(self, expr: str, start_s: float, end_s: float, step_s: float) -> List[Dict[str, Any]]:
        """A range query: [{"metric": {...}, "values": [(t_s, float), ...]}]."""
        data = self._get("/api/v1/query_range", {"query": expr, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}",
                                                 "step": f"{step_s:g}"})
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise FleetError(f"Prometheus at {self.base_url} answered an unexpected result to {expr!r}")
        return [{"metric": r["metric"], "values": [(float(t), float(v)) for t, v in r["values"]]}
                for r in data["result"]]


def _api_error(body: bytes) -> Optional[str]:
    """The API's own error text in an answer, if it has one."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("error"):
        return " ".join(f"{doc.get('errorType', 'error')}: {doc['error']}".split())
    return None
