"""gpuutil: step-level GPU utilization accounting for PyTorch training.

Where every nanosecond of each training step went on each GPU (compute,
communication, memory, and idle split by cause), and why the GPU sat idle.

Public API (importing gpuutil never requires torch)::

    import gpuutil
    report = gpuutil.analyze("trace.json.gz")          # dict, schema gpuutil.report/1
    report = gpuutil.analyze(["rank0.json.gz", "rank1.json.gz"], flops_per_step=3.1e12)
    report = gpuutil.analyze_ranks("s3://bucket/job/", executor="dask")  # thousands of ranks

    with gpuutil.profile(output="steps.jsonl") as prof:   # live, per step
        for batch in loader:
            with prof.step():
                train_step(batch)
    print(gpuutil.format(prof.summary()))               # the text a person reads

The report's fields are documented in docs/report-schema.md.

The names below are loaded on first use (PEP 562), so ``import gpuutil``
costs almost nothing and the command line starts fast; ``import gpuutil``
still claims NVTX injection at once (gpuutil._nvtx_env).
"""

from gpuutil._nvtx_env import claim_nvtx_injection as _claim_nvtx_injection

_claim_nvtx_injection()

#: public name -> the submodule that defines it
_LAZY = {
    "DIAGNOSTICS": "_api",
    "DTYPES": "_api",
    "REPORT_SCHEMA": "_api",
    "TraceError": "_api",
    "__version__": "_api",
    "analyze": "_api",
    "analyze_json": "_api",
    "analyze_ranks": "fanout",
    "format": "_format",
    "Profile": "_profile",
    "profile": "_profile",
    "register_collector": "_collectors",
    "set_communication_kernels": "_api",
}

__all__ = [
    "DIAGNOSTICS",
    "DTYPES",
    "REPORT_SCHEMA",
    "TraceError",
    "__version__",
    "analyze",
    "analyze_json",
    "analyze_ranks",
    "format",
    "Profile",
    "profile",
    "register_collector",
    "set_communication_kernels",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    import importlib

    module = _LAZY.get(name)
    if module is None:
        # A submodule not imported yet (gpuutil._core, gpuutil.export, ...),
        # as the package's eager imports used to make them attributes.
        try:
            return importlib.import_module(f"gpuutil.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"gpuutil.{name}":
                raise
            raise AttributeError(f"module 'gpuutil' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"gpuutil.{module}"), name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> "list[str]":
    return sorted(set(globals()) | set(__all__))
