"""What the live DataLoaders are set up with, for advice that fits them.

While a profile runs, ``torch.utils.data.DataLoader.__iter__`` is wrapped:
each time a loader makes (or, with ``persistent_workers``, resets) its
iterator, its ``num_workers``, ``pin_memory``, ``persistent_workers`` and
``prefetch_factor`` go to the session (``Session.set_loader``) under the
name its batch waits are recorded with,
``enumerate(DataLoader)#<iterator class>.__next__`` (PyTorch's own range and
the ``_fallback`` wrapper's). Step reports then carry them in ``loaders``,
and the dataloader findings never recommend a setting the loader already
has (docs/findings.md, "Input pipeline"). Loaders sharing a name (two
multi-process loaders) share an entry: the latest iterator made wins.

Not a hot path: one wrapper frame per ``iter(loader)`` (once per epoch).
The wrapper never breaks the job: anything it raises is swallowed and
counted (``failures``; the ``collector_failed`` diagnostic, with the
exception). ``uninstall()`` restores exactly what was there.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from gpuutil.torch._compile import dynamo_compiling_fn
from gpuutil.torch._patch import patch

Settings = Tuple[Optional[int], Optional[bool], Optional[bool], Optional[int]]


def loader_settings(loader: Any) -> Settings:
    """(num_workers, pin_memory, persistent_workers, prefetch_factor) of a
    DataLoader, None where it has no such attribute of the expected type.
    ``prefetch_factor`` only counts with workers (PyTorch ignores it without)."""

    def flag(name: str) -> Optional[bool]:
        v = getattr(loader, name, None)
        return v if isinstance(v, bool) else None

    def count(name: str) -> Optional[int]:
        v = getattr(loader, name, None)
        return int(v) if isinstance(v, int) and not isinstance(v, bool) else None

    workers = count("num_workers")
    return workers, flag("pin_memory"), flag("persistent_workers"), count("prefetch_factor") if workers else None


def wait_range_name(iterator: Any) -> str:
    """The name of the ranges that time ``iterator.__next__``."""
    return f"enumerate(DataLoader)#{type(iterator).__name__}.__next__"


class LoaderSettingsWatch:
    """Sends each live DataLoader's settings to ``session`` while installed."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._sent: Dict[str, Settings] = {}
        self._undo: Optional[Callable[[], None]] = None
        #: Exceptions the wrapper swallowed (each also counted in the session).
        self.failures = 0

    def install(self) -> None:
        if self._undo is not None:
            return
        from torch.utils.data import DataLoader

        note = self._note
        is_dynamo_compiling = dynamo_compiling_fn()

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def __iter__(loader: Any) -> Any:
                it = original(loader)
                if not is_dynamo_compiling():
                    note(loader, it)
                return it

            return __iter__

        self._undo = patch(DataLoader, "__iter__", make)

    def uninstall(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()

    def _note(self, loader: Any, iterator: Any) -> None:
        try:
            name = wait_range_name(iterator)
            settings = loader_settings(loader)
            if self._sent.get(name) != settings:
                self._session.set_loader(name, *settings)
                self._sent[name] = settings
        except Exception as e:  # noqa: BLE001 - never raised into the training loop
            self.failures += 1
            try:
                self._session.count("collector_failed", 1, f"DataLoader settings: {type(e).__name__}: {e}")
            except Exception:  # noqa: BLE001 - a closed session: the failure stays in `failures`
                pass
