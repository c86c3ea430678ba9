"""The public Python API over the C++ core (gpuutil._core).

analyze() turns one or more PyTorch profiler / Kineto trace files (one per
rank) into the gpuutil.report/1 report as a plain dict; analyze_json() gives
the same report as the exact JSON text the C++ exporter wrote. Argument
checking lives here so that mistakes fail with a clear Python error before
any C++ runs; the C++ side releases the GIL while it works.
"""

from __future__ import annotations

import math
import os

from gpuutil import _core

TYPE_CHECKING = False  # typing is not imported at run time (start-up time)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

    PathLike = Union[str, "os.PathLike[str]"]

#: The JSON report schema id this build writes, e.g. ``"gpuutil.report/1"``.
REPORT_SCHEMA: str = _core.report_schema()

#: The gpuutil version (the C++ core's version).
__version__: str = _core.version()

#: Datatypes with a peak FLOP/s table, accepted by ``dtype=``.
DTYPES: Tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")

#: Every diagnostic counter a report can carry: dicts with name, severity and
#: description, in registry order.
DIAGNOSTICS: Tuple[Dict[str, str], ...] = tuple(_core.diagnostics_registry())

TraceError = _core.TraceError
TraceError.__doc__ = (
    "A trace file could not be read at all (missing, broken gzip, invalid JSON).\n\n"
    "Subclass of ValueError. The message is one line: 'cannot read PATH: reason'."
)


def _paths(path_or_paths: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    if isinstance(path_or_paths, (str, bytes, os.PathLike)):
        items: Sequence[Any] = [path_or_paths]
    elif isinstance(path_or_paths, (list, tuple)):
        items = path_or_paths
    else:
        raise TypeError(
            "path_or_paths must be a path (str or os.PathLike) or a list of paths, "
            f"not {type(path_or_paths).__name__}"
        )
    if not items:
        raise ValueError("no trace paths given")
    out = []
    for p in items:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise TypeError(f"a trace path must be str or os.PathLike, not {type(p).__name__}")
        out.append(os.fsdecode(os.fspath(p)))
    return out


#: The import's default memory budget in bytes (``max_memory=None``); see
#: docs/trace-import.md, "Memory budget".
DEFAULT_MAX_MEMORY: int = _core.DEFAULT_MAX_MEMORY_BYTES


def parse_memory_size(text: str) -> int:
    """Bytes of a memory size as people write it: ``"512M"``, ``"1.5G"``,
    ``"4GiB"``, ``"1000000"`` (K, M, G, T are powers of 1024), or
    ``"unlimited"`` (0: no budget). Raises ValueError (one line)."""
    return _core.parse_memory_size(text)


def _max_memory(value: Union[int, str, None]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, str):
        return parse_memory_size(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_memory must be bytes (int), a size such as '2G', or None, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"max_memory must be a non-negative number of bytes (0: no budget), got {value!r}")
    return value


def _positive(name: str, value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number or None, not {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return v


def set_communication_kernels(patterns: Sequence[str]) -> None:
    """Names the program's own communication kernels, for every analysis in
    this process (live and offline).

    ``patterns`` are case-insensitive substrings of kernel names, added to
    the built-in families (NCCL/RCCL/MSCCL/NVSHMEM, DeepEP and other
    expert-parallel dispatch/combine, symmetric memory, custom all-reduce,
    kernels named for a collective); kernels launched inside a c10d/NCCL
    range are communication whatever their name. Replaces the environment
    variable ``GPUUTIL_COMM_KERNELS`` (comma-separated, read once when
    nothing was set). Set it before profiling starts: a running collector
    keeps the class of names it has seen. docs/accounting.md, "Communication".
    """
    if isinstance(patterns, str):
        raise TypeError("patterns must be a sequence of strings, not one string")
    items = list(patterns)
    for p in items:
        if not isinstance(p, str):
            raise TypeError(f"each pattern must be a str, not {type(p).__name__}")
    _core.set_communication_kernel_patterns(items)


def analyze_json(
    path_or_paths: Union[PathLike, Sequence[PathLike]],
    *,
    flops_per_step: Optional[float] = None,
    dtype: str = "bf16",
    peak_tflops: Optional[float] = None,
    indent: int = -1,
    max_memory: Union[int, str, None] = None,
    progress: bool = False,
) -> str:
    """Analyse trace file(s) and return the report as JSON text.

    Same arguments as :func:`analyze`, plus ``indent``: a negative value
    (default) gives one compact line (a JSON Lines record), otherwise the
    document is pretty-printed with that many spaces.
    """
    paths = _paths(path_or_paths)
    fps = _positive("flops_per_step", flops_per_step)
    peak = _positive("peak_tflops", peak_tflops)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if isinstance(indent, bool) or not isinstance(indent, int):
        raise TypeError(f"indent must be an int, not {type(indent).__name__}")
    return _core.analyze_files(paths, fps, dtype, peak, indent, _max_memory(max_memory), bool(progress))


def analyze(
    path_or_paths: Union[PathLike, Sequence[PathLike]],
    *,
    flops_per_step: Optional[float] = None,
    dtype: str = "bf16",
    peak_tflops: Optional[float] = None,
    max_memory: Union[int, str, None] = None,
    progress: bool = False,
    **fanout: Any,
) -> Dict[str, Any]:
    """Analyse PyTorch profiler / Kineto trace file(s) into a step report.

    Args:
        path_or_paths: a trace file (``.json`` or ``.json.gz``), or a list of
            them, one per rank of a distributed job. Ranks are taken from the
            traces, or from the list order when the traces do not say. A
            FIFO or ``/dev/fd/N`` path is streamed; ``"-"`` reads standard
            input (named ``<stdin>``; a file named ``-`` is ``"./-"``).
        flops_per_step: FLOPs one step performs on one rank (for MFU). When
            None, FLOPs the trace reports are used if present.
        dtype: datatype selecting the peak FLOP/s for MFU; one of
            :data:`DTYPES`.
        peak_tflops: peak dense TFLOP/s per device, overriding the built-in
            table (needed for devices the table does not know).
        max_memory: the import's memory budget, shared by all the files:
            bytes, or a size such as ``"2G"``; ``"unlimited"`` or 0 for
            none; None: :data:`DEFAULT_MAX_MEMORY` (768 MiB). An import
            that would exceed it raises TraceError naming the budget.
        progress: print a line on stderr while waiting for an input (a
            FIFO's writer, standard input's first byte).
        **fanout: the options of :func:`gpuutil.analyze_ranks` (executor,
            jobs, scheduler, address, on_error, rank_from_name,
            world_size, ranks_out, storage_options). When one is given, an
            input is a URL or a glob pattern, or there are more than 8
            trace files, the ranks are analysed by the fan-out and the
            result is its cluster report (docs/distributed.md, "Offline, at
            scale").

    Returns:
        The report as a dict following schema :data:`REPORT_SCHEMA`
        (docs/report-schema.md): per step and device, ``breakdown_ns`` sums
        exactly to ``wall_ns``; undefined values are None.

    Raises:
        TraceError: a file cannot be read at all (a ValueError subclass).
        ValueError, TypeError: invalid arguments.

    The GIL is released while the C++ core works, so other Python threads
    keep running.
    """
    from gpuutil.fanout._run import FANOUT_OPTIONS, run_fanout, wants_fanout

    unknown = sorted(set(fanout) - set(FANOUT_OPTIONS))
    if unknown:
        raise TypeError(f"analyze() got an unexpected keyword argument {unknown[0]!r}")
    paths = _paths(path_or_paths)
    if wants_fanout(paths, fanout):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
        return run_fanout(paths, progress=bool(progress), flops_per_step=_positive("flops_per_step", flops_per_step),
                          dtype=dtype, peak_tflops=_positive("peak_tflops", peak_tflops),
                          max_memory_bytes=_max_memory(max_memory), **fanout)
    text = analyze_json(
        path_or_paths, flops_per_step=flops_per_step, dtype=dtype, peak_tflops=peak_tflops,
        max_memory=max_memory, progress=progress,
    )
    import json

    return json.loads(text)
