"""Which steps collect the detail tier (docs/pytorch.md, "Collection tiers").

Every step collects the always-on tier: step boundaries, DataLoader waits,
host syncs, optimizer, forward and backward, collectives and, on a GPU,
CUPTI's kernels and launches. The detail tier adds per-op and per-autograd-
node ranges (PyTorch's FUNCTION and BACKWARD_FUNCTION RecordFunction
scopes), which make every op pay for a RecordFunction, so by default it runs
on sampled steps only:

* ``"sampled"`` (default): the first ``first`` steps, then one step in
  ``every``, and the step after a finding fires for the first time;
* ``"always"``: every step (the cost of the detail tier on every op);
* ``"off"``: never.

Pure logic over step indexes (0 = the first step after the profile starts);
the PyTorch collector asks it at every boundary and switches the hook.
"""

from __future__ import annotations

DETAIL_MODES = ("sampled", "always", "off")


def check_detail(detail: object) -> str:
    """``detail`` when it is one of DETAIL_MODES, else ValueError (one line)."""
    if not isinstance(detail, str) or detail not in DETAIL_MODES:
        raise ValueError(f'detail must be one of "sampled", "always", "off", not {detail!r}')
    return detail


class DetailSchedule:
    """Answers, at each step boundary, whether the step starting there collects detail."""

    def __init__(self, mode: str = "sampled", *, first: int = 3, every: int = 100) -> None:
        self.mode = check_detail(mode)
        self._first = max(0, first)
        self._every = max(1, every)
        self._requested = False

    def request(self) -> None:
        """A finding fired for the first time: the next step collects detail."""
        self._requested = True

    def steps_until_wanted(self, index: int) -> int:
        """From step ``index``, how many steps until the next one that collects
        detail (1: the next step; ``1 << 40``: none)."""
        if self.mode != "sampled":
            return 1 if self.mode == "always" else 1 << 40
        nxt = index + 1
        if self._requested or nxt < self._first:
            return 1
        return -(-nxt // self._every) * self._every - index

    def wants(self, index: int) -> bool:
        """Whether step ``index`` (0 = the first) collects detail."""
        if self.mode != "sampled":
            return self.mode == "always"
        if self._requested:
            self._requested = False
            return True
        return index < self._first or index % self._every == 0
