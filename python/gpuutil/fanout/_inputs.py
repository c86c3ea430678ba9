"""What the user named, as a sorted list of trace inputs: files, directories
(every ``*.json`` / ``*.json.gz`` file in them, not recursive, sorted by
name: what tensorboard_trace_handler writes), glob patterns, and URLs
(``s3://``, ``gs://``, ``http(s)://``, anything fsspec reads; fsspec is the
optional ``fanout`` extra and is imported only for a URL).

Inputs stay as given (a relative path stays relative): the report names a
rank's host by the input's base name, as ``gpuutil analyze`` on the same
files does.
"""

from __future__ import annotations

import glob
import os

from gpuutil.fanout._errors import FanoutError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional, Sequence

_GLOB_CHARS = "*?["


def is_url(name: str) -> bool:
    """A URL fsspec reads (``scheme://...``), not a local path."""
    scheme, sep, _ = name.partition("://")
    return bool(sep) and scheme.replace("+", "").replace("-", "").isalnum() and len(scheme) > 1


def is_trace_name(name: str) -> bool:
    """A file name a directory's trace listing keeps (as the C++ trace_dirs does)."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    return bool(base) and not base.startswith(".") and base.endswith((".json", ".json.gz"))


def needs_fanout(name: str) -> bool:
    """An input only the fan-out reads: a URL, a directory or a glob pattern."""
    if is_url(name):
        return True
    if any(c in name for c in _GLOB_CHARS) and not os.path.exists(name):
        return True
    return os.path.isdir(name)


def fsspec_module() -> Any:
    """fsspec, or a one-line error naming the extra that installs it."""
    try:
        import fsspec
    except ImportError:
        raise FanoutError("reading URLs needs fsspec: pip install 'gpuutil[fanout]' (and s3fs for s3://, "
                          "gcsfs for gs://, aiohttp for http(s)://)") from None
    return fsspec


def _remote(name: str, storage_options: Dict[str, Any]) -> List[str]:
    fsspec = fsspec_module()
    try:
        fs, path = fsspec.core.url_to_fs(name, **storage_options)
    except (ImportError, ValueError) as e:
        raise FanoutError(f"cannot read {name}: {e}") from None
    protocol = name.split("://", 1)[0]

    def url(p: str) -> str:
        return p if "://" in p else f"{protocol}://{p.lstrip('/')}" if protocol != "file" else p

    try:
        if any(c in path for c in _GLOB_CHARS) and not protocol.startswith("http"):
            found = sorted(url(p) for p in fs.glob(path) if is_trace_name(p))
            if not found:
                raise FanoutError(f"cannot read {name}: no trace file (*.json, *.json.gz) matches the pattern")
            return found
        if name.endswith("/") or (not protocol.startswith("http") and fs.isdir(path)):
            found = sorted(url(p) for p in fs.find(path, maxdepth=1) if is_trace_name(p))
            if not found:
                raise FanoutError(f"cannot read {name}: the directory holds no trace files (*.json, *.json.gz)")
            return found
    except FanoutError:
        raise
    except Exception as e:  # noqa: BLE001 - a store's error of any kind is one line naming the URL
        raise FanoutError(f"cannot read {name}: {type(e).__name__}: {e}") from None
    return [name]


def _local(name: str) -> List[str]:
    if os.path.isdir(name):
        found = sorted(os.path.join(name, e) for e in os.listdir(name)
                       if is_trace_name(e) and os.path.isfile(os.path.join(name, e)))
        if not found:
            raise FanoutError(f"cannot read {name}: the directory holds no trace files (*.json, *.json.gz)")
        return found
    if any(c in name for c in _GLOB_CHARS) and not os.path.exists(name):
        found = sorted(p for p in glob.glob(name) if os.path.isfile(p))
        if not found:
            raise FanoutError(f"cannot read {name}: no file matches the pattern")
        return found
    return [name]  # a missing file is named by the discovery


def expand_inputs(inputs: Sequence[str], storage_options: Optional[Dict[str, Any]] = None) -> List[str]:
    """Every trace input named by `inputs`, in order, each once."""
    out: List[str] = []
    seen = set()
    for name in inputs:
        for item in (_remote(name, storage_options or {}) if is_url(name) else _local(name)):
            if item not in seen:
                seen.add(item)
                out.append(item)
    if not out:
        raise FanoutError("no trace inputs given")
    return out
