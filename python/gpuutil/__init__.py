"""gpuutil: step-level GPU utilization accounting for PyTorch training.

Where every nanosecond of each training step went on each GPU (compute,
communication, memory, and idle split by cause), and why the GPU sat idle.

Public API (importing gpuutil never requires torch)::

    import gpuutil
    report = gpuutil.analyze("trace.json.gz")          # dict, schema gpuutil.report/1
    report = gpuutil.analyze(["rank0.json.gz", "rank1.json.gz"], flops_per_step=3.1e12)

    with gpuutil.profile(output="steps.jsonl") as prof:   # live, per step
        for batch in loader:
            with prof.step():
                train_step(batch)
    print(gpuutil.format(prof.summary()))               # the text a person reads

The report's fields are documented in docs/report-schema.md.
"""

from gpuutil._api import (
    DIAGNOSTICS,
    DTYPES,
    REPORT_SCHEMA,
    TraceError,
    __version__,
    analyze,
    analyze_json,
)
from gpuutil._format import format  # noqa: A004 - gpuutil.format(report | summary | cluster record)
from gpuutil._profile import Profile, profile, register_collector

try:  # live CUPTI collector; gpuutil stays usable (host-only) without it
    from gpuutil import _live  # noqa: F401
except ImportError:  # pragma: no cover - a build without live_bindings
    pass


def _torch_collector(prof: Profile):  # type: ignore[no-untyped-def]
    # The PyTorch hook attaches only when the program already imported torch:
    # `import gpuutil` itself never imports it.
    import sys

    if "torch" not in sys.modules:
        return None
    from gpuutil.torch import TorchCollector

    return TorchCollector(prof)


def _cluster_collector(prof: Profile):  # type: ignore[no-untyped-def]
    # The cross-rank view needs torch.distributed; like the PyTorch hook it
    # attaches only when the program imported torch (docs/distributed.md).
    import sys

    if "torch" not in sys.modules or not prof.cluster_options["enabled"]:
        return None
    from gpuutil.torch._cluster import ClusterCollector

    o = prof.cluster_options
    return ClusterCollector(prof, interval_ms=o["interval_ms"], timeout_s=o["timeout_s"], leader=o["leader"])


register_collector(_torch_collector)
register_collector(_cluster_collector)

__all__ = [
    "DIAGNOSTICS",
    "DTYPES",
    "REPORT_SCHEMA",
    "TraceError",
    "__version__",
    "analyze",
    "analyze_json",
    "format",
    "Profile",
    "profile",
    "register_collector",
]
