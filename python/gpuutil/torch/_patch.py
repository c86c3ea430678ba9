"""Replacing a class attribute by a wrapper, and undoing exactly that.

``patch(owner, attr, make)`` sets ``owner.attr = make(original)`` and
returns an undo that restores what ``owner`` itself held: its own attribute
is put back, an inherited one is deleted again (never shadowed by a copy).
The wrapper is never a compiled frame of its own under torch.compile
(gpuutil.torch._compile.quiet_frames). Used by the Python-level hooks
(_fallback) and the DataLoader settings watch (_loader).
"""

from __future__ import annotations

from typing import Any, Callable

from gpuutil.torch._compile import quiet_frames


def patch(owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[[], None]:
    own = attr in vars(owner)
    saved = vars(owner)[attr] if own else None
    wrapper = make(getattr(owner, attr))
    quiet_frames(wrapper)
    setattr(owner, attr, wrapper)

    def undo() -> None:
        if own:
            setattr(owner, attr, saved)
        else:
            delattr(owner, attr)

    return undo
