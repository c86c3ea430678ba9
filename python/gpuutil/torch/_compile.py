"""gpuutil under ``torch.compile``: its wrappers out of Dynamo's way, and
the steps that compiled marked.

Out of the way. A wrapper that Dynamo may trace from compiled code (the
outermost module call, discovery, ``torch.autograd.backward``, the
collectives, ``torch.cuda.synchronize``, ``Optimizer.zero_grad``, a
DataLoader's ``__next__``, and ``Tensor.item``/``.cpu()``/``.tolist()``/
``.numpy()`` when called as ``torch.Tensor.cpu(t)``: as methods Dynamo
handles them by name) starts with ``is_dynamo_compiling()``
(``torch.compiler.is_dynamo_compiling``), which Dynamo folds to True while
it traces: traced, the wrapper is a plain call of what it wraps (no graph
break, no warning, nothing read that Dynamo would guard on). Every
wrapper's frame is also marked, for Dynamo's frame evaluation,
as one to run, not compile, on its own (``quiet_frames``), as Dynamo
treats ``torch.nn``'s own code: while a compiled function runs, Dynamo
looks at every new frame that is not skipped and compiles it, so a wrapper
called from code that runs eagerly there (``torch.nn.Sequential.compile()``
runs its children's ``__call__`` eagerly; the eager half of a graph break)
would otherwise become a compiled frame, with graph breaks of its own, that
the program without gpuutil does not have. gpuutil's work at a step
boundary, which runs from the optimizer post-hook and so possibly inside a
compiled ``optimizer.step``, is marked with everything it calls.

Marked (``CompileWatch``). Dynamo's compile start/end callbacks
(``torch._dynamo.callback``: every frame it compiles or recompiles, and a
backward compiled lazily at its first run) call the step path's
``compile_begin``/``compile_end``: every step that overlaps a compilation
carries the ``compile_warmup`` diagnostic and ``steps[].compile_warmup``
(docs/report-schema.md). Importing ``torch._dynamo`` takes about a second,
so gpuutil never does: when the program has not imported it yet, a
``sys.meta_path`` entry that finds nothing itself registers the callbacks
the moment the program's own first ``torch.compile`` imports it.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, List, Optional

from gpuutil._import_hook import AfterImport, after_import

_CALLBACK_MODULE = "torch._dynamo.callback"


def dynamo_compiling_fn() -> Callable[[], bool]:
    """``torch.compiler.is_dynamo_compiling`` (False outside Dynamo's
    tracing, folded to True by Dynamo; 24 ns per call here:
    benchmarks/RESULTS.md), or a function returning False on a torch
    without it."""
    import torch

    compiler = getattr(torch, "compiler", None)
    fn = getattr(compiler, "is_dynamo_compiling", None) or getattr(compiler, "is_compiling", None)
    return fn if fn is not None else (lambda: False)


def quiet_frames(*fns: Callable[..., Any], recursive: bool = False) -> None:
    """Dynamo never compiles a frame of these functions on its own (it still
    inlines them from code it traces). ``recursive``: nor any frame they
    call (gpuutil's own work at a step boundary); else it looks at those as
    usual. A torch without Dynamo's frame strategies leaves them as they
    are. The mark is on the function's code object, shared by every closure
    made from it."""
    try:
        from torch._C._dynamo import eval_frame
    except ImportError:  # pragma: no cover - a torch without Dynamo
        return
    try:
        action = eval_frame._FrameAction
        strategy = eval_frame._FrameExecStrategy(action.SKIP, action.SKIP if recursive else action.DEFAULT)
        for fn in fns:
            eval_frame.set_code_exec_strategy(fn.__code__, strategy)
    except (AttributeError, TypeError):  # pragma: no cover - another torch's private API
        pass


class CompileWatch:
    """Dynamo's compile callbacks into the step path (``compile_begin``/
    ``compile_end``) while installed; see the module docstring."""

    def __init__(self, path: Any) -> None:
        self._path = path
        self._handler: Any = None
        self._callbacks: List[Callable[[Any], None]] = []
        self._finder: Optional[AfterImport] = None

    def install(self) -> None:
        if not hasattr(self._path, "compile_begin"):
            return  # pragma: no cover - a core without compile_warmup
        # At once when Dynamo's callbacks module is loaded, else right after
        # the program (or torch.compile) imports it (gpuutil._import_hook).
        self._finder = after_import(_CALLBACK_MODULE, self._register)

    def _register(self) -> None:
        if self._finder is not None:
            self._finder.remove()
            self._finder = None
        handler = getattr(sys.modules.get(_CALLBACK_MODULE), "callback_handler", None)
        if handler is None or self._handler is not None:
            return  # pragma: no cover - another torch's private API
        begin, end = self._path.compile_begin, self._path.compile_end

        def on_start(args: Any) -> None:
            trigger = getattr(getattr(args, "callback_trigger", None), "name", "dynamo").lower()
            begin(f"torch.compile: frame {getattr(args, 'compile_id', '?')} ({trigger})")

        def on_end(args: Any) -> None:
            end()

        handler.register_start_callback(on_start)
        handler.register_end_callback(on_end)
        self._handler, self._callbacks = handler, [on_start, on_end]

    def uninstall(self) -> None:
        if self._finder is not None:
            self._finder.remove()
            self._finder = None
        if self._handler is not None:
            on_start, on_end = self._callbacks
            for remove, cb in ((self._handler.remove_start_callback, on_start), (self._handler.remove_end_callback, on_end)):
                try:
                    remove(cb)
                except ValueError:  # pragma: no cover - cleared by torch._dynamo.callback_handler.clear()
                    pass
            self._handler, self._callbacks = None, []
