"""The offline fan-out, end to end: expand the inputs, discover each one's
rank, analyse every rank on the executor asked for (one task per rank,
results consumed as they complete), assemble the cluster report. Also
the rule that sends an analysis here rather than to the combined
in-process report (wants_fanout), shared by gpuutil.analyze and the
command line.

Takes analysis options already checked (gpuutil._api checks them, and
gpuutil.fanout.analyze_ranks calls it through that check); checks its
own: executor, jobs, on_error, world_size, ranks_out.
"""

from __future__ import annotations


TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional, Sequence

#: More rank files than this go to the fan-out even without a fan-out option.
COMBINED_MAX_FILES = 8
#: The keyword options only the fan-out takes (gpuutil.analyze routes on them).
FANOUT_OPTIONS = ("executor", "jobs", "scheduler", "address", "on_error", "rank_from_name", "world_size",
                  "ranks_out", "storage_options")
ON_ERROR = ("fail", "skip")


def wants_fanout(paths: Sequence[str], options: Dict[str, Any]) -> bool:
    """Whether these inputs and options are for the fan-out: a URL or a glob
    pattern among the inputs, a fan-out option given (not None), or more
    than COMBINED_MAX_FILES trace files once local directories are listed.
    Otherwise gpuutil.analyze's combined report (unchanged)."""
    import os

    from gpuutil.fanout._inputs import is_trace_name, is_url, needs_fanout

    if any(options.get(k) is not None for k in FANOUT_OPTIONS):
        return True
    count = 0
    for p in paths:
        if p == "-":
            count += 1
            continue
        if needs_fanout(p) and (is_url(p) or not os.path.isdir(p)):
            return True  # a URL or a glob pattern
        if os.path.isdir(p):
            try:
                count += sum(1 for e in os.listdir(p) if is_trace_name(e))
            except OSError:
                count += 1  # the combined path names the problem
        else:
            count += 1
    return count > COMBINED_MAX_FILES


def _check(executor: str, jobs: Optional[int], on_error: str, world_size: Optional[int]) -> None:
    from gpuutil.fanout._executors import EXECUTORS

    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}; got {on_error!r}")
    if world_size is not None and (isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1):
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")


def run_fanout(
    inputs: Sequence[str],
    *,
    executor: Optional[str] = None,
    jobs: Optional[int] = None,
    scheduler: Optional[str] = None,
    address: Optional[str] = None,
    on_error: Optional[str] = None,
    rank_from_name: Optional[str] = None,
    world_size: Optional[int] = None,
    ranks_out: Optional[str] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
    flops_per_step: Optional[float] = None,
    dtype: str = "bf16",
    peak_tflops: Optional[float] = None,
    max_memory_bytes: Optional[int] = None,
) -> Dict[str, Any]:
    """The cluster report of the traces named by `inputs` (see gpuutil.fanout.analyze_ranks)."""
    from gpuutil.fanout import _assemble, _discover, _executors, _inputs, _progress, _ranks_out

    executor = executor or "local"
    on_error = on_error or "fail"
    _check(executor, jobs, on_error, world_size)
    if ranks_out is not None:
        _ranks_out.ranks_out_format(ranks_out)  # before the work: a bad name or a missing pyarrow fails now
    names = _inputs.expand_inputs(list(inputs), storage_options)
    found = _discover.discover(names, storage_options, rank_from_name)
    plan = _discover.plan_ranks(found, on_error, world_size)
    builder = _assemble.ClusterBuilder(plan.world_size, plan.skipped, len(names), per_step=ranks_out is not None)
    base = {"flops_per_step": flops_per_step, "dtype": dtype, "peak_tflops": peak_tflops,
            "max_memory_bytes": max_memory_bytes, "storage_options": storage_options or {}}
    tasks: List[Any] = [(rank, it.name, dict(base, rank=rank)) for rank, it in sorted(plan.by_rank.items())]
    bar = _progress.Progress(len(tasks), enabled=progress)

    def on_result(task: Any, result: Dict[str, Any]) -> None:
        bar.update(int(result.get("bytes_read") or 0))
        builder.add(task[0], task[1], result, on_error)

    try:
        _executors.run(tasks, on_result, executor, jobs, scheduler, address)
    finally:
        bar.close()
    report = builder.finish()
    if ranks_out is not None:
        try:
            _ranks_out.write_ranks_out(builder.rows or [], ranks_out)
        except OSError as e:
            raise OSError(f"cannot write {ranks_out}: {e.strerror or e}") from None
    return report
