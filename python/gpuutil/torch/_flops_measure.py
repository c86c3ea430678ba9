"""``flops_per_step="measure"``: FLOPs per step counted by PyTorch, once.

One step is run under ``torch.utils.flop_counter.FlopCounterMode`` (a
dispatch mode: every op goes through Python while it is on, so that step
is several times slower; it is paid once). The measured window runs from one
step boundary to the next: the second step (the first has warm-up work:
lazy initialisation, allocator growth, compilation), boundary to boundary,
so with automatic steps it is exactly one optimizer step, input fetch
included. FlopCounterMode counts what PyTorch has FLOP formulas for
(matmuls, convolutions, attention): the dominant terms of most models.

The count is handed to the profile (``CollectorHandle.set_measured_flops``): every
step analysed from then on, including steps already closed but not yet
reported, gets MFU from it, with ``flops_source: "measured"``; the
``flops_measured_step`` diagnostic names the inflated step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._collectors import CollectorHandle


class FlopsMeasurement:
    """Counts the FLOPs of the step between boundaries ``measure_after`` and ``measure_after + 1``."""

    def __init__(self, prof: "CollectorHandle", *, measure_after: int = 1) -> None:
        self._prof = prof
        self._measure_after = measure_after
        self._boundaries = 0
        self._mode: Optional[Any] = None
        self.flops: Optional[float] = None

    def on_step_end(self) -> None:
        """Called at every step boundary (end of one step, start of the next)."""
        self._boundaries += 1
        if self._mode is not None:
            self._finish()
        elif self.flops is None and self._boundaries == self._measure_after:
            from torch.utils.flop_counter import FlopCounterMode

            self._mode = FlopCounterMode(display=False)
            self._mode.__enter__()

    @property
    def done(self) -> bool:
        """Measured (or found nothing to count): no more per-step work."""
        return self.flops is not None

    def _finish(self) -> None:
        mode, self._mode = self._mode, None
        assert mode is not None
        mode.__exit__(None, None, None)
        self.flops = float(mode.get_total_flops())
        if self.flops > 0:
            self._prof.set_measured_flops(self.flops, self._prof.path.next_step - 1)

    def stop(self) -> None:
        """Leaves the mode if the profile stops in the middle of the measured step."""
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
