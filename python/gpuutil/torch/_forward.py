"""Forward time: the outermost ``nn.Module`` call of each forward, as a host
range named ``nn.Module: <Class>`` (category forward).

Global module hooks would do it, but while any global hook is registered
every module call in the program takes PyTorch's slow path (about 2 µs more
per module call here, so hundreds of µs per step for a transformer). So
global hooks run only to *discover* which module classes are called at the
outermost level: during the first step, and again for one step every
``rediscover_every`` steps. Between discoveries only those classes'
``__call__`` is wrapped, which costs one Python call per call of an
instance of those classes and nothing for every other module. Wrapping the
class, not the instance, leaves models picklable and deep-copyable.

Only the outermost call on a thread makes a range (a depth count per
thread), so nested or doubly-instrumented calls never double count. An
exception in forward still closes the range. ``uninstall()`` restores
every class and removes every hook.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional

from gpuutil import _core

_now_ns = _core.now_ns
_MISSING = object()


class ForwardRanges:
    """Times outermost module calls; see the module docstring."""

    def __init__(self, add: Callable[[str, int, int], None], *, rediscover_every: int = 100) -> None:
        self._add = add
        self._rediscover_every = max(1, rediscover_every)
        self._local = threading.local()
        self._names: Dict[type, str] = {}
        self._wrapped: Dict[type, Any] = {}  # class -> its own __call__ before wrapping, or _MISSING
        self._discovered: List[type] = []
        self._global: Optional[List[Any]] = None  # handles while discovering
        self._steps = 0

    # -- range bookkeeping (shared by hooks and wrappers) -----------------
    def _enter(self) -> None:
        local = self._local
        depth = getattr(local, "depth", 0)
        if depth == 0:
            local.start_ns = _now_ns()
        local.depth = depth + 1

    def _exit(self, mod: Any) -> None:
        local = self._local
        depth = getattr(local, "depth", 0) - 1
        if depth < 0:
            return
        local.depth = depth
        if depth == 0:
            cls = type(mod)
            name = self._names.get(cls)
            if name is None:
                name = self._names[cls] = f"nn.Module: {cls.__name__}"
            self._add(name, local.start_ns, _now_ns())

    # -- discovery with global hooks -------------------------------------
    def _start_discovery(self) -> None:
        from torch.nn.modules import module as module_mod

        def pre(mod: Any, args: Any) -> None:
            if getattr(self._local, "depth", 0) == 0:
                cls = type(mod)
                if cls not in self._wrapped and cls not in self._discovered:
                    self._discovered.append(cls)
            self._enter()

        def post(mod: Any, args: Any, out: Any) -> None:
            self._exit(mod)

        self._global = [
            module_mod.register_module_forward_pre_hook(pre),
            module_mod.register_module_forward_hook(post, always_call=True),
        ]

    def _end_discovery(self) -> None:
        for handle in self._global or ():
            handle.remove()
        self._global = None
        for cls in self._discovered:
            self._wrap(cls)
        self._discovered.clear()

    def _wrap(self, cls: type) -> None:
        import torch

        if cls is torch.nn.Module or cls in self._wrapped:
            return  # wrapping the base class would be a global hook again
        original = cls.__call__
        enter, exit_ = self._enter, self._exit

        def __call__(mod: Any, *args: Any, **kwargs: Any) -> Any:
            enter()
            try:
                return original(mod, *args, **kwargs)
            finally:
                exit_(mod)

        self._wrapped[cls] = cls.__dict__.get("__call__", _MISSING)
        cls.__call__ = __call__  # type: ignore[method-assign]

    # -- lifecycle --------------------------------------------------------
    def install(self) -> None:
        self._start_discovery()

    def on_step_end(self) -> None:
        """Called at every step boundary: ends or starts a discovery step."""
        self._steps += 1
        if self._global is not None:
            self._end_discovery()
        elif self._steps % self._rediscover_every == 0:
            self._start_discovery()

    @property
    def wrapped_classes(self) -> List[type]:
        return list(self._wrapped)

    @property
    def discovering(self) -> bool:
        return self._global is not None

    def uninstall(self) -> None:
        for handle in self._global or ():
            handle.remove()
        self._global = None
        self._discovered.clear()
        for cls, own in reversed(list(self._wrapped.items())):
            if own is _MISSING:
                del cls.__call__
            else:
                cls.__call__ = own  # type: ignore[method-assign]
        self._wrapped.clear()
