"""The identities a gpuutil.report/1 must satisfy, checked on a report dict:
the fuzzer's (mutate_traces.py) report-level contract.

``gpuutil._report_check.check_report`` checks the shape and the types the
readers rely on; this adds what docs/report-schema.md ("Accounting
identities", the key tables) and docs/accounting.md promise about the
values, which nothing else checks on a report as written:

- steps: ascending, one entry per step number; ``wall_ns == end_ns -
  start_ns >= 0``;
- every device entry of a step: one per (rank, device); the eleven buckets
  non-negative and summing exactly to ``wall_ns``; the eight ``idle_*`` to
  ``idle_ns``; compute + communication + memory to ``busy_ns``;
  ``communication.overlap_ns == total_ns - breakdown.communication`` within
  [0, total]; culprits per cause no more than their bucket, largest first;
  counts non-negative, ``short_kernels`` and ``graph_kernels`` at most
  ``kernels``; estimates in [0, 1]; memcpy ``gbps == bytes / ns``;
- every host thread of a step: one per (rank, thread); the seven buckets
  non-negative and summing exactly to ``wall_ns``;
- one rank: each device's and each host thread's ``wall_ns`` is the step's,
  and every step lists every device;
- summary: ``steps`` is the step count; ``steps_wall_ns`` the sum of step
  walls; ``outside_steps_ns == max(0, trace_span_ns - steps_wall_ns -
  last_step_backlog_ns - last_step_unrecorded_ns)`` (both 0 when absent);
  ``step_wall_p50_ns`` the lower median; per device the wall, buckets and
  kernels are the sums over steps, ``busy_pct``/``idle_pct`` agree with them;
- findings: ``recoverable_ns >= 0``, ``share_of_wall`` in [0, 1], and
  ``top_finding`` is ``findings[0]``;
- diagnostics: known names, in registry order, each once, with the
  registry's severity and a positive count.

``check_identities`` raises ValueError naming the first breach.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from gpuutil._report_check import check_report

DEVICE_BUCKETS = ("compute", "communication", "memory", "idle_dataloader", "idle_host_sync", "idle_collective",
                  "idle_launch", "idle_host", "idle_dependency", "idle_unattributed", "idle_kernel_gap")
IDLE_BUCKETS = tuple(b for b in DEVICE_BUCKETS if b.startswith("idle_"))
HOST_BUCKETS = ("dataloader", "forward", "backward", "optimizer", "host_sync", "collective", "other")
MEMCPY_DIRECTIONS = {"htod", "dtoh", "dtod", "htoh", "ptop", "unknown"}
WORKLOAD_KINDS = {"training", "inference", "capture", "unknown"}

_REGISTRY = Path(__file__).resolve().parents[2] / "libgpuutil" / "include" / "gpuutil" / "diagnostics.h"


def diagnostics_registry(path: Path = _REGISTRY) -> List[Tuple[str, str]]:
    """(name, severity) of every diagnostic, in registry order, read from the
    C++ header the binaries are built from."""
    found = re.findall(r"X\((\w+),\s*k(\w+),", path.read_text())
    return [(name, severity.lower()) for name, severity in found]


class _Breach(ValueError):
    pass


def _fail(where: str, what: str) -> None:
    raise _Breach(f"{where}: {what}")


def _nonneg(value: Any, where: str) -> None:
    if value < 0:
        _fail(where, f"is {value}, negative")


def _ratio(value: Optional[float], where: str) -> None:
    if value is not None and not (0.0 <= value <= 1.0):
        _fail(where, f"is {value}, outside [0, 1]")


def _once(seen: set, key: Any, where: str, what: str) -> None:
    if key in seen:
        _fail(where, f"is a second entry for this {what}")
    seen.add(key)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _check_named(items: List[Dict[str, Any]], bucket_ns: int, where: str, top_n: int = 5) -> None:
    if len(items) > top_n:
        _fail(where, f"has {len(items)} entries, more than top_n {top_n}")
    total = 0
    last = None
    for i, it in enumerate(items):
        _nonneg(it["ns"], f"{where}[{i}].ns")
        _nonneg(it.get("count", 0), f"{where}[{i}].count")
        if last is not None and it["ns"] > last:
            _fail(where, "is not ordered largest ns first")
        last = it["ns"]
        total += it["ns"]
    if total > bucket_ns:
        _fail(where, f"culprits sum to {total} ns, more than the bucket's {bucket_ns}")


def _check_device(d: Dict[str, Any], where: str) -> None:
    b = d["breakdown_ns"]
    for k in DEVICE_BUCKETS:
        _nonneg(b[k], f"{where}.breakdown_ns.{k}")
    total = sum(b[k] for k in DEVICE_BUCKETS)
    if total != d["wall_ns"]:
        _fail(where, f"buckets sum to {total}, wall_ns is {d['wall_ns']}")
    idle = sum(b[k] for k in IDLE_BUCKETS)
    if idle != d["idle_ns"]:
        _fail(where, f"idle_* buckets sum to {idle}, idle_ns is {d['idle_ns']}")
    busy = b["compute"] + b["communication"] + b["memory"]
    if busy != d["busy_ns"]:
        _fail(where, f"compute + communication + memory = {busy}, busy_ns is {d['busy_ns']}")
    for k in ("kernels", "memcpys", "memsets", "short_kernels", "graph_kernels"):
        if k in d:
            _nonneg(d[k], f"{where}.{k}")
    if d.get("short_kernels", 0) > d["kernels"]:
        _fail(where, f"short_kernels {d['short_kernels']} > kernels {d['kernels']}")
    if d.get("graph_kernels", 0) > d["kernels"]:
        _fail(where, f"graph_kernels {d['graph_kernels']} > kernels {d['kernels']}")
    _ratio(d.get("sm_efficiency_est"), f"{where}.sm_efficiency_est")
    _ratio(d.get("achieved_occupancy_est"), f"{where}.achieved_occupancy_est")
    for k in ("mfu", "hfu"):
        if d.get(k) is not None:
            _nonneg(d[k], f"{where}.{k}")
    comm = d.get("communication")
    if comm is not None:
        total_ns, overlap_ns = comm["total_ns"], comm["overlap_ns"]
        if overlap_ns != total_ns - b["communication"]:
            _fail(where, f"communication.overlap_ns {overlap_ns} != total_ns {total_ns} - communication "
                         f"{b['communication']}")
        if not (0 <= overlap_ns <= total_ns):
            _fail(where, f"communication.overlap_ns {overlap_ns} outside [0, total_ns {total_ns}]")
        pct = comm.get("overlap_pct")
        if (pct is None) != (total_ns == 0) or (pct is not None and not _close(pct, 100.0 * overlap_ns / total_ns)):
            _fail(where, f"communication.overlap_pct {pct} does not match {overlap_ns}/{total_ns}")
    for direction, m in (d.get("memcpy") or {}).items():
        w = f"{where}.memcpy.{direction}"
        if direction not in MEMCPY_DIRECTIONS:
            _fail(w, "is not a known direction")
        _nonneg(m["bytes"], f"{w}.bytes")
        _nonneg(m["ns"], f"{w}.ns")
        if m["bytes"] == 0 and m["ns"] == 0:
            _fail(w, "has neither bytes nor ns")
        gbps = m["gbps"]
        if (gbps is None) != (m["ns"] == 0) or (gbps is not None and not _close(gbps, m["bytes"] / m["ns"])):
            _fail(w, f"gbps {m['gbps']} is not bytes/ns")
    pm = d.get("pageable_memcpy")
    if pm is not None:
        _nonneg(pm["count"], f"{where}.pageable_memcpy.count")
        _nonneg(pm["bytes"], f"{where}.pageable_memcpy.bytes")
    for k in ("launch_latency_ns", "graph_launch_latency_ns"):
        lat = d.get(k)
        if lat and lat.get("p50") is not None and lat.get("p95") is not None and lat["p50"] > lat["p95"]:
            _fail(where, f"{k}.p50 {lat['p50']} > p95 {lat['p95']}")
    if "top_kernels" in d:
        last = None
        for i, t in enumerate(d["top_kernels"]):
            _nonneg(t["ns"], f"{where}.top_kernels[{i}].ns")
            if last is not None and t["ns"] > last:
                _fail(f"{where}.top_kernels", "is not ordered largest ns first")
            last = t["ns"]
    culprits = d.get("culprits")
    if culprits is not None:
        causes = {k[len("idle_"):] for k in IDLE_BUCKETS}
        if set(culprits) != causes:
            _fail(f"{where}.culprits", f"keys {sorted(culprits)} are not the seven causes")
        for cause, items in culprits.items():
            _check_named(items, b["idle_" + cause], f"{where}.culprits.{cause}")


def _check_host(h: Dict[str, Any], where: str) -> None:
    b = h["breakdown_ns"]
    if set(b) != set(HOST_BUCKETS):
        _fail(f"{where}.breakdown_ns", f"keys {sorted(b)} are not the seven categories")
    for k in HOST_BUCKETS:
        _nonneg(b[k], f"{where}.breakdown_ns.{k}")
    total = sum(b.values())
    if total != h["wall_ns"]:
        _fail(where, f"host buckets sum to {total}, wall_ns is {h['wall_ns']}")
    culprits = h.get("culprits")
    if culprits is not None:
        for cat, items in culprits.items():
            if cat not in b:
                _fail(f"{where}.culprits", f"unknown category {cat!r}")
            _check_named(items, b[cat], f"{where}.culprits.{cat}")


def check_identities(report: Dict[str, Any], sources: int = 1,
                     registry: Optional[List[Tuple[str, str]]] = None) -> None:
    """Raises ValueError (one line: where, what) unless `report` satisfies
    the report's identities; `sources` is the number of inputs analysed."""
    try:
        check_report(report)
    except ValueError as e:
        raise _Breach(f"check_report: {e}") from None
    _check(report, sources, registry if registry is not None else diagnostics_registry())


def _check(report: Dict[str, Any], sources: int, registry: List[Tuple[str, str]]) -> None:
    if report["schema"] != "gpuutil.report/1":
        _fail("schema", f"is {report['schema']!r}")
    if "sources" in report and len(report["sources"]) != sources:
        _fail("sources", f"has {len(report['sources'])} entries for {sources} inputs")
    one_rank = sources == 1
    workload = report.get("workload")
    if workload is not None:
        if workload["kind"] not in WORKLOAD_KINDS:
            _fail("workload.kind", f"is {workload['kind']!r}")
        _nonneg(workload.get("capture_ns", 0), "workload.capture_ns")

    steps = report["steps"]
    keys_by_step = []
    sums: Dict[Tuple[int, int], Dict[str, int]] = {}
    for i, s in enumerate(steps):
        where = f"steps[{i}] (step {s['step']})"
        if i > 0 and s["step"] <= steps[i - 1]["step"]:
            _fail(where, f"follows step {steps[i - 1]['step']}: not ascending, or the number repeats")
        if s["wall_ns"] != s["end_ns"] - s["start_ns"]:
            _fail(where, f"wall_ns {s['wall_ns']} != end_ns - start_ns {s['end_ns'] - s['start_ns']}")
        _nonneg(s["wall_ns"], f"{where}.wall_ns")
        keys = set()
        for j, d in enumerate(s["devices"]):
            dw = f"{where}.devices[{j}] (rank {d['rank']} device {d['device']})"
            key = (d["rank"], d["device"])
            _once(keys, key, dw, "rank and device")
            if one_rank and d["wall_ns"] != s["wall_ns"]:
                _fail(dw, f"wall_ns {d['wall_ns']} is not the step's {s['wall_ns']}")
            _nonneg(d["wall_ns"], f"{dw}.wall_ns")
            _check_device(d, dw)
            acc = sums.setdefault(key, {"wall_ns": 0, "kernels": 0, **{k: 0 for k in DEVICE_BUCKETS}})
            acc["wall_ns"] += d["wall_ns"]
            acc["kernels"] += d["kernels"]
            for k in DEVICE_BUCKETS:
                acc[k] += d["breakdown_ns"][k]
        keys_by_step.append(keys)
        threads = set()
        for j, h in enumerate(s.get("host", [])):
            hw = f"{where}.host[{j}] (rank {h['rank']} thread {h.get('thread')})"
            _once(threads, (h["rank"], h.get("thread")), hw, "rank and thread")
            if one_rank and h["wall_ns"] != s["wall_ns"]:
                _fail(hw, f"wall_ns {h['wall_ns']} is not the step's {s['wall_ns']}")
            _check_host(h, hw)

    summary = report["summary"]
    if summary.get("steps", len(steps)) != len(steps):
        _fail("summary.steps", f"is {summary['steps']}, the report has {len(steps)} steps")
    walls = sorted(s["wall_ns"] for s in steps)
    if one_rank and "steps_wall_ns" in summary and summary["steps_wall_ns"] != sum(walls):
        _fail("summary.steps_wall_ns", f"is {summary['steps_wall_ns']}, step walls sum to {sum(walls)}")
    _nonneg(summary["trace_span_ns"], "summary.trace_span_ns")
    if "steps_wall_ns" in summary:
        tail = summary.get("last_step_backlog_ns", 0) + summary.get("last_step_unrecorded_ns", 0)
        want = max(0, summary["trace_span_ns"] - summary["steps_wall_ns"] - tail)
        if summary["outside_steps_ns"] != want:
            _fail("summary.outside_steps_ns", f"is {summary['outside_steps_ns']}, want max(0, trace_span_ns - "
                                              f"steps_wall_ns - last_step_backlog_ns - last_step_unrecorded_ns) "
                                              f"= {want}")
    if one_rank and "step_wall_p50_ns" in summary:
        want_p50 = walls[(len(walls) - 1) // 2] if walls else None
        if summary["step_wall_p50_ns"] != want_p50:
            _fail("summary.step_wall_p50_ns", f"is {summary['step_wall_p50_ns']}, the lower median is {want_p50}")

    seen = set()
    for j, d in enumerate(summary["devices"]):
        where = f"summary.devices[{j}] (rank {d['rank']} device {d['device']})"
        key = (d["rank"], d["device"])
        _once(seen, key, where, "rank and device")
        acc = sums.get(key)
        if acc is None:
            _fail(where, "is in no step")
            continue
        if d["wall_ns"] != acc["wall_ns"]:
            _fail(where, f"wall_ns {d['wall_ns']} != the steps' sum {acc['wall_ns']}")
        for k in DEVICE_BUCKETS:
            if d["breakdown_ns"][k] != acc[k]:
                _fail(where, f"breakdown_ns.{k} {d['breakdown_ns'][k]} != the steps' sum {acc[k]}")
        if sum(d["breakdown_ns"][k] for k in DEVICE_BUCKETS) != d["wall_ns"]:
            _fail(where, "buckets do not sum to wall_ns")
        if d["kernels"] != acc["kernels"]:
            _fail(where, f"kernels {d['kernels']} != the steps' sum {acc['kernels']}")
        busy = acc["compute"] + acc["communication"] + acc["memory"]
        for k, part in (("busy_pct", busy), ("idle_pct", acc["wall_ns"] - busy)):
            if k not in d:
                continue
            pct = d[k]
            wall = d["wall_ns"]
            if (pct is None) != (wall == 0) or (pct is not None and not _close(pct, 100.0 * part / wall)):
                _fail(where, f"{k} {pct} does not match {part}/{d['wall_ns']}")
        _ratio(d.get("sm_efficiency_est"), f"{where}.sm_efficiency_est")
        _ratio(d.get("achieved_occupancy_est"), f"{where}.achieved_occupancy_est")
        for cause, items in d["culprits"].items():
            _check_named(items, d["breakdown_ns"].get("idle_" + cause, 0), f"{where}.culprits.{cause}")
    if set(sums) != seen:
        _fail("summary.devices", f"lacks {sorted(set(sums) - seen)}, which steps list")
    if one_rank:
        for i, keys in enumerate(keys_by_step):
            if keys != seen:
                _fail(f"steps[{i}].devices", f"lists {sorted(keys)}, the run has {sorted(seen)}")

    findings = report.get("findings", [])
    for j, f in enumerate(findings):
        if "recoverable_ns" in f:
            _nonneg(f["recoverable_ns"], f"findings[{j}].recoverable_ns")
        _ratio(f.get("share_of_wall"), f"findings[{j}].share_of_wall")
    if "top_finding" in summary:
        want_top = findings[0] if findings else None
        if summary["top_finding"] != want_top:
            _fail("summary.top_finding", "is not findings[0]")

    order = {name: (i, severity) for i, (name, severity) in enumerate(registry)}
    last = -1
    for j, g in enumerate(report.get("diagnostics", [])):
        where = f"diagnostics[{j}] ({g['name']})"
        if g["name"] not in order:
            _fail(where, "is not in the registry")
        index, severity = order[g["name"]]
        if index <= last:
            _fail(where, "is out of registry order or repeated")
        last = index
        if g["count"] <= 0:
            _fail(where, f"count {g['count']} is not positive")
        if "severity" in g and g["severity"] != severity:
            _fail(where, f"severity {g['severity']!r}, the registry says {severity!r}")
