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

The bookkeeping is the step path's (``_core.StepPath``: ``forward_enter``,
``forward_exit(module)``, ``forward_depth``): the depth per thread, the
range name per class and the range itself are C++, so a wrapped call costs
one Python frame (the wrapper) and two C++ calls.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

_MISSING = object()


class ForwardRanges:
    """Times outermost module calls; see the module docstring."""

    def __init__(self, path: Any, *, rediscover_every: int = 100) -> None:
        """``path``: the profile's ``_core.StepPath`` (it records the ranges)."""
        self._path = path
        self._rediscover_every = max(1, rediscover_every)
        self._wrapped: Dict[type, Any] = {}  # class -> its own __call__ before wrapping, or _MISSING
        self._discovered: List[type] = []
        self._global: Optional[List[Any]] = None  # handles while discovering
        self._next_discovery = rediscover_every  # step index of the next rediscovery

    # -- discovery with global hooks -------------------------------------
    def _start_discovery(self) -> None:
        from torch.nn.modules import module as module_mod

        path = self._path
        enter = path.forward_enter

        def pre(mod: Any, args: Any) -> None:
            if path.forward_depth == 0:
                cls = type(mod)
                if cls not in self._wrapped and cls not in self._discovered:
                    self._discovered.append(cls)
            enter()

        def post(mod: Any, args: Any, out: Any) -> None:
            path.forward_exit(mod)

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
        enter, exit_ = self._path.forward_enter, self._path.forward_exit

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

    def on_step_end(self, index: int) -> None:
        """Called at step boundaries (``index``: the step starting now, 1 at
        the first boundary): ends or starts a discovery step. It must be
        called at the boundary steps_until_due() named, and may be called
        at any other."""
        if self._global is not None:
            self._end_discovery()
        elif index >= self._next_discovery:
            self._next_discovery = index + self._rediscover_every
            self._start_discovery()

    def steps_until_due(self, index: int) -> int:
        """Boundaries from step ``index``'s start to the next one on_step_end must see."""
        return 1 if self._global is not None else max(1, self._next_discovery - index)

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
