"""Perfetto / Chrome trace export of trace files (``gpuutil export perfetto``).

Thin wrapper over the C++ exporter (libgpuutil/src/export/perfetto.cpp):
a process per GPU, a thread per stream, a "steps" thread, an "idle causes"
thread with one slice per attributed idle piece, and counter tracks. The
JSON opens in ui.perfetto.dev and chrome://tracing.
"""

from __future__ import annotations

import os
from typing import Sequence, Union

from gpuutil import _api, _core

PathLike = Union[str, "os.PathLike[str]"]


def chrome_trace_json(paths: Union[PathLike, Sequence[PathLike]], *, indent: int = -1) -> str:
    """The Chrome trace JSON text of one trace file or one per rank.

    Raises gpuutil.TraceError when a file cannot be read.
    """
    plist = _api._paths(paths)
    try:
        return _core.perfetto_trace_files(plist, indent)
    except ValueError as e:
        if type(e) is ValueError and str(e).startswith(("cannot read", "cannot export")):
            raise _api.TraceError(str(e)) from None
        raise


def write_chrome_trace(paths: Union[PathLike, Sequence[PathLike]], output: PathLike) -> None:
    """Writes the Chrome trace JSON of the trace file(s) to ``output``."""
    text = chrome_trace_json(paths)
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
