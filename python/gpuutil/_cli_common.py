"""What the ``gpuutil`` command's parts share (gpuutil.cli, gpuutil._cli_commands):
argument types that fail with argparse's one-line error, writing the output
(stdout or ``-o FILE``: exit 1 when it cannot be written), and the one
stderr line of an error, terminal-safe.
"""

from __future__ import annotations

import math
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable, List, Optional, Sequence


def _type_error(message: str) -> Exception:
    """argparse's error for a bad option value (imported only then)."""
    import argparse

    return argparse.ArgumentTypeError(message)


def _number(text: str, parse: "Callable[[str], Any]", kind: str, ok: "Callable[[Any], bool]", requirement: str) -> Any:
    """``parse(text)`` when it gives a finite value that ``ok`` accepts, else
    argparse's one-line error: "not <kind>" or "must be <requirement>"."""
    try:
        v = parse(text)
    except ValueError:
        raise _type_error(f"not {kind}: {text!r}") from None
    if not math.isfinite(v) or not ok(v):
        raise _type_error(f"must be {requirement}: {text!r}")
    return v


def _positive_float(text: str) -> float:
    return _number(text, float, "a number", lambda v: v > 0, "a positive number")


def _unit_float(text: str) -> float:
    return _number(text, float, "a number", lambda v: 0 <= v <= 1, "between 0 and 1")


def _non_negative_float(text: str) -> float:
    return _number(text, float, "a number", lambda v: v >= 0, "a non-negative number")


def _positive_int(text: str) -> int:
    return _number(text, int, "an integer", lambda v: v >= 1, "a positive integer")


def _emit(out: str, path: Optional[str]) -> int:
    """Writes `out` to `path` (or stdout); the exit code."""
    if path:
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(out)
        except OSError as e:
            return _error(f"cannot write {path}: {e.strerror or e}", 1)
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    return 0


def _error(message: str, code: int) -> int:
    from gpuutil._table import sanitize

    one_line = sanitize(" ".join(str(message).split()))  # a file name can hold ESC
    print(f"gpuutil: error: {one_line}", file=sys.stderr)
    return code


def _warn(notes: List[str]) -> None:
    """One stderr line per note of a reader (a torn final line skipped)."""
    for note in notes:
        print(f"gpuutil: warning: {' '.join(note.split())}", file=sys.stderr)


def _streamed(path: str) -> bool:
    """`-` (standard input) or an existing path that is not a regular file
    (a FIFO, `/dev/stdin`, a `<(...)` /dev/fd/N): the C++ importer reads it
    once, as a stream; nothing here may peek at it."""
    if path == "-":
        return True
    try:
        import stat

        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # missing: the importer says so


def _trace_error_text(e: Exception, paths: Sequence[str]) -> str:
    """The importer's one line, with the CLI's flag for its hint."""
    text = str(e).replace("pass max_memory", "pass --max-memory")
    if "-" in paths and "<stdin>" in text and "no traceEvents" in text:
        text += " (gpuutil's own reports are read from a file, not standard input)"
    return text
