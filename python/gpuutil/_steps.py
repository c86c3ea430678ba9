"""Step marking of a live profile (the ``Profile`` methods on the
training thread's hot path): explicit steps (``prof.step()``,
``begin_step``/``end_step``), automatic steps at optimizer steps
(``auto_step_boundary``, called by the C++ step path), and what runs at a
boundary when the Python side is due (``_on_due``: per-step collector work
and report batches). The state they use is the Profile's (gpuutil._profile).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Optional

from gpuutil import _core

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._profile import Profile

_now_ns = _core.now_ns
# _core.StepPath.mode: how the optimizer post-hook treats a boundary.
PATH_ASK, PATH_AUTO, PATH_OFF = 0, 1, 2  # ask auto_step_boundary / close in C++ / user steps or stopped


class StepMarking:
    """The step-marking methods of Profile (a mixin: Profile holds the state)."""

    # -- steps ---------------------------------------------------------
    def step(self, step: Optional[int] = None) -> "_StepScope":
        """Context manager around one training step: ``with prof.step(): ...``.

        Steps are numbered from 0 unless ``step`` is given.
        """
        self._check_step_thread()  # a refused step does not advance the numbering
        if step is None:
            step = self._path.next_step
        self._path.next_step = step + 1
        return _StepScope(self, step)

    def _check_step_thread(self) -> None:
        me = threading.get_ident()
        if self._step_thread is not None and me != self._step_thread and not self._forked:
            # Steps are one sequence: one thread (the training loop's, which
            # started the profile) marks them; other threads' work is
            # attributed by time to that step.
            raise RuntimeError(
                "prof.step() is marked from the thread that started the profile (the training loop's): this "
                f"profile's steps come from thread {self._step_thread}, not {me} (docs/pytorch.md, 'Threads')"
            )

    def begin_step(self, step: int) -> None:
        if self._forked:
            return  # a forked child: the parent's profile
        if not self._running:
            raise RuntimeError("the profile is not running: use `with gpuutil.profile() as prof:`")
        self._check_step_thread()
        self._set_steps_source("user")
        self._session.begin_step(step, _core.now_ns())
        _core.nvtx_push_step(step)  # shows in Nsight Systems (gpuutil domain)

    def end_step(self) -> None:
        if self._forked:
            return
        _core.nvtx_pop_step()
        now = _now_ns()
        due = self._path.end_user_step(now)
        if due:
            self._on_due(now, due == 2)

    @property
    def _next_step(self) -> int:
        """The number the next step gets (kept by the C++ step path)."""
        return self._path.next_step

    @property
    def _unreported(self) -> bool:
        """Steps were closed since the last report batch."""
        return self._path.unreported

    def _set_steps_source(self, source: str) -> None:
        if self.steps_source != source:
            self.steps_source = source
            self._session.set_steps_source(source)
            if source == "user":
                self._path.mode = PATH_OFF  # the optimizer hooks no longer end steps

    def auto_step_boundary(self) -> bool:
        """Ends an automatic step now; called by optimizer step hooks.

        Each automatic step runs from the previous boundary (or the start
        of the profile) to the end of an ``optimizer.step()``, so the input
        fetch, forward and backward before it belong to it; evaluation and
        checkpoint writes noted before its training began are left out
        (time outside steps; the step path decides, gpuutil/step_path.h).
        Does nothing (returns False) once the user marks steps with
        :meth:`step`.
        """
        if self.steps_source != "optimizer_step":
            if not self._running or self.steps_source == "user" or self._forked:
                return False
            self._set_steps_source("optimizer_step")
            # Later boundaries are closed by the optimizer post-hook in C++.
            self._path.mode = PATH_AUTO
        elif not self._running or self._forked:
            return False
        now, due = self._path.close_auto_step()
        if due:
            self._on_due(now, due == 2)
        return True

    def _on_due(self, now: int, report: bool) -> None:
        """A boundary at ``now`` at which this side is due (the step path
        said so): the collectors' per-step work, then, if ``report``, a
        report batch (``report_interval_ms`` has passed since the last)."""
        handle = self._handle
        for on_step_end in self._per_step:
            on_step_end(handle)
        if report:
            with self._reporting():
                self._collect(now)
        self._rearm()

    def _rearm(self) -> None:
        """Tells the step path when the collectors' per-step work is next due."""
        if not self._per_step:
            self._path.wake_in(1 << 40)
            return
        k = 1 << 40
        for wake in self._wakes:
            k = 1 if wake is None else min(k, wake(self._handle))
            if k <= 1:
                break
        self._path.wake_in(k)


class _StepScope:
    __slots__ = ("_prof", "_step")

    def __init__(self, prof: "Profile", step: int) -> None:
        self._prof = prof
        self._step = step

    def __enter__(self) -> int:
        self._prof.begin_step(self._step)
        return self._step

    def __exit__(self, *exc: Any) -> None:
        self._prof.end_step()
