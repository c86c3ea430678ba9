"""Integrations with training frameworks and experiment trackers.

Each lives in its own module and imports its framework only when used:

* :mod:`gpuutil.integrations.metrics`     - ``flat_metrics(report)``, the one
  flattening of a step report into ``{"gpuutil/...": float}`` every sink logs;
* :mod:`gpuutil.integrations.sinks`       - ``WandbSink`` (``run.log``),
  ``MLflowSink`` (``log_metrics``), ``TensorBoardSink`` (``add_scalar``);
* :mod:`gpuutil.integrations.lightning`   - ``GpuutilCallback`` for Lightning;
* :mod:`gpuutil.integrations.huggingface` - ``GpuutilTrainerCallback`` for the
  Hugging Face ``Trainer``.

A sink is any callable taking a step report dict: pass it as
``gpuutil.profile(on_step=sink)`` or to a callback's ``sinks=[...]``.
"""

from gpuutil.integrations.metrics import flat_metrics

__all__ = ["flat_metrics"]
