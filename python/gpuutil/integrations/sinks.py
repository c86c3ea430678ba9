"""Tracker sinks: callables that log each step report's flat metrics.

Use one as ``gpuutil.profile(on_step=WandbSink(run))`` or in a callback's
``sinks=[...]``. Each imports its tracker only when constructed without an
explicit client, so ``gpuutil.integrations`` never needs any tracker.

* :class:`WandbSink`: ``run.log(metrics, step=step)``.
* :class:`MLflowSink`: ``mlflow.log_metrics(metrics, step=step)`` (or a
  ``MlflowClient`` and run id).
* :class:`TensorBoardSink`: ``writer.add_scalar(tag, value, step)`` with
  hierarchical tags (``gpuutil/host_dataloader_pct``), never ``add_scalars``
  (which would create one event file per key).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from gpuutil.integrations.metrics import flat_metrics, step_number


class WandbSink:
    """Logs to a W&B run (default: ``wandb.run``, the active one)."""

    def __init__(self, run: Any = None) -> None:
        if run is None:
            import wandb

            run = wandb.run
            if run is None:
                raise RuntimeError("WandbSink: no active wandb run; call wandb.init() first or pass run=")
        self.run = run

    def __call__(self, report: Dict[str, Any]) -> None:
        metrics = flat_metrics(report)
        if metrics:
            self.run.log(metrics, step=step_number(report))


class MLflowSink:
    """Logs to MLflow: the active run, or ``client`` + ``run_id``."""

    def __init__(self, client: Any = None, run_id: Optional[str] = None) -> None:
        if (client is None) != (run_id is None):
            raise ValueError("MLflowSink: pass both client and run_id, or neither (active run)")
        self.client = client
        self.run_id = run_id

    def __call__(self, report: Dict[str, Any]) -> None:
        metrics = flat_metrics(report)
        if not metrics:
            return
        step = step_number(report)
        if self.client is not None:
            from mlflow.entities import Metric

            import time

            ts = int(time.time() * 1000)
            self.client.log_batch(self.run_id, metrics=[Metric(k, v, ts, step) for k, v in metrics.items()])
        else:
            import mlflow

            mlflow.log_metrics(metrics, step=step)


class TensorBoardSink:
    """Logs to a TensorBoard ``SummaryWriter`` (torch or tensorboardX API)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def __call__(self, report: Dict[str, Any]) -> None:
        step = step_number(report)
        for tag, value in flat_metrics(report).items():
            self.writer.add_scalar(tag, value, step)
