"""The fan-out's progress line on a terminal's stderr: ranks done / total,
trace bytes read and their rate, ranks per second and the ETA (or the
elapsed time once done), redrawn in place at most 5 times a second,
within the terminal's width so a redraw never wraps (on a narrow one the
bar shrinks and the rates go), ended by a newline on close(). Silent
when the stream is not a terminal (a log, a pipe, CI) or when disabled,
so what goes to stdout (the report) is the same either way.
"""

from __future__ import annotations

import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Optional, TextIO

#: Seconds between redraws (the last rank's always draws).
REDRAW_S = 0.2
_BAR_WIDTH = 24


def _size(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB" if n >= 1e7 else f"{n / 1e6:.1f} MB"


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _columns(stream: TextIO) -> int:
    """The terminal's width (80 when it cannot be told)."""
    import os

    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return 80


class Progress:
    """``update(bytes_read)`` per rank done, ``close()`` at the end (see the
    module's paragraph). ``enabled``: None for "when ``stream`` is a
    terminal"; ``clock``: seconds, monotonic (tests pass a fake one);
    ``columns``: the width to fit (None: the terminal's, asked at each redraw)."""

    def __init__(self, total: int, enabled: Optional[bool] = None, stream: Optional[TextIO] = None,
                 clock: Optional[Callable[[], float]] = None, columns: Optional[int] = None) -> None:
        self._stream = stream or sys.stderr
        if enabled is None:
            try:
                enabled = self._stream.isatty()
            except (AttributeError, ValueError):
                enabled = False
        self.enabled = bool(enabled)
        self.total = total
        self.done = 0
        self.bytes = 0
        self._now = clock or time.monotonic
        self._columns = columns
        self._t0 = self._now()
        self._last: Optional[float] = None
        self._drawn = False
        if self.enabled and total > 0:
            self._draw(self._t0)

    def line(self, now: float, columns: int = 1 << 16) -> str:
        """The progress line at ``now``, at most ``columns`` - 1 characters."""
        elapsed = max(now - self._t0, 1e-9)
        rate = self.done / elapsed
        if 0 < self.done < self.total:
            when = f"ETA {_clock((self.total - self.done) / rate)}"
        elif self.done < self.total:
            when = f"{_clock(elapsed)} elapsed"
        else:
            when = f"done in {_clock(elapsed)}"
        done = f"{self.done}/{self.total} ranks"
        read = f"{_size(self.bytes)} read ({_size(self.bytes / elapsed)}/s)"
        variants = ("  ".join((done, read, f"{rate:.1f} ranks/s", when)), "  ".join((done, read, when)),
                    "  ".join((done, when)))
        for info in variants:  # the most said that still leaves room for a bar
            width = min(_BAR_WIDTH, columns - 1 - len(info) - 3)
            if width >= 5:
                filled = width * self.done // max(self.total, 1)
                return f"[{'#' * filled}{'.' * (width - filled)}] {info}"
        return next((info for info in variants if len(info) <= columns - 1), variants[-1][:columns - 1])

    def _draw(self, now: float) -> None:
        self._last = now
        self._drawn = True
        columns = self._columns if self._columns is not None else _columns(self._stream)
        self._stream.write("\r" + self.line(now, columns) + "\x1b[K")
        self._stream.flush()

    def update(self, bytes_read: int = 0) -> None:
        """One more rank done, ``bytes_read`` trace bytes read for it."""
        self.done += 1
        self.bytes += bytes_read
        if not self.enabled:
            return
        now = self._now()
        if self._last is not None and now - self._last < REDRAW_S and self.done < self.total:
            return
        self._draw(now)

    def close(self) -> None:
        """The final line, ended by a newline (nothing when silent)."""
        if self.enabled and self._drawn:
            self._draw(self._now())
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False
