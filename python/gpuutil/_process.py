"""Process events of live profiles: thread keys, fork and SIGTERM.

``live_profiles`` holds every running profile. In a forked child they are
detached (``Profile._on_fork_in_child``): the child has the parent's
profiles but not their threads. SIGTERM (``_Signals``) writes every
finished step first, then goes on to the disposition that was there
before. At interpreter exit every live profile is stopped, so the last
step is reported without ``stop()``.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._profile import Profile


def thread_key() -> int:
    """The calling thread's key in the session: the low 32 bits of
    ``pthread_self()``, the thread id CUPTI puts in its API records (so ranges
    from Python, the LibTorch hook, NVTX and the CUDA launches of one thread
    meet on one session thread; gpuutil/thread_key.h). The OS thread id only
    names the thread."""
    return threading.get_ident() & 0xFFFFFFFF


def native_id() -> int:
    return threading.get_native_id()


live_profiles: "weakref.WeakSet[Profile]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The child has the parent's profiles but not their threads, and their
    # locks may be held: it must never touch them (no report written twice,
    # no deadlock at exit). The C++ session checks its owner pid too.
    for prof in list(live_profiles):
        prof._on_fork_in_child()
    live_profiles.clear()
    signals.reset_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Signals:
    """SIGTERM (how torchrun, Slurm and Kubernetes stop or preempt a job)
    first writes every finished step of every live profile to its JSON Lines
    file, so that a SIGKILL after the grace period loses none of them, then
    goes on to the disposition that was there before, exactly as without
    gpuutil:

    * the script's own handler (which often only sets a flag so the loop
      can finish its epoch and save a checkpoint): it is called, and the
      profiles keep running; they end when the script ends them or exits;
    * the default action: the profiles are stopped (the open step is
      reported too) and the process terminates by the same signal.

    SIGINT needs nothing: KeyboardInterrupt unwinds through ``with prof:``.
    Installed only from the main thread, only over the default handler or a
    Python one, and removed when the last profile stops (if still ours)."""

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            import signal

            previous = signal.getsignal(signal.SIGTERM)
            if previous is signal.SIG_IGN or previous is None:
                return  # ignored on purpose, or set outside Python: leave it
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):  # not the main interpreter / platform
            return
        self._previous = previous
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed or threading.current_thread() is not threading.main_thread():
            return
        import signal

        if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, self._previous)
        self._installed = False

    def reset_in_child(self) -> None:
        self.uninstall()

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        import signal

        previous = self._previous
        if callable(previous):
            # The script handles SIGTERM itself: finished steps are written,
            # profiling goes on while the script decides what to do.
            for prof in list(live_profiles):
                try:
                    prof.flush_finished()
                except Exception:  # noqa: BLE001 - never stand between the job and its handler
                    pass
            previous(signum, frame)
            return
        # SIG_DFL: the process ends now; report everything, then terminate
        # by the same signal, as without gpuutil.
        _stop_live_profiles()
        self.uninstall()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


signals = _Signals()


@atexit.register
def _stop_live_profiles() -> None:
    # Exit without stop() still reports the last step.
    for prof in list(live_profiles):
        try:
            prof.stop()
        except Exception:  # pragma: no cover - never fail interpreter exit
            pass
