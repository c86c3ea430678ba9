"""PyTorch integration for gpuutil (optional: imported only when torch is).

``gpuutil.profile()`` attaches :class:`TorchCollector` automatically when the
program has imported torch, so a training loop needs no other change:

* PyTorch's own ranges become categorised host ranges (DataLoader waits,
  optimizer steps, ``.item()`` syncs, backward, forward), which gives every
  step report a per-thread host breakdown (``steps[].host``);
* when the user marks no steps, step boundaries come from optimizer step
  hooks (``report["sources"][0]["steps_source"] == "optimizer_step"``).

The ranges come from gpuutil's LibTorch RecordFunction hook when it is built
for the installed torch (``python -m gpuutil.torch.build``; bootstrap does
it), else from Python-level hooks, and then every report carries the
``torch_hook_fallback`` diagnostic saying why. See docs/pytorch.md.
"""

from gpuutil.torch._collector import TorchCollector

__all__ = ["TorchCollector"]
