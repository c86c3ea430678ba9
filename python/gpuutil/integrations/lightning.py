"""Lightning ``Callback``: per-step gpuutil reports from ``Trainer.fit``.

::

    trainer = lightning.Trainer(callbacks=[GpuutilCallback(output="steps.jsonl")])

The callback opens a ``gpuutil.profile()`` at ``on_train_start`` and closes
it at ``on_train_end``. Steps come from the optimizer step hooks (Lightning
calls ``optimizer.step``), so each step includes its batch fetch. Validation
loops (``on_validation_start`` to ``on_validation_end``) and checkpoint
writes (``trainer.save_checkpoint``, which ``ModelCheckpoint`` calls) run
between optimizer steps: they are outside steps
(``summary()["outside_steps_breakdown_ns"]``), not part of the next step.
Each step's flat metrics go to the trainer's loggers (``log_to_loggers``)
and to any extra ``sinks``. In a distributed job the leader rank's cross-rank view
(``gpuutil.cluster/1`` records) goes to the sinks' ``on_cluster`` and, as
``cluster_metrics``, to the loggers. ``callback.prof`` is the Profile (its
``reports`` and ``summary()``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import lightning.pytorch as pl

import gpuutil
from gpuutil import _core
from gpuutil.integrations.metrics import cluster_metrics, cluster_step, flat_metrics, step_number
from gpuutil.integrations.sinks import StepHooks, forward_cluster


class GpuutilCallback(pl.Callback):
    """Profiles every training step of ``Trainer.fit`` with gpuutil."""

    def __init__(
        self,
        output: Optional[str] = None,
        *,
        flops_per_step: Union[float, str, None] = None,
        dtype: str = "bf16",
        sinks: Sequence[Callable[[Dict[str, Any]], None]] = (),
        log_to_loggers: bool = True,
        **profile_options: Any,
    ) -> None:
        """``profile_options`` go to :func:`gpuutil.profile` as they are
        (``hardware_flops_per_step``, ``peak_tflops``, ``report_interval_ms``,
        ``keep_reports``); ``flops_per_step`` may be ``"measure"``."""
        super().__init__()
        self.profile_options = profile_options
        self.output = output
        self.flops_per_step = flops_per_step
        self.dtype = dtype
        self.sinks: List[Callable[[Dict[str, Any]], None]] = list(sinks)
        self.log_to_loggers = log_to_loggers
        self.prof: Optional[gpuutil.Profile] = None
        self._trainer: Any = None
        self._saving: Any = None  # the trainer's own save_checkpoint while it is wrapped
        self._validation_start: Optional[int] = None

    def _on_step(self, report: Dict[str, Any]) -> None:
        for sink in self.sinks:
            sink(report)
        self._log(flat_metrics(report), step_number(report))

    def _on_cluster(self, record: Dict[str, Any]) -> None:
        forward_cluster(self.sinks, record)
        self._log(cluster_metrics(record), cluster_step(record))

    def _log(self, metrics: Dict[str, float], step: int) -> None:
        trainer = self._trainer
        if self.log_to_loggers and trainer is not None and trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=step)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._trainer = trainer
        self.prof = gpuutil.profile(
            self.output,
            flops_per_step=self.flops_per_step,
            dtype=self.dtype,
            on_step=StepHooks(self._on_step, self._on_cluster),
            **self.profile_options,
        ).start()

        self._wrap_save_checkpoint(trainer)

    def _wrap_save_checkpoint(self, trainer: Any) -> None:
        """``trainer.save_checkpoint`` (on this trainer only) tells the
        profile it wrote a checkpoint: serialising and writing the file."""
        prof = self.prof
        original = getattr(trainer, "save_checkpoint", None)
        if not callable(original):  # a trainer without one (or a stand-in): nothing to tell
            return
        now_ns = _core.now_ns

        def save_checkpoint(*args: Any, **kwargs: Any) -> Any:
            start = now_ns()
            try:
                return original(*args, **kwargs)
            finally:
                prof._path.outside_range("checkpoint", start)

        trainer.save_checkpoint = save_checkpoint
        self._saving = save_checkpoint

    def _unwrap_save_checkpoint(self, trainer: Any) -> None:
        if self._saving is not None and trainer.__dict__.get("save_checkpoint") is self._saving:
            del trainer.save_checkpoint
        self._saving = None

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._validation_start = _core.now_ns()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        # The validation loop, as one piece of evaluation (the sanity check
        # runs before the profile starts).
        if self.prof is not None and self._validation_start is not None:
            self.prof._path.outside_range("evaluation", self._validation_start)
        self._validation_start = None

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._unwrap_save_checkpoint(trainer)
        if self.prof is not None:
            self.prof.stop()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._unwrap_save_checkpoint(trainer)
        if self.prof is not None:
            self.prof.stop()
