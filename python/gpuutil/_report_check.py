"""Checks that a dict read back from a file is a gpuutil report the readers
can use (docs/report-schema.md), before any of them touches it.

Everything that reads gpuutil's own output (``gpuutil analyze`` and
``compare`` of a report JSON or steps JSONL, ``export html|prometheus``,
``gpuutil.export.otel.record_reports``) goes through :func:`check_report`,
so a hand-edited or truncated report fails with one line naming the first
bad field (``steps[0].devices[1].wall_ns is a string, not an integer``)
instead of a traceback from deep inside an exporter.

Only the fields the readers use are checked, with their types; keys a
reader does not use are left alone (newer writers may add some). Ints
exclude bools and must fit int64 (the writers' type; Python would read
10**400 and fail later converting it); "number" is an int or a finite
float (JSON has no NaN or Infinity, but Python's json reads them, and 1e400
as infinity); "?" marks a field that may be absent; null is accepted only
where the schema says "or null".
"""

from __future__ import annotations

import math

from gpuutil._buckets import BREAKDOWN_KEYS, HOST_CATEGORIES, OPTIONAL_BUCKETS

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict

_INT = "an integer"
_NUM = "a number"
_STR = "a string"
_BOOL = "a boolean"
_NUM_OR_NULL = "a number or null"
_INT_OR_NULL = "an integer or null"
_STR_OR_NULL = "a string or null"

_NAMED_TIME = {"name": _STR, "ns": _INT, "count?": _INT}
# Every bucket present (readers index them), except those added later, which
# reports written before them lack (readers default them to 0).
_BREAKDOWN = {(k + "?" if k in OPTIONAL_BUCKETS else k): _INT for k in BREAKDOWN_KEYS}
_HOST_BREAKDOWN = {k: _INT for k in HOST_CATEGORIES}
_CULPRITS = ("dict", ("list", _NAMED_TIME))
_HOST = {"rank": _INT, "tid?": _INT, "name?": _STR, "wall_ns": _INT, "breakdown_ns": _HOST_BREAKDOWN,
         "culprits?": _CULPRITS}
_DEVICE_STEP = {
    "device": _INT, "rank": _INT, "name?": _STR, "wall_ns": _INT, "busy_ns": _INT, "breakdown_ns": _BREAKDOWN,
    "idle_ns": _INT, "culprits?": _CULPRITS, "kernels": _INT, "flops?": _NUM_OR_NULL,
    "peak_flops_per_s?": _NUM_OR_NULL, "mfu": _NUM_OR_NULL, "hfu?": _NUM_OR_NULL,
    "sm_efficiency_est": _NUM_OR_NULL, "achieved_occupancy_est?": _NUM_OR_NULL, "health?": ("dict", _NUM_OR_NULL),
}
_DEVICE_SUMMARY = {"device": _INT, "rank": _INT, "name?": _STR, "wall_ns": _INT, "breakdown_ns": _BREAKDOWN,
                   "busy_pct": _NUM_OR_NULL, "culprits": _CULPRITS, "kernels": _INT, "mfu?": _NUM_OR_NULL, "hfu?": _NUM_OR_NULL,
                   "sm_efficiency_est?": _NUM_OR_NULL, "achieved_occupancy_est?": _NUM_OR_NULL}
_FINDING = {"id": _STR, "title": _STR, "evidence?": _STR, "fix?": _STR, "recoverable_ns?": _INT,
            "share_of_wall?": _NUM_OR_NULL}
_STEP = {"step": _INT, "start_ns": _INT, "end_ns": _INT, "wall_ns": _INT, "detail?": _BOOL,
         "devices": ("list", _DEVICE_STEP), "host?": ("list", _HOST)}
REPORT = {
    "schema": _STR,
    "sources?": ("list", {"path": _STR, "rank": _INT, "steps_source": _STR_OR_NULL}),
    "workload?": {"kind": _STR, "evidence": _STR},
    "steps": ("list", _STEP),
    "summary": {"steps?": _INT, "steps_wall_ns?": _INT, "step_wall_p50_ns?": _INT_OR_NULL, "trace_span_ns": _INT,
                "outside_steps_ns": _INT, "last_step_backlog_ns?": _INT, "last_step_unrecorded_ns?": _INT,
                "devices": ("list", _DEVICE_SUMMARY), "top_finding?": _FINDING,
                "host?": ("list", {"rank?": _INT, "wall_ns?": _INT, "breakdown_ns?": _HOST_BREAKDOWN})},
    "findings?": ("list", _FINDING),
    "diagnostics?": ("list", {"name": _STR, "severity?": _STR, "count": _INT, "example?": _STR_OR_NULL}),
}


# Objects a writer may set to null (unknown); other lists and objects are
# iterated by the readers, so null is wrong there.
_NULLABLE = ("top_finding", "health")


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _is_int(v: "Any") -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64_MIN <= v <= _INT64_MAX


def _is_num(v: "Any") -> bool:
    return _is_int(v) or (isinstance(v, float) and math.isfinite(v))


def _kind(v: "Any") -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int) and not _is_int(v):
        return "an integer outside the int64 range"
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else "infinite"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _check(value: "Any", spec: "Any", where: str) -> None:
    if isinstance(spec, str):
        ok = {
            _INT: _is_int(value),
            _NUM: _is_num(value),
            _STR: isinstance(value, str),
            _BOOL: isinstance(value, bool),
            _NUM_OR_NULL: value is None or _is_num(value),
            _INT_OR_NULL: value is None or _is_int(value),
            _STR_OR_NULL: value is None or isinstance(value, str),
        }[spec]
        if not ok:
            raise ValueError(f"{where} is {_kind(value)}, not {spec}")
        return
    if isinstance(spec, tuple):
        container, inner = spec
        if container == "list":
            if not isinstance(value, list):
                raise ValueError(f"{where} is {_kind(value)}, not a list")
            for i, item in enumerate(value):
                _check(item, inner, f"{where}[{i}]")
        else:
            if not isinstance(value, dict):
                raise ValueError(f"{where} is {_kind(value)}, not an object")
            for k, item in value.items():
                _check(item, inner, f"{where}.{k}")
        return
    if not isinstance(value, dict):
        raise ValueError(f"{where} is {_kind(value)}, not an object")
    for key, sub in spec.items():
        optional = key.endswith("?")
        name = key.rstrip("?")
        if name not in value:
            if not optional:
                raise ValueError(f"{where}.{name} is missing")
            continue
        item = value[name]
        if item is None and name in _NULLABLE:
            continue
        _check(item, sub, f"{where}.{name}")


def check_report(report: "Dict[str, Any]", where: str = "report") -> None:
    """Raises ValueError (one line: the first bad field's path and type)
    unless ``report`` has the shape of a gpuutil.report/N the readers use."""
    _check(report, REPORT, where)
    if not report["schema"].startswith("gpuutil.report/"):
        raise ValueError(f"{where}.schema is {report['schema'][:40]!r}, not gpuutil.report/N")
