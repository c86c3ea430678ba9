"""Offline cross-rank analysis at scale: thousands of rank traces, local or
in object storage, analysed one rank per task on a local process pool, a
Dask or a Ray cluster, into one cluster report (docs/distributed.md,
"Offline, at scale"; docs/report-schema.md, "The cluster report").

Each worker imports and analyses one rank's trace and sends back only that
rank's RankStep batch (what a live rank publishes) and a compact summary,
never the trace; the parent feeds the batches to the same ClusterAssembler
as the live view, so its memory does not grow with the traces' sizes.

    import gpuutil
    report = gpuutil.analyze_ranks("s3://bucket/job42/", executor="dask", scheduler="tcp://sched:8786")
    report["summary"]["ranks"], report["summary"]["cluster"], report["findings"]
"""

from __future__ import annotations

from gpuutil import _api
from gpuutil.fanout._errors import FanoutError
from gpuutil.fanout._run import run_fanout

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, Optional, Sequence, Union

__all__ = ["FanoutError", "analyze_ranks"]


def analyze_ranks(
    inputs: Union[str, Sequence[str]],
    *,
    executor: str = "local",
    jobs: Optional[int] = None,
    scheduler: Optional[str] = None,
    address: Optional[str] = None,
    on_error: str = "fail",
    rank_from_name: Optional[str] = None,
    world_size: Optional[int] = None,
    ranks_out: Optional[str] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
    flops_per_step: Optional[float] = None,
    dtype: str = "bf16",
    peak_tflops: Optional[float] = None,
    max_memory: Union[int, str, None] = None,
) -> Dict[str, Any]:
    """Analyse one trace per rank into the cluster report (a dict).

    Args:
        inputs: trace files, directories (their ``*.json``/``*.json.gz``
            files), glob patterns and URLs (``s3://``, ``gs://``,
            ``http(s)://``, anything fsspec reads: the ``fanout`` extra), or
            one of them. Each file's rank is its ``distributedInfo.rank``.
        executor: ``"local"`` (a process pool here), ``"dask"`` or ``"ray"``.
        jobs: local worker processes (default: the CPUs this process may
            use); for ``"local"`` Dask/Ray runtimes, their worker count.
        scheduler: the Dask scheduler's address (``tcp://host:8786``);
            None or ``"local"``: a LocalCluster here.
        address: the Ray cluster's address; None or ``"local"``: a local runtime.
        on_error: ``"fail"`` (default): an unreadable file, a file with no
            rank, a missing rank or a worker that died twice raises
            FanoutError naming it; ``"skip"``: the rank is left out and
            named in ``summary.cluster.missing_ranks`` / ``missing_reasons``.
        rank_from_name: a regular expression whose first group (or whole
            match) in each file's base name is its rank; the traces are
            then not opened to find it.
        world_size: the job's rank count (default: the traces'
            ``distributedInfo.world_size``, or the highest rank + 1).
        ranks_out: also write the per-rank, per-step table to this
            ``.jsonl`` or ``.parquet`` (pyarrow) file.
        storage_options: passed to fsspec for URLs (credentials, endpoint).
        progress: a progress line on stderr; None: when it is a terminal.
        flops_per_step, dtype, peak_tflops, max_memory: as for
            :func:`gpuutil.analyze`, applied to each rank (max_memory per
            worker).

    Returns:
        The cluster report (schema ``gpuutil.report/1``, ``"kind":
        "cluster"``): ``summary.ranks``, ``summary.cluster`` and the
        straggler findings equal what :func:`gpuutil.analyze` gives for
        the same traces; the same bytes on every executor.

    Raises:
        FanoutError: a bad input set (a ValueError; one line naming the
            file or rank). ValueError, TypeError: invalid arguments.
        OSError: ``ranks_out`` cannot be written.
    """
    paths = [inputs] if isinstance(inputs, str) else list(_api._paths(inputs))
    fps = _api._positive("flops_per_step", flops_per_step)
    peak = _api._positive("peak_tflops", peak_tflops)
    if dtype not in _api.DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(_api.DTYPES)}; got {dtype!r}")
    return run_fanout(
        paths, executor=executor, jobs=jobs, scheduler=scheduler, address=address, on_error=on_error,
        rank_from_name=rank_from_name, world_size=world_size, ranks_out=ranks_out,
        storage_options=storage_options, progress=progress, flops_per_step=fps, dtype=dtype,
        peak_tflops=peak, max_memory_bytes=_api._max_memory(max_memory),
    )
