"""Where the ranks are analysed: a local process pool (the default), a Dask
cluster (``distributed``) or a Ray cluster, each shipping only a task's
file name and options dict (gpuutil.fanout._worker.analyze_one) and
handing each result to ``on_result`` as soon as it completes, so the parent
holds at most the results in flight.

The local pool starts workers with forkserver (spawn where there is none),
never fork (the parent may run threads); it keeps ``jobs`` tasks in flight
and replaces its workers every RECYCLE_TASKS_PER_WORKER tasks each, so a
worker's memory cannot creep. A worker that dies (killed, out of memory)
breaks the pool: the ranks it may have been analysing are retried once,
one at a time in a fresh pool; a rank whose worker dies again is the
culprit, reported as ``worker died`` (a run failure, or a skipped rank).
Dask retries a task whose worker died on another worker (its
``allowed-failures``), then reports KilledWorker; Ray retries once.
"""

from __future__ import annotations

import os
import uuid

from gpuutil.fanout._errors import FanoutError, one_line
from gpuutil.fanout._worker import analyze_one

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

    Task = Tuple[int, str, Dict[str, Any]]  # (rank, name, options)
    OnResult = Callable[[Task, Dict[str, Any]], None]

#: Each local worker is replaced after this many ranks (bounds creeping memory).
RECYCLE_TASKS_PER_WORKER = 64
EXECUTORS = ("local", "dask", "ray")


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _died(task: Task, how: str) -> Dict[str, Any]:
    rank, name, _ = task
    return {"rank": rank, "name": name, "error": f"the worker analysing rank {rank} ({name}) died: {how}"}


def _mp_context() -> Any:
    import multiprocessing

    try:
        ctx = multiprocessing.get_context("forkserver")
        # Workers forked from a server that has the core loaded start in milliseconds.
        ctx.set_forkserver_preload(["gpuutil._core", "gpuutil.fanout._worker"])
        return ctx
    except ValueError:
        return multiprocessing.get_context("spawn")


def run_local(tasks: Sequence[Task], on_result: OnResult, jobs: int) -> None:
    """Runs every task in a local process pool (see the module's paragraph)."""
    from collections import deque
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = _mp_context()
    jobs = max(1, min(jobs, len(tasks)))
    queue = deque(tasks)
    alone: deque = deque()  # tasks a broken pool may have been running: retried one at a time
    retried = set()
    recycle_after = RECYCLE_TASKS_PER_WORKER * jobs
    pool: Optional[ProcessPoolExecutor] = None
    done_in_pool = 0
    inflight: Dict[Any, Task] = {}
    try:
        while queue or alone or inflight:
            if pool is None:
                pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)
                done_in_pool = 0
            if alone:
                if not inflight:
                    task = alone.popleft()
                    inflight[pool.submit(analyze_one, task[1], task[2])] = task
            elif done_in_pool + len(inflight) < recycle_after:
                while queue and len(inflight) < jobs:
                    task = queue.popleft()
                    inflight[pool.submit(analyze_one, task[1], task[2])] = task
            if not inflight:  # the pool has done its share: a fresh one
                pool.shutdown(wait=True)
                pool = None
                continue
            finished, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
            broken: List[Task] = []
            for fut in finished:
                task = inflight.pop(fut)
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    broken.append(task)
                    continue
                done_in_pool += 1
                on_result(task, result)
                del result
            if broken:
                # Every task in flight fails with the pool: collect them all.
                for fut, task in list(inflight.items()):
                    try:
                        result = fut.result()
                    except BrokenProcessPool:
                        broken.append(task)
                    else:
                        on_result(task, result)
                inflight.clear()
                pool.shutdown(wait=True, cancel_futures=True)
                pool = None
                for task in sorted(broken, key=lambda t: t[0]):
                    if task[0] in retried:  # died alone, twice: this rank kills its worker
                        on_result(task, _died(task, "its process exited abnormally (killed, or out of memory), "
                                                    "twice"))
                    else:
                        retried.add(task[0])
                        alone.append(task)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def run_dask(tasks: Sequence[Task], on_result: OnResult, scheduler: Optional[str], jobs: int) -> None:
    """Runs every task on a Dask cluster: `scheduler` is its address
    (tcp://host:8786), or None / "local" for a LocalCluster of `jobs`
    worker processes here."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise FanoutError("--executor dask needs distributed: pip install 'gpuutil[dask]'") from None
    cluster = None
    try:
        if scheduler in (None, "", "local"):
            cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout=30)
    except OSError as e:
        raise FanoutError(f"cannot reach the Dask scheduler {scheduler}: {one_line(e)}") from None
    token = uuid.uuid4().hex[:8]
    try:
        by_key: Dict[str, Task] = {}
        futures = []
        for task in tasks:
            key = f"gpuutil-rank-{task[0]}-{token}"
            by_key[key] = task
            futures.append(client.submit(analyze_one, task[1], task[2], key=key, pure=False, retries=1))
        completed = as_completed(futures)
        del futures  # as_completed holds each until it is yielded
        for fut in completed:
            task = by_key.pop(fut.key)
            try:
                result = fut.result()
            except Exception as e:  # noqa: BLE001 - KilledWorker, a lost scheduler: named by rank
                result = _died(task, f"{type(e).__name__}: {one_line(e)}")
            fut.release()
            on_result(task, result)
            del result
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_ray(tasks: Sequence[Task], on_result: OnResult, address: Optional[str], jobs: int) -> None:
    """Runs every task on a Ray cluster: `address` is its address (ray://...
    or host:port), or None / "local" for a local runtime of `jobs` CPUs."""
    try:
        import ray
    except ImportError:
        raise FanoutError("--executor ray needs ray: pip install 'gpuutil[ray]'") from None
    started = False
    if not ray.is_initialized():
        try:
            if address in (None, "", "local"):
                ray.init(num_cpus=max(1, jobs), include_dashboard=False, log_to_driver=False,
                         object_store_memory=128 << 20)
            else:
                ray.init(address=address, log_to_driver=False)
        except Exception as e:  # noqa: BLE001 - ConnectionError, a version mismatch: one line
            raise FanoutError(f"cannot start or reach Ray at {address or 'local'}: {one_line(e)}") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=1)(analyze_one)
        pending: Dict[Any, Task] = {remote.remote(t[1], t[2]): t for t in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - WorkerCrashedError after its retry: named by rank
                    result = _died(task, f"{type(e).__name__}: {one_line(e)}")
                on_result(task, result)
                del result
    finally:
        if started:
            ray.shutdown()


def run(tasks: Sequence[Task], on_result: OnResult, executor: str = "local", jobs: Optional[int] = None,
        scheduler: Optional[str] = None, address: Optional[str] = None) -> None:
    """Runs every task on the executor named; each result goes to on_result."""
    n = jobs or default_jobs()
    if executor == "local":
        run_local(tasks, on_result, n)
    elif executor == "dask":
        run_dask(tasks, on_result, scheduler, jobs or 2)
    elif executor == "ray":
        run_ray(tasks, on_result, address, n)
    else:
        raise FanoutError(f"unknown executor {executor!r}; one of {', '.join(EXECUTORS)}")
