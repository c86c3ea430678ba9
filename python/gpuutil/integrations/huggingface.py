"""Hugging Face ``TrainerCallback``: per-step gpuutil reports from ``Trainer.train``.

::

    trainer = Trainer(model, args, train_dataset=ds, callbacks=[GpuutilTrainerCallback("steps.jsonl")])

The callback opens a ``gpuutil.profile()`` at ``on_train_begin`` and closes
it at ``on_train_end``; steps come from the optimizer step hooks (the
Trainer calls ``optimizer.step`` once per optimizer step, after gradient
accumulation). The Trainer's evaluations and checkpoint saves run after an
optimizer step: ``on_evaluate`` and ``on_save`` tell the profile where each
ended, so they are outside steps (``summary()["outside_steps_breakdown_ns"]``:
evaluation, checkpoint) instead of opening the next step. Each step report goes to the ``sinks``, and in a distributed
job the leader rank's ``gpuutil.cluster/1`` records to their ``on_cluster``.
``callback.prof`` is the Profile.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from transformers import TrainerCallback

import gpuutil
from gpuutil.integrations.sinks import StepHooks, forward_cluster


class GpuutilTrainerCallback(TrainerCallback):
    """Profiles every optimizer step of ``Trainer.train`` with gpuutil."""

    def __init__(
        self,
        output: Optional[str] = None,
        *,
        flops_per_step: Union[float, str, None] = None,
        dtype: str = "bf16",
        sinks: Sequence[Callable[[Dict[str, Any]], None]] = (),
        **profile_options: Any,
    ) -> None:
        """``profile_options`` go to :func:`gpuutil.profile` as they are
        (``hardware_flops_per_step``, ``peak_tflops``, ``report_interval_ms``,
        ``keep_reports``); ``flops_per_step`` may be ``"measure"``."""
        self.profile_options = profile_options
        self.output = output
        self.flops_per_step = flops_per_step
        self.dtype = dtype
        self.sinks: List[Callable[[Dict[str, Any]], None]] = list(sinks)
        self.prof: Optional[gpuutil.Profile] = None

    def _on_step(self, report: Dict[str, Any]) -> None:
        for sink in self.sinks:
            sink(report)

    def _on_cluster(self, record: Dict[str, Any]) -> None:
        forward_cluster(self.sinks, record)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.prof = gpuutil.profile(
            self.output,
            flops_per_step=self.flops_per_step,
            dtype=self.dtype,
            on_step=StepHooks(self._on_step, self._on_cluster),
            **self.profile_options,
        ).start()

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Everything since the optimizer step (or the previous mark) was evaluation.
        if self.prof is not None:
            self.prof._path.mark_outside("evaluation")

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # ... and since then, the checkpoint (model weights, optimizer, RNG state).
        if self.prof is not None:
            self.prof._path.mark_outside("checkpoint")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.prof is not None:
            self.prof.stop()
