"""Runs a function once a module has been imported, without importing it.

``gpuutil.profile()`` may start before the program imports torch; the CUPTI
collector still has to hand CUPTI to torch.profiler when one starts later
(gpuutil.torch._profiler_guard). ``after_import("torch", install)`` puts a
``sys.meta_path`` entry that finds nothing itself: when the program imports
the module, the other finders find it, and ``install()`` runs right after
the module's own code ran (on the importing thread), then the entry removes
itself. ``before=`` runs just before the module's code (Kineto may
subscribe to CUPTI while torch imports: gpuutil lets go of its subscription
around it). Importing torch costs seconds, so gpuutil never does it itself.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Optional


class AfterImport:
    """The ``sys.meta_path`` entry; ``remove()`` takes it out (idempotent)."""

    def __init__(self, name: str, then: Callable[[], None], before: Optional[Callable[[], None]] = None) -> None:
        self._name = name
        self._then: Optional[Callable[[], None]] = then
        self._before = before
        self._lock = threading.Lock()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self._name or self._then is None:
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec
        hook = self

        def exec_then(module: Any) -> None:
            ours = getattr(module, "__name__", None) == hook._name  # (a loader may serve other modules too)
            if ours:
                hook.run_before()
            try:
                exec_module(module)
            finally:
                if ours:
                    hook.fire()

        loader.exec_module = exec_then  # type: ignore[union-attr]
        return spec

    def run_before(self) -> None:
        """Runs ``before`` (once), never failing the import."""
        with self._lock:
            before, self._before = self._before, None
            live = self._then is not None
        if before is not None and live:
            try:
                before()
            except Exception:  # noqa: BLE001 - never fail the program's own import
                pass

    def fire(self) -> None:
        """Runs the function (once) and takes the entry out."""
        with self._lock:
            then, self._then = self._then, None
        self._unlink()
        if then is not None:
            try:
                then()
            except Exception:  # noqa: BLE001 - never fail the program's own import
                pass

    def remove(self) -> None:
        """Cancels: the function does not run; the entry leaves sys.meta_path."""
        with self._lock:
            self._then = None
        self._unlink()

    def _unlink(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def after_import(name: str, then: Callable[[], None], before: Optional[Callable[[], None]] = None) -> AfterImport:
    """Calls ``then()`` right after module ``name`` is imported (at once if it
    already is), and ``before()`` right before its code runs (not when it is
    imported already). Returns the entry; ``remove()`` cancels both (a
    ``before`` that ran is followed by ``then`` even if the import fails)."""
    hook = AfterImport(name, then, before)
    if name in sys.modules:
        hook.fire()
    else:
        sys.meta_path.insert(0, hook)
    return hook
