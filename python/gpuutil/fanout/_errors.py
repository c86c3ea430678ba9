"""The one error of the offline fan-out (gpuutil.fanout): a bad input set
(a missing, duplicate or unnamed rank, an unreadable file under
``on_error="fail"``, an unreachable URL, a rank whose worker died twice),
with a one-line message naming the file or rank. A ValueError, so callers
that catch gpuutil.TraceError's base catch it too; the command line prints
it as ``gpuutil: error: ...`` and exits 2.
"""

from __future__ import annotations


class FanoutError(ValueError):
    """A trace set that cannot be analysed as asked (one line, names the file or rank)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def one_line(text: object) -> str:
    """`text` on one line (a worker's or a library's message)."""
    return " ".join(str(text).split())
