"""Forward time: the outermost ``nn.Module`` call of each forward, as a host
range named ``nn.Module: <Class>`` (category forward).

Intercepting every module call would do it, but that puts a Python frame
on every module call in the program (global module hooks are worse: while
any is registered every module call takes PyTorch's slow path, about 2 µs
more per call here, so hundreds of µs per step for a transformer). So
every call is intercepted only to *discover* which module classes are
called at the outermost level: during the first step, and again for one
step every ``rediscover_every`` steps. Between discoveries only those
classes' ``__call__`` is wrapped, which costs one Python call per call of
an instance of those classes and nothing for every other module. Wrapping
the class, not the instance, leaves models picklable and deep-copyable.

Discovery replaces ``torch.nn.Module.__call__`` (one process-wide wrapper,
shared by every profile that is discovering, and put back when the last
one ends), not global module hooks: under ``torch.compile`` global hooks
make ``torch.compile(module)`` warn and Dynamo guard on them, so removing
them after the discovery step would recompile every compiled module.

``torch.compile`` sees the same program as without gpuutil
(gpuutil.torch._compile): every wrapper here starts with
``torch.compiler.is_dynamo_compiling()``, which Dynamo folds to True while
it traces (so the wrapper is traced as a plain call of the original
``__call__``: no graph break, no warning) and which is a function
returning False otherwise, and its frame is never compiled on its own.
Dynamo does not guard on which function a class's ``__call__`` is, so
wrapping or restoring a class recompiles nothing; it does guard on the
closure cells of one it inlined, hence the discovery wrapper reads only
module globals. (A root class's wrapper is a closure: a function compiled
with the model called *inside* it, after the class was wrapped, recompiles
once after the profile stops and the class is restored.) A compiled module's outermost call
still makes a range: ``torch.compile(model)`` returns an
``OptimizedModule`` whose own call runs in Python and wraps the compiled
code (its range is named after the module it compiles, ``nn.Module:
Net``), and ``model.compile()`` compiles what ``Net.__call__`` calls, not
``Net.__call__`` itself. A module called *inside* a compiled function
(``torch.compile(train_step)``) is part of the compiled code and makes no
range.

Only the outermost call on a thread makes a range (a depth count per
thread), so nested or doubly-instrumented calls never double count. An
exception in forward still closes the range. ``uninstall()`` restores
every class, and ``Module.__call__`` once no profile discovers (unless
something else wrapped it after gpuutil did: then gpuutil's wrapper stays
in its chain, passing calls through).

The bookkeeping is the step path's (``_core.StepPath``: ``forward_enter``,
``forward_exit(module)``, ``forward_depth``): the depth per thread, the
range name per class and the range itself are C++, so a wrapped call costs
one Python frame (the wrapper), the ``is_dynamo_compiling`` call and two
C++ calls.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpuutil.torch._compile import dynamo_compiling_fn, quiet_frames

_MISSING = object()

#: The profiles discovering now (a tuple, replaced on change, so a call in
#: flight keeps the snapshot it entered with and exits exactly those).
_discovering: Tuple["ForwardRanges", ...] = ()
#: What ``_discovery_call`` calls: ``Module.__call__`` as it was before it
#: went in, and what ``Module.__dict__`` held then.
_module_call: Optional[Callable[..., Any]] = None
_own_module_call: Any = _MISSING
#: ``_discovery_call`` is in ``Module.__call__``'s chain: on top, or under a
#: wrapper someone put over it later (which still calls it).
_in_chain = False


def _is_dynamo_compiling() -> bool:  # replaced by torch's at the first install
    return False


# One module-level function, reading only module globals, never a closure:
# Dynamo guards on the closure cells of a function it inlines (the class's
# __call__ it looks up), so a new closure per discovery would recompile.
def _discovery_call(mod: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.nn.Module.__call__`` while any profile discovers root classes.
    With no profile discovering (a bound method of it kept by
    ``torch.compile(model)``, or left under a wrapper someone put over it)
    it is a plain call."""
    if _is_dynamo_compiling():  # first: Dynamo then reads (and guards on) nothing else
        return _module_call(mod, *args, **kwargs)  # type: ignore[misc]
    active = _discovering
    if not active:
        return _module_call(mod, *args, **kwargs)  # type: ignore[misc]
    return _seen_call(active, _module_call, mod, args, kwargs)  # type: ignore[arg-type]


def _seen_call(active: Tuple["ForwardRanges", ...], call: Callable[..., Any], mod: Any, args: Any, kwargs: Any) -> Any:
    """``call(mod, *args, **kwargs)`` seen by the discovering profiles
    ``active``: also a wrapped root class's call, which does not go through
    ``Module.__call__``'s wrapper (another profile may be discovering)."""
    for fr in active:
        fr._see(mod)
    try:
        return call(mod, *args, **kwargs)
    finally:
        for fr in active:
            fr._path.forward_exit(mod)


def _start_discovering(fr: "ForwardRanges") -> None:
    global _discovering, _module_call, _own_module_call, _is_dynamo_compiling, _in_chain
    import torch

    _is_dynamo_compiling = dynamo_compiling_fn()
    quiet_frames(_discovery_call, _seen_call, ForwardRanges._see)
    module = torch.nn.Module
    current = module.__dict__.get("__call__", _MISSING)
    if _in_chain and current is not _discovery_call and current is _own_module_call:
        _in_chain = False  # someone put back what was there before us: out of the chain
    if not _in_chain:  # (in it under another's wrapper, a second one would recurse)
        _own_module_call = current
        _module_call = module.__call__
        module.__call__ = _discovery_call  # type: ignore[method-assign]
        _in_chain = True
    _discovering = _discovering + (fr,)


def _stop_discovering(fr: "ForwardRanges") -> None:
    global _discovering, _in_chain
    import torch

    _discovering = tuple(d for d in _discovering if d is not fr)
    module = torch.nn.Module
    # Taken out only from the top: under a wrapper put over it after us it
    # stays, passing every call through, and a later discovery uses it.
    if not _discovering and module.__dict__.get("__call__") is _discovery_call:
        if _own_module_call is _MISSING:
            del module.__call__
        else:
            module.__call__ = _own_module_call  # type: ignore[method-assign]
        _in_chain = False


class ForwardRanges:
    """Times outermost module calls; see the module docstring."""

    def __init__(self, path: Any, *, rediscover_every: int = 100) -> None:
        """``path``: the profile's ``_core.StepPath`` (it records the ranges)."""
        self._path = path
        self._rediscover_every = max(1, rediscover_every)
        self._wrapped: Dict[type, Any] = {}  # class -> its own __call__ before wrapping, or _MISSING
        self._discovered: List[type] = []
        self._is_discovering = False
        self._next_discovery = rediscover_every  # step index of the next rediscovery

    # -- discovery: every module call goes through _discovery_call --------
    def _see(self, mod: Any) -> None:
        path = self._path
        if path.forward_depth == 0:
            cls = type(mod)
            if cls not in self._wrapped and cls not in self._discovered:
                self._discovered.append(cls)
        path.forward_enter()

    def _start_discovery(self) -> None:
        _start_discovering(self)
        self._is_discovering = True

    def _end_discovery(self) -> None:
        _stop_discovering(self)
        self._is_discovering = False
        for cls in self._discovered:
            self._wrap(cls)
        self._discovered.clear()

    def _wrap(self, cls: type) -> None:
        import torch

        if cls is torch.nn.Module or cls in self._wrapped:
            return  # wrapping the base class would intercept every module call again
        original = cls.__call__
        if original is _discovery_call:  # another profile is discovering now
            original = _module_call
        enter = self._path.forward_enter
        exit_: Callable[[Any], Any] = self._path.forward_exit
        is_dynamo_compiling = dynamo_compiling_fn()
        # Loaded once anything was compiled; never imported here (≈ 1 s).
        eval_frame = sys.modules.get("torch._dynamo.eval_frame")
        if eval_frame is not None and issubclass(cls, eval_frame.OptimizedModule):
            forward_exit = exit_

            def exit_compiled(mod: Any) -> None:  # torch.compile(model): named after the compiled module
                forward_exit(mod._orig_mod)

            quiet_frames(exit_compiled)
            exit_ = exit_compiled

        def __call__(mod: Any, *args: Any, **kwargs: Any) -> Any:
            if is_dynamo_compiling():
                return original(mod, *args, **kwargs)
            enter()
            try:
                active = _discovering
                if active:  # a discovery (this profile's or another's) sees this call too
                    return _seen_call(active, original, mod, args, kwargs)
                return original(mod, *args, **kwargs)
            finally:
                exit_(mod)

        quiet_frames(__call__)
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
        if self._is_discovering:
            self._end_discovery()
        elif index >= self._next_discovery:
            self._next_discovery = index + self._rediscover_every
            self._start_discovery()

    def steps_until_due(self, index: int) -> int:
        """Boundaries from step ``index``'s start to the next one on_step_end must see."""
        return 1 if self._is_discovering else max(1, self._next_discovery - index)

    @property
    def wrapped_classes(self) -> List[type]:
        return list(self._wrapped)

    @property
    def discovering(self) -> bool:
        return self._is_discovering

    def uninstall(self) -> None:
        if self._is_discovering:
            _stop_discovering(self)
            self._is_discovering = False
        self._discovered.clear()
        for cls, own in reversed(list(self._wrapped.items())):
            if own is _MISSING:
                del cls.__call__
            else:
                cls.__call__ = own  # type: ignore[method-assign]
        self._wrapped.clear()
