"""Python-level PyTorch hooks: PyTorch's ranges without the C++ extension.

Each hook times one PyTorch-level call on the session clock and pushes a
host range named the way PyTorch's own RecordFunction ranges are named, so
the core classifies it the same way (gpuutil/range_classify.h):

====================================  ============================================  ==========
hook                                  range name                                    category
====================================  ============================================  ==========
``_BaseDataLoaderIter.__next__``      ``enumerate(DataLoader)#<Iter>.__next__``     dataloader
optimizer step pre/post hooks         ``Optimizer.step#<Opt>.step``                 optimizer
``Optimizer.zero_grad``               ``Optimizer.zero_grad#<Opt>.zero_grad``       optimizer
``Tensor.item``                       ``aten::item``                                host_sync
``Tensor.cpu/tolist/numpy`` on a      ``## host_sync: Tensor.cpu ##`` (...)          host_sync
device tensor, ``torch.cuda.synchronize``
``torch.distributed`` collectives     ``c10d::<function>`` (``c10d::all_reduce``)   collective
``torch.autograd.backward``           ``## backward ##``                            backward
outermost module calls (``_forward``) ``nn.Module: <Class>`` (outermost only)       forward
====================================  ============================================  ==========

The optimizer post-hook also ends automatic steps (``Profile.auto_step_boundary``).
With the LibTorch hook loaded (``python_ranges=False``) only the optimizer
step, backward, forward and blocking-copy hooks are installed; the rest
(DataLoader, zero_grad, collectives when torch.distributed is initialised)
comes from PyTorch's own RecordFunction ranges.

Cost: one ``time`` read and one ``Session.add_range`` call (a C++ call that
takes the session lock) per hooked call, a few microseconds; only
coarse-grained calls are hooked. Every patch is undone by ``uninstall()``.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import torch

from gpuutil import _core
from gpuutil.torch._forward import ForwardRanges

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._profile import Profile

_now_ns = _core.now_ns

#: torch.distributed functions timed as collectives by the fallback.
_COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "reduce", "all_to_all", "all_to_all_single",
    "barrier", "gather", "scatter", "send", "recv",
)


def on_accelerator(t: Any) -> bool:
    """Whether a copy of ``t`` to the host waits for a device."""
    return t.device.type not in ("cpu", "meta")


class PythonHooks:
    """Installs and removes the Python-level hooks for one Profile."""

    def __init__(
        self,
        prof: "Profile",
        *,
        forward_hooks: bool = True,
        python_ranges: bool = True,
        item_hook: bool = True,
        collectives_hook: bool = False,
        detail_flag: Optional[List[bool]] = None,
    ) -> None:
        """``python_ranges=False`` installs only what the LibTorch hook does not
        cover (optimizer step boundaries, backward, forward, ``Tensor.item``
        unless ``item_hook=False``, ``torch.distributed`` collectives with
        ``collectives_hook``). ``detail_flag[0]`` is True while the hook's
        detail tier records ``aten::item`` and ``c10d::*`` itself: those two
        hooks then let the call through untimed."""
        self._prof = prof
        self._python_ranges = python_ranges
        self._item_hook = item_hook or python_ranges
        self._collectives_hook = collectives_hook or python_ranges
        self._detail = detail_flag if detail_flag is not None else [False]
        self._session = prof._session
        self._forward_hooks = forward_hooks
        self._threads: Dict[int, int] = {}
        self._local = threading.local()
        self._undo: List[Callable[[], None]] = []
        self._pid = os.getpid()
        self._forward: Optional[ForwardRanges] = None

    # -- helpers -------------------------------------------------------
    def _thread(self) -> int:
        key = threading.get_ident() & 0xFFFFFFFF  # gpuutil._profile.thread_key(): what CUPTI records
        idx = self._threads.get(key)
        if idx is None:
            idx = self._session.thread_index(
                self._pid, key, threading.current_thread().name, os_tid=threading.get_native_id()
            )
            self._threads[key] = idx
        return idx

    def _add(self, name: str, start_ns: int, end_ns: int, is_op: bool = False) -> None:
        self._session.add_range(name, start_ns, end_ns, self._thread(), is_op)

    def _patch(self, owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Replaces ``owner.attr`` by ``make(original)``; undo restores exactly
        what was there (an inherited attribute is deleted again, not shadowed)."""
        own = attr in vars(owner)
        saved = vars(owner)[attr] if own else None
        setattr(owner, attr, make(getattr(owner, attr)))

        def undo() -> None:
            if own:
                setattr(owner, attr, saved)
            else:
                delattr(owner, attr)

        self._undo.append(undo)

    # -- install / uninstall ---------------------------------------------
    def install(self) -> None:
        if self._python_ranges:
            self._install_dataloader()
        if self._collectives_hook:
            self._install_collectives()
        if self._item_hook:
            self._install_item()
        self._install_blocking_copies()
        self._install_optimizer()
        self._install_backward()
        if self._forward_hooks:
            self._install_forward()

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _install_dataloader(self) -> None:
        from torch.utils.data import dataloader

        add = self._add

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def __next__(it: Any) -> Any:
                start = _now_ns()
                try:
                    return original(it)
                finally:
                    add(f"enumerate(DataLoader)#{type(it).__name__}.__next__", start, _now_ns())

            return __next__

        self._patch(dataloader._BaseDataLoaderIter, "__next__", make)

    def _install_optimizer(self) -> None:
        from torch.optim import optimizer as optim_mod

        local = self._local
        add = self._add
        prof = self._prof
        # Recorded here in both modes: PyTorch's own "Optimizer.step#..."
        # range (which the LibTorch hook also sees) closes only after these
        # hooks, that is after the step boundary this post-hook makes.
        main_ident = threading.main_thread().ident

        def pre(opt: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
            stack = getattr(local, "opt_stack", None)
            if stack is None:
                stack = local.opt_stack = []
            stack.append(_now_ns())

        def post(opt: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
            stack = getattr(local, "opt_stack", None)
            if not stack:
                return
            start = stack.pop()
            add(f"Optimizer.step#{type(opt).__name__}.step", start, _now_ns())
            if not stack and threading.get_ident() == main_ident:
                prof.auto_step_boundary()

        h1 = optim_mod.register_optimizer_step_pre_hook(pre)
        h2 = optim_mod.register_optimizer_step_post_hook(post)
        self._undo.append(h1.remove)
        self._undo.append(h2.remove)

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def zero_grad(opt: Any, *args: Any, **kwargs: Any) -> Any:
                start = _now_ns()
                try:
                    return original(opt, *args, **kwargs)
                finally:
                    add(f"Optimizer.zero_grad#{type(opt).__name__}.zero_grad", start, _now_ns())

            return zero_grad

        if self._python_ranges:
            self._patch(torch.optim.Optimizer, "zero_grad", make)

    def _timed(
        self, name: str, is_op: bool = True, untimed_in_detail: bool = False
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A patch maker: the call, timed as one range named ``name``
        (``untimed_in_detail``: not while the hook's detail tier records it)."""
        add = self._add
        detail = self._detail if untimed_in_detail else [False]

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def timed(*args: Any, **kwargs: Any) -> Any:
                if detail[0]:
                    return original(*args, **kwargs)
                start = _now_ns()
                try:
                    return original(*args, **kwargs)
                finally:
                    add(name, start, _now_ns(), is_op)

            return timed

        return make

    def _install_item(self) -> None:
        """``Tensor.item`` as ``aten::item`` (host_sync), except for CPU
        tensors inside ``optimizer.step()``: optimizers read their CPU step
        counters with ``.item()`` once per parameter (AdamW: ~30 calls per
        step for a small transformer), which waits for nothing and would
        only cost time and blur the optimizer's own time."""
        timed = self._timed("aten::item", untimed_in_detail=True)
        local = self._local

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            timed_item = timed(original)

            def item(t: Any) -> Any:
                if getattr(local, "opt_stack", None) and not on_accelerator(t):
                    return original(t)
                return timed_item(t)

            return item

        self._patch(torch.Tensor, "item", make)

    def _install_blocking_copies(self) -> None:
        """Copies to the host that wait for the device: ``.cpu()``,
        ``.tolist()``, ``.numpy()`` of a tensor on an accelerator, and
        ``torch.cuda.synchronize()``. A CPU tensor's ``.cpu()`` waits for
        nothing and makes no range."""
        add = self._add

        def make(label: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
            name = f"## host_sync: {label} ##"

            def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
                def method(t: Any, *args: Any, **kwargs: Any) -> Any:
                    if not on_accelerator(t):
                        return original(t, *args, **kwargs)
                    start = _now_ns()
                    try:
                        return original(t, *args, **kwargs)
                    finally:
                        add(name, start, _now_ns(), True)

                return method

            return wrap

        for attr in ("cpu", "tolist", "numpy"):
            self._patch(torch.Tensor, attr, make(f"Tensor.{attr}"))
        self._patch(torch.cuda, "synchronize", self._timed("## host_sync: torch.cuda.synchronize ##"))

    def _install_collectives(self) -> None:
        """``torch.distributed`` collectives as ``c10d::<function>`` ranges
        (the LibTorch hook sees PyTorch's own c10d ops instead)."""
        import torch.distributed as dist

        if not dist.is_available():
            return
        for fname in _COLLECTIVES:
            if hasattr(dist, fname):
                self._patch(dist, fname, self._timed(f"c10d::{fname}", untimed_in_detail=not self._python_ranges))

    def _install_backward(self) -> None:
        add = self._add
        local = self._local

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def backward(*args: Any, **kwargs: Any) -> Any:
                if getattr(local, "in_backward", False):
                    return original(*args, **kwargs)
                local.in_backward = True
                start = _now_ns()
                try:
                    return original(*args, **kwargs)
                finally:
                    local.in_backward = False
                    add("## backward ##", start, _now_ns())

            return backward

        self._patch(torch.autograd, "backward", make)

    def _install_forward(self) -> None:
        self._forward = ForwardRanges(self._add)
        self._forward.install()
        self._undo.append(self._forward.uninstall)

    def on_step_end(self) -> None:
        """Called at every step boundary (forward-class discovery)."""
        if self._forward is not None:
            self._forward.on_step_end()
