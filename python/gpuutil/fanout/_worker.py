"""The unit of work of the fan-out: one rank's trace in, a small picklable
dict out. Runs in a worker process (the local pool's, a Dask or Ray
worker), so it imports only gpuutil._core and the standard library.

A local path is streamed by the C++ importer; a URL is read through fsspec
into one bytes object (still compressed) and parsed in place. The trace's
events never leave the C++ call: what comes back is the rank's RankStep
batch (what a live rank publishes) and a compact summary of its own report
(per device: wall, busy/idle and the breakdown; its top findings and its
diagnostics), so the parent's memory does not grow with trace sizes.
"""

from __future__ import annotations

import json
import os
import resource
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict

#: A rank's findings kept in its summary (its report ranks them by cost).
TOP_FINDINGS = 5
_DEVICE_KEYS = ("device", "rank", "name", "wall_ns", "busy_pct", "idle_pct", "breakdown_ns", "mfu", "hfu")
_SUMMARY_KEYS = ("steps", "steps_wall_ns", "trace_span_ns", "step_wall_p50_ns")


def _peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def compact_summary(report: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The part of one rank's report the cluster report keeps."""
    summary = report.get("summary") or {}
    out: Dict[str, Any] = {"input": name}
    for key in _SUMMARY_KEYS:
        out[key] = summary.get(key)
    src = (report.get("sources") or [{}])[0]
    out["steps_source"] = src.get("steps_source")
    out["devices"] = [{k: d.get(k) for k in _DEVICE_KEYS if k in d} for d in summary.get("devices") or []]
    out["findings"] = list((report.get("findings") or [])[:TOP_FINDINGS])
    out["diagnostics"] = [{k: d.get(k) for k in ("name", "severity", "count", "description", "example")}
                          for d in report.get("diagnostics") or []]
    out["workload"] = report.get("workload")
    return out


def analyze_one(name: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """Analyses the trace `name` as one rank. Never raises for a bad trace:
    {"rank", "name", "error": one line} then. Otherwise {"rank", "name",
    "steps", "batch_json", "summary_json", "bytes_read", "seconds",
    "peak_rss_bytes"} (the last three describe the work, never the report)."""
    from gpuutil import _core

    t0 = time.monotonic()
    rank = options.get("rank")
    out: Dict[str, Any] = {"rank": rank, "name": name}
    kwargs = {
        "rank": rank,
        "flops_per_step": options.get("flops_per_step"),
        "dtype": options.get("dtype", "bf16"),
        "peak_tflops": options.get("peak_tflops"),
        "max_memory_bytes": options.get("max_memory_bytes"),
    }
    try:
        if "://" in name and not name.startswith("file://"):
            import fsspec

            with fsspec.open(name, "rb", **(options.get("storage_options") or {})) as f:
                data = f.read()
            out["bytes_read"] = len(data)
            got_rank, steps, batch, summary = _core.analyze_rank(name, data, **kwargs)
            del data
        else:
            path = name[len("file://"):] if name.startswith("file://") else name
            out["bytes_read"] = os.path.getsize(path) if os.path.isfile(path) else 0
            got_rank, steps, batch, summary = _core.analyze_rank(path, **kwargs)
    except _core.TraceError as e:
        out["error"] = " ".join(str(e).split())
        return out
    except Exception as e:  # noqa: BLE001 - a store's error of any kind is one line naming the file
        out["error"] = f"cannot read {name}: {' '.join(f'{type(e).__name__}: {e}'.split())}"
        return out
    out["rank"] = got_rank
    out["steps"] = steps
    out["batch_json"] = batch.decode("utf-8")
    out["summary_json"] = json.dumps(compact_summary(json.loads(summary), name), separators=(",", ":"))
    out["seconds"] = time.monotonic() - t0
    out["peak_rss_bytes"] = _peak_rss_bytes()
    return out
