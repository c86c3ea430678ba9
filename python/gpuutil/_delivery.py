"""Report delivery of a live profile: report batches (``_collect``: the
collectors' data complete up to a time, the finished steps analysed; the
report lock a SIGTERM flush may interrupt, ``_reporting``), ``flush()``,
``prof.reports`` (the most recent
step reports, each kept as its JSON line until first read), ``prof.summary()``
(the C++ run totals with the cross-rank view), and the ``on_step`` sinks
(called in step order; one that raises is counted, never raised into the
training loop). The state they use is the Profile's (gpuutil._profile).
"""

from __future__ import annotations

import collections
import contextlib
import json
import threading
import warnings
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Union

from gpuutil import _core, _merge


class ReportDelivery:
    """The report-delivery methods of Profile (a mixin: Profile holds the state)."""

    def _collect(self, now: Optional[int] = None) -> None:
        """Reports the finished steps whose data is complete. ``now``: the
        boundary that triggered it (the collectors say up to when their data
        is complete); None keeps what flush() worked out."""
        self._path.unreported = False
        for c in self._collectors:
            before = getattr(c, "before_report", None)
            if before is not None:
                before(self._handle)
        if now is not None:
            complete = now
            for c in self._collectors:
                until = c.complete_until_ns()
                if until is not None and until < complete:
                    complete = until
            self._complete_ns = complete
            if self._background:
                # The worker analyses off this thread; what it finished
                # since the last batch is delivered now.
                self._deliver(self._session.report_async(complete))
                self._after_report()
                return
        self._deliver(self._session.collect(self._complete_ns))
        self._after_report()

    def _after_report(self, final: bool = False) -> None:
        for c in self._collectors:
            after = getattr(c, "after_report", None)
            if after is not None:
                try:
                    after(self._handle, final)
                except Exception as e:  # noqa: BLE001 - never into the training loop
                    self._session.count("collector_failed", 1, f"{c.name}: {type(e).__name__}: {e}")
        if self._running:
            self._rearm()  # e.g. a finding asked for a detail step

    def _check_owner(self) -> None:
        if self._forked:
            raise RuntimeError(
                "this profile belongs to the parent process: a forked child cannot read it; start a "
                "gpuutil.profile() in the child to profile the child"
            )

    def flush(self) -> None:
        """Analyses and reports every finished step now (to ``prof.reports``,
        ``on_step`` and the JSON Lines file), after waiting (bounded) for
        the device records of the work launched in them. Reading
        ``prof.reports`` or ``prof.summary()`` does this by itself."""
        self._check_owner()
        with self._reporting():
            self._flush()

    def _flush(self, force: bool = False) -> None:
        """flush() under the report lock; ``force``: also when no step was
        closed since the last batch (the worker may still hold one)."""
        if self._path.unreported or force:
            now = _core.now_ns()
            self._path.mark_reported(now)
            complete = now
            for c in self._collectors:
                wait = getattr(c, "wait_complete", None)
                until = wait(now) if wait is not None else c.complete_until_ns()
                if until is not None and until < complete:
                    complete = until
            self._complete_ns = max(self._complete_ns, complete)
            self._collect()

    @contextlib.contextmanager
    def _reporting(self) -> Iterator[None]:
        """Holds the report lock around a report batch, a flush or stop. A
        SIGTERM flush that arrives inside one on the same thread
        (flush_finished) is run as it ends. Nested on one thread (an
        ``on_step`` sink that reads ``prof.reports``) it holds nothing more."""
        me = threading.get_ident()
        if self._report_owner == me:
            yield
            return
        with self._report_lock:
            self._report_owner = me
            try:
                yield
                while self._flush_pending and self._running:
                    self._flush_pending = False
                    self._flush(force=True)
            finally:
                self._report_owner = None

    def flush_finished(self, timeout_s: float = 10.0) -> None:
        """Writes every finished step now (the JSON Lines file, ``prof.reports``,
        ``on_step``) and goes on profiling: gpuutil's SIGTERM handler calls
        it, so that a SIGKILL after a scheduler's grace period loses no step
        finished before the SIGTERM. Safe from a signal handler: when the
        signal interrupted a report batch on this thread, the flush runs as
        that batch ends; one on another thread is waited for (at most
        ``timeout_s``)."""
        if not self._running or self._forked:
            return
        if self._report_owner == threading.get_ident():
            self._flush_pending = True
            return
        if not self._report_lock.acquire(timeout=timeout_s):
            return
        try:
            self._report_owner = threading.get_ident()
            if self._running:
                self._flush(force=True)
        finally:
            self._report_owner = None
            self._report_lock.release()

    def cluster_view(self) -> Optional[Dict[str, Any]]:
        """The newest cross-rank view on the leader rank ({"ranks", "cluster",
        "findings"}; docs/distributed.md), else None."""
        for c in self._collectors:
            view = getattr(c, "view", None)
            if view is not None:
                v = view()
                if v is not None:
                    return v
        return None

    # -- output --------------------------------------------------------
    @property
    def gpu_collection_off(self) -> List[str]:
        """Why GPU activity is not collected (empty when it is)."""
        return list(self._off_reasons)

    def summary(self) -> Dict[str, Any]:
        """Run totals over every reported step (not only the kept ones)."""
        self.flush()
        totals = json.loads(self._session.run_totals_json())
        cluster = self.cluster_view()
        # The run's findings (C++: the rules over the run's totals), with the
        # cross-rank ones ranked among them as `gpuutil analyze` of the
        # run's JSONL ranks them (_merge.rank_findings).
        findings = _merge.rank_findings(totals["findings"], cluster["findings"] if cluster is not None else [])
        out = {
            "steps": totals["steps"],
            "steps_wall_ns": totals["steps_wall_ns"],
            "outside_steps_ns": totals["outside_steps_ns"],
            # What the outside time was, where known (automatic steps carve
            # evaluation and checkpoints out; compile warm-up steps; steps
            # reported incomplete, kept out of the run's figures).
            "outside_steps_breakdown_ns": totals["outside_steps_breakdown_ns"],
            "devices": totals["devices"],
            "findings": findings,
            "top_finding": findings[0] if findings else None,
            "gpu_collection_off": self.gpu_collection_off,
            "steps_source": self.steps_source,
            "host": totals["host"],
            "workload": totals["workload"],
            # The input pipelines over the run: settings read from the live
            # DataLoader, batches, waits and a periodic stall (the per-batch
            # waits stay in the step reports' `loaders`).
            "loaders": [{k: v for k, v in loader.items() if k != "batch_waits_ns"} for loader in totals.get("loaders", [])],
        }
        if totals["compile_warmup_steps"]:
            out["compile_warmup_steps"] = totals["compile_warmup_steps"]
        if totals.get("incomplete_steps"):
            out["incomplete_steps"] = totals["incomplete_steps"]
        if self._path.optimizers_per_iteration:
            # Several optimizers per iteration (a GAN): one automatic step per iteration.
            out["optimizers_per_iteration"] = self._path.optimizers_per_iteration
        if cluster is not None:
            out["ranks"] = cluster["ranks"]
            out["cluster"] = cluster["cluster"]
        if self._sink_failures:
            out["on_step_failed"] = {"count": self._sink_failures, "example": self._sink_failure_example}
        written = self._session.output_status()
        if written["lines_lost"]:
            # Steps the JSON Lines file lacks (a full disk): prof.reports and
            # on_step still had them; the file never holds a partial line.
            out["sink_write_failed"] = {"count": written["lines_lost"], "path": written["path"],
                                        "example": written["last_error"]}
        return out

    @property
    def reports(self) -> ReportList:
        """The most recent step reports (at most ``keep_reports``), oldest
        first, as a list of dicts; every finished step is reported first."""
        self.flush()
        return self._reports.snapshot()

    def _deliver(self, lines: List[str]) -> None:
        if not lines:
            return
        if not self._on_step:
            self._reports.extend_json(lines)
            return
        for line in lines:
            report = json.loads(line)
            self._reports.append(report)
            for sink in self._on_step:
                self._call_sink(sink, report)

    def _call_sink(self, sink: Callable[[Dict[str, Any]], None], arg: Dict[str, Any]) -> None:
        # A tracker that fails must not stop the training loop: counted, with
        # the exception, in the next report (on_step_failed).
        try:
            sink(arg)
        except Exception as e:  # noqa: BLE001 - reported, never raised into training
            name = getattr(sink, "__qualname__", None) or type(sink).__name__
            example = f"{name}: {type(e).__name__}: {e}"
            self._session.count("on_step_failed", 1, example)
            if self._sink_failures == 0:
                warnings.warn(f"gpuutil: an on_step sink raised (training goes on; counted as on_step_failed): "
                              f"{example}", RuntimeWarning, stacklevel=2)
                self._sink_failure_example = example
            self._sink_failures += 1

    def _tell_sinks(self, hook: str) -> None:
        """Calls ``hook(self)`` on every sink that has it (a Prometheus
        exporter learns the job id and when its GPUs are attached)."""
        for sink in self._on_step:
            method = getattr(sink, hook, None)
            if method is not None:
                self._call_sink(method, self)  # type: ignore[arg-type]

    def _emit_cluster(self, record: Dict[str, Any]) -> None:
        """A cluster record to every sink that has ``on_cluster``."""
        for sink in self._on_step:
            on_cluster = getattr(sink, "on_cluster", None)
            if on_cluster is not None:
                self._call_sink(on_cluster, record)


class ReportList(list):  # of report dicts
    """``prof.reports``: a plain ``list`` of report dicts, oldest first (so
    ``json.dumps(prof.reports)`` works), holding at most ``maxlen`` (the
    profile's ``keep_reports``) most recent steps. A snapshot: read
    ``prof.reports`` again for steps reported since."""

    maxlen: int = 0


class ReportStore:
    """The most recent step reports, each kept as its JSON line until it is
    first read, then as the parsed dict (the same dict on every read)."""

    def __init__(self, maxlen: int) -> None:
        self._items: Deque[Union[str, Dict[str, Any]]] = collections.deque(maxlen=maxlen)

    @property
    def maxlen(self) -> int:
        return self._items.maxlen or 0

    def append(self, report: Dict[str, Any]) -> None:
        self._items.append(report)

    def extend_json(self, lines: List[str]) -> None:
        self._items.extend(lines)

    def snapshot(self) -> ReportList:
        out = ReportList()
        out.maxlen = self.maxlen
        for i, item in enumerate(self._items):
            if isinstance(item, str):
                item = json.loads(item)
                self._items[i] = item
            out.append(item)
        return out


def sinks_of(on_step: Any) -> List[Callable[[Dict[str, Any]], None]]:
    """``on_step`` as a list of callables: None, one callable, or a list or
    tuple of them; anything else is refused when the profile is made, not at
    the first step."""
    if on_step is None:
        return []
    sinks = list(on_step) if isinstance(on_step, (list, tuple)) else [on_step]
    for sink in sinks:
        if not callable(sink):
            raise TypeError(f"on_step must be a callable or a list of callables, not {type(sink).__name__}: {sink!r}")
    return sinks
