"""The live profiling session in Python: ``gpuutil.profile()`` and ``prof.step()``.

A ``Profile`` owns one C++ ``Session`` (the same engine that analyses trace
files), marks step boundaries on the session clock, and turns each finished
step into a report dict in the ``gpuutil.report/1`` schema. Collectors (the
CUPTI/NVTX collector, the PyTorch hook) attach through a small protocol so
that this file never imports a vendor library or torch; a collector that
cannot run says why, and every report carries that as the
``gpu_collection_off`` diagnostic.

Memory is bounded: ``prof.reports`` keeps the most recent ``keep_reports``
steps (the JSON Lines file, if asked for, has all of them) and
``prof.summary()`` is computed from running totals kept by the C++ session.

Cost at a step boundary is kept small because it is paid on the training
thread every step: the step is closed and only collectors with per-step
work run (a few µs). Every ``report_interval_ms`` (default 100 ms) the
collectors drain into the session and the finished steps are handed to the
session's worker thread, which analyses them (C++, on a snapshot of the
pending events, so the training thread never waits for it) and writes the
JSON Lines file; what it finished is delivered to ``prof.reports`` and
``on_step`` at the next batch. With ``report_interval_ms=0`` each step is
analysed on the training thread at its end. Reading ``prof.reports`` or
``prof.summary()``, or stopping, reports every finished step first, so the
batching is invisible there; ``on_step`` callbacks receive reports up to two
``report_interval_ms`` late, the JSON Lines file up to one.
``prof.reports`` is a list of dicts (a snapshot at each read); the profile
keeps each report as its JSON text and parses it the first time it is read;
only an ``on_step`` callback makes every report parse at once.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import math
import os
import sys
import threading
import warnings
import weakref
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Protocol, Sequence, Union

from gpuutil import _core, _merge
from gpuutil._detail import check_detail
from gpuutil._buckets import BREAKDOWN_KEYS

_BREAKDOWN_KEYS = BREAKDOWN_KEYS
_now_ns = _core.now_ns
# _core.StepPath.mode: how the optimizer post-hook treats a boundary.
_PATH_ASK, _PATH_AUTO, _PATH_OFF = 0, 1, 2  # ask auto_step_boundary / close in C++ / user steps or stopped


class Collector(Protocol):
    """What a collector implements to feed a Profile.

    ``start`` returns None when the collector runs, or a one-line reason why
    it cannot (the Profile reports it in every step's diagnostics).
    ``on_step_end`` runs at step boundaries, on the training thread's hot
    path (it must cost a few µs at most), unless the collector sets
    ``per_step = False``: at every boundary, or, when the collector has
    ``steps_until_due(prof)``, only at the boundary that many boundaries
    after the last call (and whenever a report batch is due). Boundaries in
    between stay in C++ (``_core.StepPath``). ``complete_until_ns`` returns the session-clock
    time up to which the collector has delivered everything (None: no
    constraint), asked before each report batch; an optional
    ``wait_complete(t_ns)`` blocks (bounded) until that reaches ``t_ns`` and
    returns it (used by ``flush()``). An optional ``before_report(prof)``
    runs before each batch of steps is analysed (at most every
    ``report_interval_ms``): collectors drain their buffers there, not at
    every step end.
    """

    name: str

    def start(self, prof: "Profile") -> Optional[str]: ...

    def on_step_end(self, prof: "Profile") -> None: ...

    def complete_until_ns(self) -> Optional[int]: ...

    def stop(self, prof: "Profile") -> None: ...


# Collector factories tried at start, in order. Optional subsystems register
# here (the live GPU collector, the PyTorch hook). Each factory returns a
# Collector or None when it does not apply.
_COLLECTOR_FACTORIES: List[Callable[["Profile"], Optional[Collector]]] = []

#: Why GPU activity is off when no GPU collector is available in this build.
NO_GPU_COLLECTOR_REASON = "this build of gpuutil has no live GPU (CUPTI) collector; reports are host-only"


def register_collector(factory: Callable[["Profile"], Optional[Collector]]) -> None:
    """Registers a collector factory used by every later ``profile()``."""
    _COLLECTOR_FACTORIES.append(factory)


def _rank_and_world() -> "tuple[int, int]":
    def env_int(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default

    if "RANK" not in os.environ:
        # Launchers that do not export RANK (Lightning's DDP subprocesses set
        # LOCAL_RANK/NODE_RANK only): the initialised process group knows.
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                return dist.get_rank(), dist.get_world_size()
        except Exception:  # noqa: BLE001 - fall back to the environment
            pass
    return env_int("RANK", 0), env_int("WORLD_SIZE", 1)


def _ranked_path(path: str, rank: int, world: int) -> str:
    """steps.jsonl -> steps.rank3.jsonl when the job has several ranks."""
    if world <= 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext or '.jsonl'}"


class Profile:
    """A live profiling session. Create it with :func:`gpuutil.profile`."""

    def __init__(
        self,
        output: Optional[str] = None,
        *,
        flops_per_step: Union[float, str, None] = None,
        dtype: str = "bf16",
        peak_tflops: Optional[float] = None,
        keep_reports: int = 1000,
        max_pending_events: int = 1 << 22,
        on_step: Union[Callable[[Dict[str, Any]], None], Sequence[Callable[[Dict[str, Any]], None]], None] = None,
        report_interval_ms: float = 100.0,
        hardware_flops_per_step: Optional[float] = None,
        cluster: bool = True,
        cluster_interval_ms: float = 1000.0,
        cluster_timeout_s: float = 30.0,
        cluster_leader: int = 0,
        detail: str = "sampled",
        job_id: Optional[str] = None,
    ) -> None:
        #: The job's id, the ``job_id`` label of its Prometheus series
        #: (gpuutil.fleet.identity: the argument, else SLURM_JOB_ID,
        #: TORCHELASTIC_RUN_ID, the Kubernetes pod, the script's name).
        self.job_id: str = _job_id(job_id)
        #: "measure" when FLOPs per step are to be measured (by the PyTorch
        #: collector, on one sampled step), else None.
        self.flops_mode: Optional[str] = None
        if flops_per_step == "measure":
            self.flops_mode = "measure"
            flops_per_step = None
        for name, value in (
            ("flops_per_step", flops_per_step),
            ("peak_tflops", peak_tflops),
            ("hardware_flops_per_step", hardware_flops_per_step),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
            ):
                extra = ' or "measure"' if name == "flops_per_step" else ""
                raise ValueError(f"{name} must be a positive finite number{extra}, not {value!r}")
        if keep_reports < 0:
            raise ValueError("keep_reports must be >= 0")
        if not isinstance(report_interval_ms, (int, float)) or not 0 <= report_interval_ms < math.inf:
            raise ValueError(f"report_interval_ms must be a finite number >= 0, not {report_interval_ms!r}")
        for name, value in (("cluster_interval_ms", cluster_interval_ms), ("cluster_timeout_s", cluster_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if isinstance(cluster_leader, bool) or not isinstance(cluster_leader, int) or cluster_leader < 0:
            raise ValueError(f"cluster_leader must be a rank (an int >= 0), not {cluster_leader!r}")
        #: Which steps collect the detail tier (gpuutil._detail).
        self.detail = check_detail(detail)
        #: Cross-rank view settings (docs/distributed.md), read by the cluster collector.
        self.cluster_options: Dict[str, Any] = {
            "enabled": bool(cluster),
            "interval_ms": float(cluster_interval_ms),
            "timeout_s": float(cluster_timeout_s),
            "leader": cluster_leader,
        }
        self.rank, self.world_size = _rank_and_world()
        self.output: Optional[str] = _ranked_path(os.fspath(output), self.rank, self.world_size) if output else None
        self._session = _core.Session(
            jsonl_path=self.output or "",
            rank=self.rank,
            flops_per_step=flops_per_step,
            dtype=dtype,
            peak_tflops=peak_tflops,
            max_pending_events=max_pending_events,
            hardware_flops_per_step=hardware_flops_per_step,
        )
        if not self._session.ok:
            raise OSError(f"gpuutil: {self._session.error}")
        self._reports = _ReportStore(keep_reports)
        self._report_interval_ns = int(report_interval_ms * 1e6)
        # The step path in C++: automatic steps, range slots, and when this
        # side is due at a boundary (a report batch, a collector's per-step work).
        main = threading.main_thread().ident or 0
        self._path = _core.StepPath(self._session, self._report_interval_ns, main)
        self._complete_ns = -(1 << 63)  # collectors' data is complete up to here
        self._background = False  # batches analysed by the session's worker (set at start)
        self._on_step = _sinks(on_step)
        self._sink_failures = 0
        self._sink_failure_example = ""
        self._collectors: List[Collector] = []
        self._off_reasons: List[str] = []
        self._per_step: "tuple[Callable[[Profile], None], ...]" = ()
        self._wakes: "tuple[Callable[[Profile], int], ...]" = ()
        self._running = False
        #: How step boundaries were found: "user" (prof.step()),
        #: "optimizer_step" (automatic, from optimizer step hooks) or None.
        self.steps_source: Optional[str] = None
        # Diagnostics every step's report carries: (name, example) pairs
        # that collectors add at start (e.g. torch_hook_fallback).
        self.step_diagnostics: List["tuple[str, str]"] = []
        self._depth = 0  # nested `with prof:` blocks; the outermost exit stops
        self._forked = False  # set in a forked child: the session is the parent's
        self._step_thread: Optional[int] = None  # the one thread that marks steps (prof.step())
        # Report batches, flushes and stop hold this lock; a SIGTERM flush that
        # interrupts one on the same thread is run when it ends (_reporting).
        self._report_lock = threading.Lock()
        self._report_owner: Optional[int] = None
        self._flush_pending = False
        self.thread = self._session.thread_index(os.getpid(), thread_key(), "main", os_tid=_native_id())

    # -- lifecycle -----------------------------------------------------
    def start(self) -> "Profile":
        """Starts the collectors. Called by ``with gpuutil.profile():``."""
        if self._running:
            return self
        self._running = True
        # Explicit steps (prof.step()) are marked from the thread that started
        # the profile: the training loop's, in practice.
        self._step_thread = threading.get_ident()
        gpu = False
        for factory in _COLLECTOR_FACTORIES:
            # A collector that fails to set up must not stop the training
            # job: it is reported like one that cannot run.
            try:
                collector = factory(self)
                if collector is None:
                    continue
                reason = collector.start(self)
            except Exception as e:  # noqa: BLE001 - reported, not raised
                name = getattr(factory, "__module__", "collector")
                self._off_reasons.append(f"{name}: failed to start: {type(e).__name__}: {e}")
                continue
            if reason is None:
                self._collectors.append(collector)
                gpu = gpu or getattr(collector, "collects_gpu", False)
            else:
                prefixed = reason.lower().startswith(collector.name.lower())
                self._off_reasons.append(reason if prefixed else f"{collector.name}: {reason}")
        if self.flops_mode == "measure" and not any(getattr(c, "measures_flops", False) for c in self._collectors):
            self._session.add_standing_diagnostic(
                "flops_unknown", 'flops_per_step="measure" needs the PyTorch collector: import torch before profiling'
            )
        if not gpu and not any("cupti" in r.lower() for r in self._off_reasons):
            self._off_reasons.insert(0, NO_GPU_COLLECTOR_REASON)
        # Conditions of the whole session, counted once in every report.
        for reason in self._off_reasons:
            self._session.add_standing_diagnostic("gpu_collection_off", reason)
        for name, example in self.step_diagnostics:
            self._session.add_standing_diagnostic(name, example)
        # What runs at every step boundary: only collectors with per-step
        # work (the rest drain before each report batch, before_report).
        per_step = [c for c in self._collectors if getattr(c, "per_step", True)]
        self._per_step = tuple(c.on_step_end for c in per_step)
        # None: the collector's per-step work is due at every boundary.
        self._wakes = tuple(getattr(c, "steps_until_due", None) for c in per_step)
        # Batches are analysed by the session's worker thread, off the
        # training thread (report_interval_ms=0 analyses each step at its end).
        self._background = self._report_interval_ns > 0
        if self._background:
            self._session.start_worker()
        self._path.restart(_core.now_ns())
        self._path.mode = {"user": _PATH_OFF, "optimizer_step": _PATH_AUTO}.get(self.steps_source or "", _PATH_ASK)
        self._path.set_callbacks(self.auto_step_boundary, self._on_due)
        self._rearm()
        _live_profiles.add(self)
        _signals.install()
        self._tell_sinks("on_profile_start")
        return self

    def stop(self) -> None:
        """Stops the collectors and reports the open step, if any. In a
        forked child it only detaches: the session, its file and its threads
        are the parent's."""
        if not self._running:
            return
        self._running = False
        self._depth = 0
        self._path.mode = _PATH_OFF
        self._path.set_callbacks(None, None)  # they hold this profile
        if self._forked:
            return
        with self._reporting():
            if self.steps_source == "optimizer_step":
                # Automatic steps end at optimizer steps: what ran after the
                # last one (a final evaluation, a checkpoint) until now, not
                # gpuutil's own stop, is outside steps.
                self._path.finish_auto(_core.now_ns())
            for c in self._collectors:
                c.stop(self)
            self._path.unreported = False
            self._deliver(self._session.finish(_core.now_ns()))
            self._after_report(final=True)
            self._session.close_output()  # the file is complete: closed now, not when collected
        self._tell_sinks("on_profile_stop")
        _live_profiles.discard(self)
        if not _live_profiles:
            _signals.uninstall()

    def __enter__(self) -> "Profile":
        self._depth += 1
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        # Nested `with prof:` blocks (a helper that also wraps the loop):
        # only the outermost exit stops the profile.
        self._depth = max(0, self._depth - 1)
        if self._depth == 0:
            self.stop()

    # -- steps ---------------------------------------------------------
    def step(self, step: Optional[int] = None) -> "_StepScope":
        """Context manager around one training step: ``with prof.step(): ...``.

        Steps are numbered from 0 unless ``step`` is given.
        """
        self._check_step_thread()  # a refused step does not advance the numbering
        if step is None:
            step = self._path.next_step
        self._path.next_step = step + 1
        return _StepScope(self, step)

    def _check_step_thread(self) -> None:
        me = threading.get_ident()
        if self._step_thread is not None and me != self._step_thread and not self._forked:
            # Steps are one sequence: one thread (the training loop's, which
            # started the profile) marks them; other threads' work is
            # attributed by time to that step.
            raise RuntimeError(
                "prof.step() is marked from the thread that started the profile (the training loop's): this "
                f"profile's steps come from thread {self._step_thread}, not {me} (docs/pytorch.md, 'Threads')"
            )

    def begin_step(self, step: int) -> None:
        if self._forked:
            return  # a forked child: the parent's profile
        if not self._running:
            raise RuntimeError("the profile is not running: use `with gpuutil.profile() as prof:`")
        self._check_step_thread()
        self._set_steps_source("user")
        self._session.begin_step(step, _core.now_ns())
        _core.nvtx_push_step(step)  # shows in Nsight Systems (gpuutil domain)

    def end_step(self) -> None:
        if self._forked:
            return
        _core.nvtx_pop_step()
        now = _now_ns()
        due = self._path.end_user_step(now)
        if due:
            self._on_due(now, due == 2)

    @property
    def _next_step(self) -> int:
        """The number the next step gets (kept by the C++ step path)."""
        return self._path.next_step

    @property
    def _unreported(self) -> bool:
        """Steps were closed since the last report batch."""
        return self._path.unreported

    def _set_steps_source(self, source: str) -> None:
        if self.steps_source != source:
            self.steps_source = source
            self._session.set_steps_source(source)
            if source == "user":
                self._path.mode = _PATH_OFF  # the optimizer hooks no longer end steps

    def auto_step_boundary(self) -> bool:
        """Ends an automatic step now; called by optimizer step hooks.

        Each automatic step runs from the previous boundary (or the start
        of the profile) to the end of an ``optimizer.step()``, so the input
        fetch, forward and backward before it belong to it; evaluation and
        checkpoint writes noted before its training began are left out
        (time outside steps; the step path decides, gpuutil/step_path.h).
        Does nothing (returns False) once the user marks steps with
        :meth:`step`.
        """
        if self.steps_source != "optimizer_step":
            if not self._running or self.steps_source == "user" or self._forked:
                return False
            self._set_steps_source("optimizer_step")
            # Later boundaries are closed by the optimizer post-hook in C++.
            self._path.mode = _PATH_AUTO
        elif not self._running or self._forked:
            return False
        now, due = self._path.close_auto_step()
        if due:
            self._on_due(now, due == 2)
        return True

    def _on_due(self, now: int, report: bool) -> None:
        """A boundary at ``now`` at which this side is due (the step path
        said so): the collectors' per-step work, then, if ``report``, a
        report batch (``report_interval_ms`` has passed since the last)."""
        for on_step_end in self._per_step:
            on_step_end(self)
        if report:
            with self._reporting():
                self._collect(now)
        self._rearm()

    def _rearm(self) -> None:
        """Tells the step path when the collectors' per-step work is next due."""
        if not self._per_step:
            self._path.wake_in(1 << 40)
            return
        k = 1 << 40
        for wake in self._wakes:
            k = 1 if wake is None else min(k, wake(self))
            if k <= 1:
                break
        self._path.wake_in(k)

    def set_measured_flops(self, flops: float, step: int) -> None:
        """Called by the collector that measured FLOPs per step on ``step``."""
        self._session.set_flops_per_step(flops, "measured")
        self._session.count("flops_measured_step", 1, f"step {step}: {flops:.4g} FLOPs measured")

    def _collect(self, now: Optional[int] = None) -> None:
        """Reports the finished steps whose data is complete. ``now``: the
        boundary that triggered it (the collectors say up to when their data
        is complete); None keeps what flush() worked out."""
        self._path.unreported = False
        for c in self._collectors:
            before = getattr(c, "before_report", None)
            if before is not None:
                before(self)
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
                    after(self, final)
                except Exception as e:  # noqa: BLE001 - never into the training loop
                    self._session.count("collector_failed", 1, f"{c.name}: {type(e).__name__}: {e}")
        if self._running:
            self._rearm()  # e.g. a finding asked for a detail step

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
            # evaluation and checkpoints out; compile warm-up steps).
            "outside_steps_breakdown_ns": totals["outside_steps_breakdown_ns"],
            "devices": totals["devices"],
            "findings": findings,
            "top_finding": findings[0] if findings else None,
            "gpu_collection_off": self.gpu_collection_off,
            "steps_source": self.steps_source,
            "host": totals["host"],
            "workload": totals["workload"],
        }
        if totals["compile_warmup_steps"]:
            out["compile_warmup_steps"] = totals["compile_warmup_steps"]
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


class _ReportStore:
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


class _StepScope:
    __slots__ = ("_prof", "_step")

    def __init__(self, prof: Profile, step: int) -> None:
        self._prof = prof
        self._step = step

    def __enter__(self) -> int:
        self._prof.begin_step(self._step)
        return self._step

    def __exit__(self, *exc: Any) -> None:
        self._prof.end_step()


def _sinks(on_step: Any) -> List[Callable[[Dict[str, Any]], None]]:
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


def thread_key() -> int:
    """The calling thread's key in the session: the low 32 bits of
    ``pthread_self()``, the thread id CUPTI puts in its API records (so ranges
    from Python, the LibTorch hook, NVTX and the CUDA launches of one thread
    meet on one session thread; gpuutil/thread_key.h). The OS thread id only
    names the thread."""
    return threading.get_ident() & 0xFFFFFFFF


def _native_id() -> int:
    return threading.get_native_id()


_live_profiles: "weakref.WeakSet[Profile]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The child has the parent's profiles but not their threads, and their
    # locks may be held: it must never touch them (no report written twice,
    # no deadlock at exit). The C++ session checks its owner pid too.
    for prof in list(_live_profiles):
        prof._forked = True
        prof._path.mode = _PATH_OFF
    _live_profiles.clear()
    _signals.reset_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Signals:
    """SIGTERM (how torchrun, Slurm and Kubernetes stop or preempt a job)
    first writes every finished step of every live profile to its JSON Lines
    file, so that a SIGKILL after the grace period loses none of them, then
    goes on to the disposition that was there before, exactly as without
    gpuutil:

    * the script's own handler (which often only sets a flag so the loop
      can finish its epoch and save a checkpoint): it is called, and the
      profiles keep running; they end when the script ends them or exits;
    * the default action: the profiles are stopped (the open step is
      reported too) and the process terminates by the same signal.

    SIGINT needs nothing: KeyboardInterrupt unwinds through ``with prof:``.
    Installed only from the main thread, only over the default handler or a
    Python one, and removed when the last profile stops (if still ours)."""

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            import signal

            previous = signal.getsignal(signal.SIGTERM)
            if previous is signal.SIG_IGN or previous is None:
                return  # ignored on purpose, or set outside Python: leave it
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):  # not the main interpreter / platform
            return
        self._previous = previous
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed or threading.current_thread() is not threading.main_thread():
            return
        import signal

        if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, self._previous)
        self._installed = False

    def reset_in_child(self) -> None:
        self.uninstall()

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        import signal

        previous = self._previous
        if callable(previous):
            # The script handles SIGTERM itself: finished steps are written,
            # profiling goes on while the script decides what to do.
            for prof in list(_live_profiles):
                try:
                    prof.flush_finished()
                except Exception:  # noqa: BLE001 - never stand between the job and its handler
                    pass
            previous(signum, frame)
            return
        # SIG_DFL: the process ends now; report everything, then terminate
        # by the same signal, as without gpuutil.
        _stop_live_profiles()
        self.uninstall()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_signals = _Signals()


@atexit.register
def _stop_live_profiles() -> None:
    # Exit without stop() still reports the last step.
    for prof in list(_live_profiles):
        try:
            prof.stop()
        except Exception:  # pragma: no cover - never fail interpreter exit
            pass


def profile(
    output: Optional[str] = None,
    *,
    flops_per_step: Union[float, str, None] = None,
    dtype: str = "bf16",
    peak_tflops: Optional[float] = None,
    keep_reports: int = 1000,
    on_step: Union[Callable[[Dict[str, Any]], None], Sequence[Callable[[Dict[str, Any]], None]], None] = None,
    report_interval_ms: float = 100.0,
    hardware_flops_per_step: Optional[float] = None,
    cluster: bool = True,
    cluster_interval_ms: float = 1000.0,
    cluster_timeout_s: float = 30.0,
    cluster_leader: int = 0,
    detail: str = "sampled",
    job_id: Optional[str] = None,
) -> Profile:
    """Profiles a training loop, step by step.

    ::

        with gpuutil.profile(output="steps.jsonl") as prof:
            for batch in loader:
                with prof.step():
                    train_step(batch)
        print(prof.summary()["top_finding"])

    Without ``prof.step()`` calls, steps come automatically from optimizer
    step hooks when the program uses torch (one step per
    ``optimizer.step()``, each from the previous one, so each holds its
    batch fetch; evaluation and checkpoints between them, and what runs
    after the last, are time outside steps, named in
    ``summary()["outside_steps_breakdown_ns"]``; docs/pytorch.md);
    ``summary()["steps_source"]`` says which was used. In a program that
    imported torch, PyTorch's ranges (DataLoader waits, ``.item()``,
    backward, optimizer) give each report a per-thread host breakdown
    (``steps[].host``; docs/pytorch.md).

    Args:
        output: a JSON Lines file that gets one report per step (the rank is
            inserted before the extension when WORLD_SIZE > 1).
        flops_per_step: FLOPs of one step, for MFU; or ``"measure"``: the
            PyTorch collector runs one step (the second) under
            ``torch.utils.flop_counter.FlopCounterMode``, once, and uses its
            count from then on (``flops_source: "measured"``; that step's
            report carries the ``flops_measured_step`` diagnostic because
            its timing is inflated). Needs torch.
        dtype: the training precision, picks the peak FLOP/s for MFU.
        peak_tflops: overrides the peak table.
        keep_reports: how many recent step reports ``prof.reports`` keeps.
        on_step: a callable, or a list of them, called with each step's
            report dict (tracker sinks), in step order, up to
            ``report_interval_ms`` after the step ends. A sink that raises
            is counted (``on_step_failed``, with the exception) and the
            training goes on. Sinks with an ``on_cluster`` method also get
            the leader's cluster records (docs/distributed.md).
        hardware_flops_per_step: FLOPs the hardware executes per step,
            recomputation included (activation checkpointing; e.g. the
            second value of ``gpuutil.flops.transformer_flops_per_step(...,
            recompute="full")``): reports then carry ``hfu`` next to ``mfu``.
        report_interval_ms: finished steps are analysed in batches at most
            this often (0: at every step end). Reading ``prof.reports`` or
            ``prof.summary()`` reports every finished step first.
        cluster: with torch.distributed initialised (now or later), every
            rank sends compact step summaries through the job's c10d store
            and the leader rank's ``prof.summary()`` gets ``ranks``,
            ``cluster`` and straggler findings (docs/distributed.md).
        cluster_interval_ms: how often a rank publishes (at most).
        cluster_timeout_s: a rank silent this long is no longer waited for
            (named in ``cluster.lost_ranks``); also the leader's longest wait
            at stop for the others' last summaries.
        cluster_leader: the rank that assembles the view.
        detail: which steps collect the detail tier, per-op and
            autograd-node ranges (every op pays for a RecordFunction while
            it is on): ``"sampled"`` (the first 3 steps, then one in 100,
            and the step after a finding first fires), ``"always"`` or
            ``"off"``. Every step collects the always-on tier (boundaries,
            DataLoader waits, host syncs, optimizer, forward, backward,
            collectives, CUPTI's kernels and launches); each report's
            ``steps[].detail`` says which tier its step had
            (docs/pytorch.md, "Collection tiers").
        job_id: the ``job_id`` label of the job's Prometheus series
            (``prof.job_id``); default: ``SLURM_JOB_ID``, else
            ``TORCHELASTIC_RUN_ID``, else the Kubernetes pod, else the
            script's name (docs/fleet.md). Sinks with ``on_profile_start``
            / ``on_profile_stop`` methods are called with the profile when
            it starts and stops.

    Returns a :class:`Profile`; use it as a context manager.
    """
    return Profile(
        output,
        flops_per_step=flops_per_step,
        dtype=dtype,
        peak_tflops=peak_tflops,
        keep_reports=keep_reports,
        on_step=on_step,
        report_interval_ms=report_interval_ms,
        hardware_flops_per_step=hardware_flops_per_step,
        cluster=cluster,
        cluster_interval_ms=cluster_interval_ms,
        cluster_timeout_s=cluster_timeout_s,
        cluster_leader=cluster_leader,
        detail=detail,
        job_id=job_id,
    )


def _job_id(explicit: Optional[str]) -> str:
    from gpuutil.fleet.identity import job_id

    return job_id(explicit)


# -- the built-in collectors, tried in this order at start ---------------------
def _torch_collector(prof: Profile):  # type: ignore[no-untyped-def]
    # The PyTorch hook attaches only when the program already imported torch:
    # `import gpuutil` itself never imports it.
    if "torch" not in sys.modules:
        return None
    from gpuutil.torch import TorchCollector

    return TorchCollector(prof)


def _cluster_collector(prof: Profile):  # type: ignore[no-untyped-def]
    # The cross-rank view needs torch.distributed; like the PyTorch hook it
    # attaches only when the program imported torch (docs/distributed.md).
    if "torch" not in sys.modules or not prof.cluster_options["enabled"]:
        return None
    from gpuutil.torch._cluster import ClusterCollector

    o = prof.cluster_options
    return ClusterCollector(prof, interval_ms=o["interval_ms"], timeout_s=o["timeout_s"], leader=o["leader"])


def _register_builtin_collectors() -> None:
    try:  # live CUPTI and NVTX collectors; gpuutil stays usable (host-only) without them
        from gpuutil import _live
    except ImportError:  # pragma: no cover - a build without live_bindings
        pass
    else:
        register_collector(_live._factory)
        register_collector(_live._nvtx_factory)
    register_collector(_torch_collector)
    register_collector(_cluster_collector)


_register_builtin_collectors()
