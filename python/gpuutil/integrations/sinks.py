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

Each also has ``on_cluster(record)``: on the leader rank of a
``torch.distributed`` job the profile calls it with every changed
``gpuutil.cluster/1`` record, and it logs the record's
:func:`~gpuutil.integrations.metrics.cluster_metrics`. W&B gets them with
``commit=False`` (they join the open step's row, so W&B's step never runs
ahead of gpuutil's); MLflow and TensorBoard at the latest step the view
compared (:func:`~gpuutil.integrations.metrics.cluster_step`).
:class:`StepHooks` and :func:`forward_cluster` let a wrapper (the Lightning
and Hugging Face callbacks) hand the records on to its sinks.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

from gpuutil.integrations.metrics import cluster_metrics, cluster_step, flat_metrics, step_number


def forward_cluster(sinks: Iterable[Any], record: Dict[str, Any]) -> None:
    """Calls ``on_cluster(record)`` on every sink that has one."""
    for sink in sinks:
        on_cluster = getattr(sink, "on_cluster", None)
        if on_cluster is not None:
            on_cluster(record)


class StepHooks:
    """An ``on_step`` callable that also has ``on_cluster``, from two functions
    (a bound method cannot carry an ``on_cluster`` of its own)."""

    def __init__(self, on_step: Callable[[Dict[str, Any]], None],
                 on_cluster: Callable[[Dict[str, Any]], None]) -> None:
        self._on_step = on_step
        self._on_cluster = on_cluster

    def __call__(self, report: Dict[str, Any]) -> None:
        self._on_step(report)

    def on_cluster(self, record: Dict[str, Any]) -> None:
        self._on_cluster(record)


class WandbSink:
    """Logs to a W&B run (default: ``wandb.run``, the active one).

    Never passes ``step=``: W&B drops rows whose step is behind its own
    counter, which happens as soon as the training script calls
    ``wandb.log`` itself. Instead each report is logged with gpuutil's step
    number as the metric ``gpuutil/step``, declared (``define_metric``) as
    the x-axis of every ``gpuutil/*`` chart, as W&B recommends for custom
    steps. ``commit=False`` attaches the metrics to the script's next
    ``wandb.log`` row instead of making rows of their own.
    """

    def __init__(self, run: Any = None, *, commit: bool = True) -> None:
        if run is None:
            import wandb

            run = wandb.run
            if run is None:
                raise RuntimeError("WandbSink: no active wandb run; call wandb.init() first or pass run=")
        self.run = run
        self.commit = commit
        define = getattr(run, "define_metric", None)
        if define is not None:
            define("gpuutil/step")
            define("gpuutil/*", step_metric="gpuutil/step")

    def __call__(self, report: Dict[str, Any]) -> None:
        metrics = flat_metrics(report)
        if metrics:
            metrics["gpuutil/step"] = step_number(report)
            self.run.log(metrics, commit=self.commit)

    def on_cluster(self, record: Dict[str, Any]) -> None:
        metrics = cluster_metrics(record)
        if metrics:
            self.run.log(metrics, commit=False)


class MLflowSink:
    """Logs to MLflow: the active run, or ``client`` + ``run_id``."""

    def __init__(self, client: Any = None, run_id: Optional[str] = None) -> None:
        if (client is None) != (run_id is None):
            raise ValueError("MLflowSink: pass both client and run_id, or neither (active run)")
        self.client = client
        self.run_id = run_id

    def __call__(self, report: Dict[str, Any]) -> None:
        self._log(flat_metrics(report), step_number(report))

    def on_cluster(self, record: Dict[str, Any]) -> None:
        self._log(cluster_metrics(record), cluster_step(record))

    def _log(self, metrics: Dict[str, float], step: int) -> None:
        if not metrics:
            return
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
        self._log(flat_metrics(report), step_number(report))

    def on_cluster(self, record: Dict[str, Any]) -> None:
        self._log(cluster_metrics(record), cluster_step(record))

    def _log(self, metrics: Dict[str, float], step: int) -> None:
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, step)
