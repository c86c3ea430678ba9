"""Reads one run from a file: gpuutil's own reports (a report JSON or a
steps JSONL) in Python, a Kineto trace through the C++ analyzer.

Which is which is decided from the file's first 512 bytes only (the same
rule as the native ``gpuutil-analyze``: ``_merge._is_file_of_reports``), so
a trace of any size is never read in Python: its path goes to
``_api.analyze`` (C++, large documents streamed). Reports are read line by line, one JSON
document per line; a file whose first line is not a whole document is read
as one (multi-line, ``--indent``) document.

A live run that crashed can leave its JSONL with a torn final line (no
final newline, not JSON). Such a line, when at least one step report
precedes it, is skipped: a one-line note is appended to ``notes`` and a
``torn_final_line`` diagnostic to the last report. Anything else that
cannot be read (a bad line followed by more lines, a torn line with no
report before it, NaN or Infinity, nesting deeper than MAX_DEPTH, a
report field of the wrong type) raises :class:`RunError` with one line.
"""

from __future__ import annotations

import json

from gpuutil._merge import _is_file_of_reports
from gpuutil._report_check import check_report

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional, Tuple

#: The diagnostic a report read from a JSONL with a torn final line carries
#: (the shape of a report's ``diagnostics[]`` entries, docs/report-schema.md).
TORN_FINAL_LINE = "torn_final_line"

_SNIFF_BYTES = 512


class RunError(ValueError):
    """An input cannot be read as a run (missing, not JSON, not a report or trace)."""


#: Deepest nesting of objects and arrays read (a gpuutil report has 8
#: levels). The readers after this one (checks, merging, renderers) recurse
#: in Python; bounding the depth here keeps a crafted file from reaching
#: them as a RecursionError.
MAX_DEPTH = 100


class _LineError(ValueError):
    """A line that cannot be read; the message follows "line N ". For
    invalid JSON, where it broke (line and column within the text parsed)."""

    def __init__(self, message: str, where: "Optional[Tuple[int, int, str]]" = None) -> None:
        super().__init__(message)
        self.where = where


def _no_constants(name: str) -> "Any":
    # json.loads accepts NaN, Infinity and -Infinity; JSON (and gpuutil's
    # writers, which write null) does not.
    raise _LineError(f"is not JSON ({name} is not a JSON value)")


def _too_deep(doc: "Any") -> bool:
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        for v in value.values() if isinstance(value, dict) else value:
            if isinstance(v, (dict, list)):
                stack.append((v, depth + 1))
    return False


def _parse(data: "bytes") -> "Any":
    """One JSON document, or _LineError."""
    too_deep = f"is nested too deeply (over {MAX_DEPTH} levels of objects and arrays)"
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise _LineError("is not UTF-8") from None
    except json.JSONDecodeError as e:
        raise _LineError(f"is not JSON ({e.msg}: column {e.colno})", (e.lineno, e.colno, e.msg)) from None
    except RecursionError:  # deeper than Python's parser goes (about 1,000 levels)
        raise _LineError(too_deep) from None
    if isinstance(doc, (dict, list)) and _too_deep(doc):
        raise _LineError(too_deep)
    return doc


def _is_step_report(rec: "Dict[str, Any]") -> bool:
    return str(rec.get("schema", "")).startswith("gpuutil.report/")


def _whole_document(path: str, f: "Any", first_n: int, first_error: str) -> "Any":
    """The file as one JSON document (a report written with an indent)."""
    f.seek(0)
    try:
        return _parse(f.read())
    except _LineError as e:
        if e.where is None:  # NaN, too deep, not UTF-8
            raise RunError(f"cannot read {path}: the document {e}") from None
        line, column, msg = e.where
        if line > first_n:  # a multi-line document, broken after its first line
            raise RunError(f"cannot read {path}: invalid JSON at line {line} column {column} ({msg})") from None
    raise RunError(f"cannot read {path}: line {first_n} {first_error}")


def _records(path: str, notes: "Optional[List[str]]") -> "Tuple[List[Dict[str, Any]], Optional[str]]":
    """The JSON objects of a report file in order, and the torn final line's
    example text when one was skipped."""
    records: "List[Dict[str, Any]]" = []
    seen_report = False
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                rec = _parse(raw)
            except _LineError as e:
                if not records and e.where is not None:  # perhaps one document over many lines
                    rec = _whole_document(path, f, n, str(e))
                    if not isinstance(rec, dict):
                        raise RunError(f"cannot read {path}: not a JSON object") from None
                    return [rec], None
                if not raw.endswith(b"\n") and seen_report:  # the last line, cut off
                    example = f"{path} line {n}: {len(raw)} bytes, no final newline; it {e}"
                    if notes is not None:
                        notes.append(f"{path}: skipped the torn final line {n} ({len(raw)} bytes, no final "
                                     f"newline; it {e}); kept the {len(records)} lines before it")
                    return records, example
                raise RunError(f"cannot read {path}: line {n} {e}") from None
            if not isinstance(rec, dict):
                raise RunError(f"cannot read {path}: line {n} is not a JSON object")
            seen_report = seen_report or _is_step_report(rec)
            records.append(rec)
    if not records:
        raise RunError(f"cannot read {path}: empty file")
    return records, None


def read_reports(path: str, *, cluster_records: bool = False,
                 notes: "Optional[List[str]]" = None) -> "List[Dict[str, Any]]":
    """gpuutil's reports in a report JSON or a steps JSONL, each checked
    (_report_check); cluster records and the run record (``gpuutil.run/1``)
    kept in file order only with ``cluster_records``. One-line notes (a skipped torn final line) are
    appended to ``notes``."""
    try:
        records, torn = _records(path, notes)
    except OSError as e:
        raise RunError(f"cannot read {path}: {e.strerror or e}") from None
    out = []
    for r in records:
        if str(r.get("schema", "")).startswith(("gpuutil.cluster/", "gpuutil.run/")):
            if cluster_records:  # the cross-rank view and the run record (written at the profile's stop)
                out.append(r)
            continue
        if r.get("kind") == "cluster" and _is_step_report(r):
            raise RunError(f"cannot read {path}: a cluster report (many ranks' summaries, no steps): "
                           "`gpuutil export html` renders it; analyse or compare the rank traces themselves")
        if not _is_step_report(r) or not isinstance(r.get("steps"), list):
            raise RunError(f"cannot read {path}: not a gpuutil report (no 'schema: gpuutil.report/N' with steps)")
        try:
            check_report(r, f"report {len(out) + 1}" if len(records) > 1 else "report")
        except ValueError as e:
            raise RunError(f"cannot read {path}: {e}") from None
        out.append(r)
    reports = [r for r in out if _is_step_report(r)]
    if not reports:
        raise RunError(f"cannot read {path}: no gpuutil step report in it")
    if torn is not None:
        from gpuutil._api import DIAGNOSTICS  # the registry (diagnostics.h): severity and description

        entry = next(d for d in DIAGNOSTICS if d["name"] == TORN_FINAL_LINE)
        reports[-1].setdefault("diagnostics", []).append(
            {"name": TORN_FINAL_LINE, "severity": entry["severity"], "count": 1,
             "description": entry["description"], "example": torn})
    return out


def is_reports_file(path: str) -> bool:
    """True when the file is gpuutil's own output (from its first bytes)."""
    try:
        with open(path, "rb") as f:
            return _is_file_of_reports(f.read(_SNIFF_BYTES))
    except OSError as e:
        raise RunError(f"cannot read {path}: {e.strerror or e}") from None


def load_run(path: str, *, cluster_records: bool = False,
             notes: "Optional[List[str]]" = None) -> "List[Dict[str, Any]]":
    """The gpuutil reports of one run: a report JSON, a reports JSONL, or a
    trace (analysed by the C++ core, never read here).

    A distributed job's leader JSONL also holds ``gpuutil.cluster/1``
    records (docs/distributed.md): they are skipped, or kept in file order
    with ``cluster_records`` (the HTML and Prometheus exporters read them)."""
    if is_reports_file(path):
        return read_reports(path, cluster_records=cluster_records, notes=notes)
    return [_analyze_trace(path)]


def _analyze_trace(path: str) -> "Dict[str, Any]":
    from gpuutil import _api

    try:
        return _api.analyze(path)
    except _api.TraceError as e:
        raise RunError(str(e)) from None
