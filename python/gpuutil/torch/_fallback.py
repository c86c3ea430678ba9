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
``Tensor.item`` (not inside an        ``aten::item``                                host_sync
optimizer step: the original method
is back there)
``Tensor.cpu/tolist/numpy`` on a      ``## host_sync: Tensor.cpu ##`` (...)          host_sync
device tensor, ``torch.cuda.synchronize``
``torch.distributed`` collectives     ``c10d::<function>`` (``c10d::all_reduce``)   collective
``torch.autograd.backward``           ``## backward ##``                            backward
``torch.save``                        (none: a checkpoint between automatic steps)  —
outermost module calls (``_forward``) ``nn.Module: <Class>`` (outermost only)       forward
====================================  ============================================  ==========

The optimizer post-hook also ends automatic steps (``Profile.auto_step_boundary``).
With the LibTorch hook loaded (``python_ranges=False``) the optimizer
step, backward, forward and blocking-copy hooks are installed, and the
``Tensor.item``, collective, DataLoader and zero_grad wrappers time their
calls on the steps where the hook's detail tier does not record PyTorch's
own ranges for them (``detail_flag``; DataLoader and zero_grad only with
``loader_hooks``: the hook's USER_SCOPE callback is then part of the
detail tier).

Cost: each hook is one Python wrapper frame around the call, a clock read
and one C++ call into the profile's step path (``_core.StepPath``), which
knows the calling thread and the range's name and category already (a
"slot"; the session lock is taken once per range). The optimizer pre/post
hooks are the step path's own C++ methods, with no Python frame; the
post-hook also closes the automatic step there. Only coarse-grained calls
are hooked. Every patch is undone by ``uninstall()``. Under
``torch.compile`` the wrappers step aside: Dynamo traces them as plain
calls and never compiles their frames (``gpuutil.torch._compile``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

import torch

from gpuutil import _core
from gpuutil.torch._compile import CompileWatch, dynamo_compiling_fn, quiet_frames
from gpuutil.torch._forward import ForwardRanges
from gpuutil.torch._patch import patch

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._collectors import CollectorHandle

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
    """Installs and removes the Python-level hooks for one profile (its collector handle)."""

    def __init__(
        self,
        prof: "CollectorHandle",
        *,
        forward_hooks: bool = True,
        python_ranges: bool = True,
        item_hook: bool = True,
        collectives_hook: bool = False,
        loader_hooks: bool = False,
        detail_flag: Optional[List[bool]] = None,
    ) -> None:
        """``python_ranges=False`` installs only what the LibTorch hook does not
        cover (optimizer step boundaries, backward, forward, ``Tensor.item``
        unless ``item_hook=False``, ``torch.distributed`` collectives with
        ``collectives_hook``, DataLoader waits and ``zero_grad`` with
        ``loader_hooks``, for steps without the hook's USER_SCOPE callback).
        ``detail_flag[0]`` is True while the hook's detail tier records
        ``aten::item``, ``c10d::*`` and (with ``loader_hooks``) the
        USER_SCOPE ranges itself: those hooks then let the call through
        untimed."""
        self._prof = prof
        self._path = prof.path
        self._python_ranges = python_ranges
        self._loader_hooks = loader_hooks or python_ranges
        #: loader_off[0]: the DataLoader and zero_grad wrappers let calls
        #: through untimed (the hook's USER_SCOPE callback went always-on).
        self.loader_off = [False]
        self._item_hook = item_hook or python_ranges
        self._collectives_hook = collectives_hook or python_ranges
        self._detail = detail_flag if detail_flag is not None else [False]
        self._forward_hooks = forward_hooks
        self._undo: List[Callable[[], None]] = []
        self._forward: Optional[ForwardRanges] = None

    # -- helpers -------------------------------------------------------
    def _class_slot(self, prefix: str, suffix: str) -> Callable[[Any], int]:
        """slot_of(obj): the slot of ``prefix + type(obj).__name__ + suffix``,
        built once per class."""
        slots: Dict[type, int] = {}
        path = self._path

        def slot_of(obj: Any) -> int:
            cls = type(obj)
            slot = slots.get(cls)
            if slot is None:
                slot = slots[cls] = path.slot(f"{prefix}{cls.__name__}{suffix}")
            return slot

        quiet_frames(slot_of)  # called by the wrappers (gpuutil.torch._compile)
        return slot_of

    def _patch(self, owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Replaces ``owner.attr`` by ``make(original)``; undo restores exactly
        what was there (an inherited attribute is deleted again, not shadowed)."""
        self._undo.append(patch(owner, attr, make))

    # -- install / uninstall ---------------------------------------------
    def install(self) -> None:
        # The boundary's Python side (report batches, collectors, sinks) runs
        # from the optimizer post-hook, which can be inside a compiled
        # optimizer.step: Dynamo compiles none of it (gpuutil.torch._compile).
        quiet_frames(*self._prof.boundary_callbacks, recursive=True)
        # Registered now, not at its first range (which may fall inside
        # compiled code, where the registration's Python frames would be
        # frames Dynamo looks at).
        self._path.thread_here()
        watch = CompileWatch(self._path)  # steps that compile: compile_warmup
        watch.install()
        self._undo.append(watch.uninstall)
        if self._loader_hooks:
            self._install_dataloader()
        if self._collectives_hook:
            self._install_collectives()
        if self._item_hook:
            self._install_item()
        self._install_blocking_copies()
        self._install_checkpoint()
        self._install_optimizer()
        self._install_clip_grad()
        self._install_grad_scaler()
        self._install_backward()
        if self._forward_hooks:
            self._install_forward()

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _install_dataloader(self) -> None:
        from torch.utils.data import dataloader

        add, slot_of = self._path.add, self._class_slot("enumerate(DataLoader)#", ".__next__")
        detail = self._detail if not self._python_ranges else [False]
        off = self.loader_off
        is_dynamo_compiling = dynamo_compiling_fn()

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def __next__(it: Any) -> Any:
                # Traced by Dynamo: the original, and no flag read (a guard).
                if is_dynamo_compiling() or detail[0] or off[0]:
                    return original(it)  # the hook's USER_SCOPE callback records it
                start = _now_ns()
                try:
                    return original(it)
                finally:
                    add(slot_of(it), start)

            return __next__

        self._patch(dataloader._BaseDataLoaderIter, "__next__", make)

    def _install_optimizer(self) -> None:
        from torch.optim import optimizer as optim_mod

        add, slot_of = self._path.add, self._class_slot("Optimizer.zero_grad#", ".zero_grad")
        detail = self._detail if not self._python_ranges else [False]
        off = self.loader_off
        # Recorded here in both modes: PyTorch's own "Optimizer.step#..."
        # range (which the LibTorch hook also sees) closes only after these
        # hooks, that is after the step boundary this post-hook makes. Both
        # hooks are C++ (the step path): the post-hook records the range
        # "Optimizer.step#<Class>.step" and, at the outermost step on the
        # main thread, ends the automatic step (Profile.auto_step_boundary).
        h1 = optim_mod.register_optimizer_step_pre_hook(self._path.optimizer_pre)
        h2 = optim_mod.register_optimizer_step_post_hook(self._path.optimizer_post)
        self._undo.append(h1.remove)
        self._undo.append(h2.remove)

        is_dynamo_compiling = dynamo_compiling_fn()

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def zero_grad(opt: Any, *args: Any, **kwargs: Any) -> Any:
                # Traced by Dynamo (a compiled step that zeroes gradients):
                # the original, and no flag read (a guard).
                if is_dynamo_compiling() or detail[0] or off[0]:
                    return original(opt, *args, **kwargs)  # the hook's USER_SCOPE callback records it
                start = _now_ns()
                try:
                    return original(opt, *args, **kwargs)
                finally:
                    add(slot_of(opt), start)

            return zero_grad

        if self._loader_hooks:
            self._patch(torch.optim.Optimizer, "zero_grad", make)

    def _install_clip_grad(self) -> None:
        """``torch.nn.utils.clip_grad_norm_`` / ``clip_grad_value_`` timed as
        ranges of those names: optimizer time with a culprit (docs/pytorch.md),
        not ``other``. Calls through the module attribute are seen (a name
        imported before the profile started keeps PyTorch's function)."""
        import torch.nn.utils as nn_utils

        for fn in ("clip_grad_norm_", "clip_grad_value_"):
            if getattr(nn_utils, fn, None) is not None:
                self._patch(nn_utils, fn, self._timed(f"torch.nn.utils.{fn}", is_op=False))

    def _install_grad_scaler(self) -> None:
        """``GradScaler.step`` that skips ``optimizer.step()`` (non-finite
        gradients) still ends the iteration's automatic step, as the
        optimizer step would have: without it two iterations merge into one
        step. Counted as ``optimizer_step_skipped``."""
        amp = getattr(torch, "amp", None)
        scaler_cls = getattr(amp, "GradScaler", None) if amp is not None else None
        if scaler_cls is None:
            return
        path, session = self._path, self._prof.session

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
                out = original(scaler, optimizer, *args, **kwargs)
                try:
                    state = scaler._per_optimizer_states[id(optimizer)]
                    skipped = bool(scaler.is_enabled()) and sum(
                        float(v) for v in state["found_inf_per_device"].values()) > 0
                except Exception:  # noqa: BLE001 - a GradScaler of another shape: leave it
                    return out
                if skipped:
                    path.optimizer_pre(optimizer, args, kwargs)
                    path.optimizer_post(optimizer, args, kwargs)
                    session.count("optimizer_step_skipped", 1,
                                  f"{type(optimizer).__name__}: GradScaler found non-finite gradients and skipped its step")
                return out

            return step

        self._patch(scaler_cls, "step", make)

    def _timed(
        self, name: str, is_op: bool = True, untimed_in_detail: bool = False
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A patch maker: the call, timed as one range named ``name``
        (``untimed_in_detail``: not while the hook's detail tier records it)."""
        add = self._path.add
        slot = self._path.slot(name, is_op)
        detail = self._detail if untimed_in_detail else [False]
        is_dynamo_compiling = dynamo_compiling_fn()

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def timed(*args: Any, **kwargs: Any) -> Any:
                # Traced by Dynamo: the original (it traces collectives);
                # is_dynamo_compiling() first, so Dynamo never reads detail.
                if is_dynamo_compiling() or detail[0]:
                    return original(*args, **kwargs)
                start = _now_ns()
                try:
                    return original(*args, **kwargs)
                finally:
                    add(slot, start)

            return timed

        return make

    def _install_item(self) -> None:
        """``Tensor.item`` as ``aten::item`` (host_sync), except inside
        ``optimizer.step()``: optimizers read their CPU step counters with
        ``.item()`` once per parameter (AdamW: 27 calls per step of a small
        transformer), which waits for nothing and would only cost time and
        blur the optimizer's own time. The first such call turns on the step
        path's swap: from then on, while an optimizer step runs, PyTorch's
        own method is back on ``torch.Tensor`` (two attribute stores per
        step, cheaper than one wrapper call), so those calls pay nothing;
        an optimizer that never calls ``.item()`` (SGD) never pays for the
        swap. An ``.item()`` inside an optimizer step counts as optimizer
        time on every tier (the detail tier's hook leaves them out too)."""
        path = self._path
        add, slot, in_optimizer = path.add, path.slot("aten::item", True), path.in_optimizer
        detail = self._detail
        is_dynamo_compiling = dynamo_compiling_fn()

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def item(t: Any) -> Any:
                # Traced by Dynamo (torch.Tensor.item(t) with
                # capture_scalar_outputs): the original, nothing else read.
                if is_dynamo_compiling() or detail[0]:
                    return original(t)
                if in_optimizer():
                    # Once per profile (later only with two profiles at once,
                    # where another profile's wrapper was swapped in).
                    if not path.swapping:
                        path.swap_in_optimizer(torch.Tensor, "item", original, item)
                    return original(t)
                start = _now_ns()
                try:
                    return original(t)
                finally:
                    add(slot, start)

            return item

        self._patch(torch.Tensor, "item", make)
        self._undo.append(path.clear_swap)  # undone first: the swap ends before the patch is undone

    def _install_blocking_copies(self) -> None:
        """Copies to the host that wait for the device: ``.cpu()``,
        ``.tolist()``, ``.numpy()`` of a tensor on an accelerator, and
        ``torch.cuda.synchronize()``. A CPU tensor's ``.cpu()`` waits for
        nothing and makes no range."""
        add = self._path.add
        is_dynamo_compiling = dynamo_compiling_fn()
        quiet_frames(on_accelerator)  # called by the wrappers (gpuutil.torch._compile)

        def make(label: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
            slot = self._path.slot(f"## host_sync: {label} ##", True)

            def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
                def method(t: Any, *args: Any, **kwargs: Any) -> Any:
                    # Traced by Dynamo (torch.Tensor.cpu(t)): the original.
                    if is_dynamo_compiling() or not on_accelerator(t):
                        return original(t, *args, **kwargs)
                    start = _now_ns()
                    try:
                        return original(t, *args, **kwargs)
                    finally:
                        add(slot, start)

                return method

            return wrap

        for attr in ("cpu", "tolist", "numpy"):
            self._patch(torch.Tensor, attr, make(f"Tensor.{attr}"))
        self._patch(torch.cuda, "synchronize", self._timed("## host_sync: torch.cuda.synchronize ##"))

    def _install_checkpoint(self) -> None:
        """``torch.save`` on the main thread is a checkpoint write: with
        automatic steps the step path carves it out of the step it would
        open (outside steps, named "checkpoint"). No range of its own: inside
        a marked step it stays the step's ``other`` time."""
        outside_range = self._path.outside_range

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def save(*args: Any, **kwargs: Any) -> Any:
                start = _now_ns()
                try:
                    return original(*args, **kwargs)
                finally:
                    outside_range("checkpoint", start)

            return save

        self._patch(torch, "save", make)

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
        # The outermost backward per thread is one "## backward ##" range
        # (the step path keeps the depth). Traced by Dynamo it is the
        # original (gpuutil.torch._compile).
        enter, exit_ = self._path.backward_enter, self._path.backward_exit
        is_dynamo_compiling = dynamo_compiling_fn()

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def backward(*args: Any, **kwargs: Any) -> Any:
                if is_dynamo_compiling():
                    return original(*args, **kwargs)
                enter()
                try:
                    return original(*args, **kwargs)
                finally:
                    exit_()

            return backward

        self._patch(torch.autograd, "backward", make)

    def _install_forward(self) -> None:
        self._forward = ForwardRanges(self._path)
        self._forward.install()
        self._undo.append(self._forward.uninstall)

    def on_step_end(self, index: int) -> None:
        """Called at step boundaries (forward-class discovery); ``index``:
        the step starting now."""
        if self._forward is not None:
            self._forward.on_step_end(index)

    def steps_until_due(self, index: int) -> int:
        """Boundaries until on_step_end must run again (forward rediscovery)."""
        return self._forward.steps_until_due(index) if self._forward is not None else 1 << 40
