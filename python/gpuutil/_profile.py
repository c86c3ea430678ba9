"""The live profiling session in Python: ``gpuutil.profile()`` and its lifecycle.

A ``Profile`` owns one C++ ``Session`` (the same engine that analyses trace
files), marks step boundaries on the session clock, and turns each finished
step into a report dict in the ``gpuutil.report/1`` schema. This file holds
its construction (argument checks, rank and job identity), start (the
collectors, through the protocol and registry of gpuutil._collectors, so it
never imports a vendor library or torch; a collector that cannot run says
why, and every report carries that as the ``gpu_collection_off``
diagnostic) and stop. The rest of Profile, by responsibility:

- step marking on the training thread's hot path: gpuutil._steps;
- report batches, ``flush()``, ``prof.reports``, ``prof.summary()`` and the
  ``on_step`` sinks: gpuutil._delivery;
- thread keys, fork and SIGTERM: gpuutil._process; rank and job id:
  gpuutil._ranks.

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

import math
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from gpuutil import _collectors, _core, _process
from gpuutil._collectors import NO_GPU_COLLECTOR_REASON, Collector, CollectorHandle, register_collector  # noqa: F401 - re-exported
from gpuutil._delivery import ReportDelivery, ReportList, ReportStore, sinks_of  # noqa: F401 - ReportList re-exported
from gpuutil._detail import check_detail
from gpuutil._process import native_id, thread_key  # noqa: F401 - thread_key re-exported
from gpuutil._ranks import job_id_of, rank_and_world, ranked_path
from gpuutil._steps import PATH_ASK, PATH_AUTO, PATH_OFF, StepMarking, _StepScope  # noqa: F401



class Profile(StepMarking, ReportDelivery):
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
        self.job_id: str = job_id_of(job_id)
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
        self.rank, self.world_size = rank_and_world()
        self.output: Optional[str] = ranked_path(os.fspath(output), self.rank, self.world_size) if output else None
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
        self._reports = ReportStore(keep_reports)
        self._report_interval_ns = int(report_interval_ms * 1e6)
        # The step path in C++: automatic steps, range slots, and when this
        # side is due at a boundary (a report batch, a collector's per-step work).
        main = threading.main_thread().ident or 0
        self._path = _core.StepPath(self._session, self._report_interval_ns, main)
        self._complete_ns = -(1 << 63)  # collectors' data is complete up to here
        self._background = False  # batches analysed by the session's worker (set at start)
        self._on_step = sinks_of(on_step)
        self._sink_failures = 0
        self._sink_failure_example = ""
        self._collectors: List[Collector] = []
        self._off_reasons: List[str] = []
        self._per_step: "tuple[Callable[[CollectorHandle], None], ...]" = ()
        self._wakes: "tuple[Callable[[CollectorHandle], int], ...]" = ()
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
        self.thread = self._session.thread_index(os.getpid(), thread_key(), "main", os_tid=native_id())
        # What collectors are given instead of this Profile (gpuutil._collectors).
        self._handle = CollectorHandle(
            session=self._session,
            path=self._path,
            rank=self.rank,
            world_size=self.world_size,
            detail=self.detail,
            flops_mode=self.flops_mode,
            cluster_options=self.cluster_options,
            step_diagnostics=self.step_diagnostics,
            boundary_callbacks=(self._on_due, self.auto_step_boundary),
            set_measured_flops=self.set_measured_flops,
            emit_cluster=self._emit_cluster,
        )

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
        for factory in _collectors.factories():
            # A collector that fails to set up must not stop the training
            # job: it is reported like one that cannot run.
            try:
                collector = factory(self._handle)
                if collector is None:
                    continue
                reason = collector.start(self._handle)
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
        self._path.mode = {"user": PATH_OFF, "optimizer_step": PATH_AUTO}.get(self.steps_source or "", PATH_ASK)
        self._path.set_callbacks(self.auto_step_boundary, self._on_due)
        self._rearm()
        _process.live_profiles.add(self)
        _process.signals.install()
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
        self._path.mode = PATH_OFF
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
                c.stop(self._handle)
            self._path.unreported = False
            self._deliver(self._session.finish(_core.now_ns()))
            self._after_report(final=True)
            self._write_run_record()
            self._session.close_output()  # the file is complete: closed now, not when collected
        self._tell_sinks("on_profile_stop")
        _process.live_profiles.discard(self)
        if not _process.live_profiles:
            _process.signals.uninstall()

    def __enter__(self) -> "Profile":
        self._depth += 1
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        # Nested `with prof:` blocks (a helper that also wraps the loop):
        # only the outermost exit stops the profile.
        self._depth = max(0, self._depth - 1)
        if self._depth == 0:
            self.stop()

    def _write_run_record(self) -> None:
        """The JSONL's last line: what the run knows and no step report holds
        (``gpuutil.run/1``, docs/report-schema.md): the time outside steps
        before the first and after the last (a final evaluation, a
        checkpoint), named, and the steps kept out of the figures (compile
        warm-ups, incomplete steps). ``gpuutil analyze`` and ``export html``
        of the file then tell the story ``prof.summary()`` tells."""
        if not self.output or self._session.output_status()["lines_lost"]:
            # A file that already lost step reports (a full disk) cannot
            # tell the run's story; its readers see the lost-line counts.
            return
        import json

        from gpuutil._merge import RUN_SCHEMA

        totals = json.loads(self._session.run_totals_json())
        record = {
            "schema": RUN_SCHEMA,
            "steps": totals["steps"],
            "steps_wall_ns": totals["steps_wall_ns"],
            "outside_steps_ns": totals["outside_steps_ns"],
            "outside_steps_breakdown_ns": totals["outside_steps_breakdown_ns"],
            "compile_warmup_steps": totals.get("compile_warmup_steps", 0),
            "incomplete_steps": totals.get("incomplete_steps", 0),
            "steps_source": self.steps_source,
        }
        self._session.write_jsonl_line(json.dumps(record, separators=(",", ":")))

    def set_measured_flops(self, flops: float, step: int) -> None:
        """Called by the collector that measured FLOPs per step on ``step``."""
        self._session.set_flops_per_step(flops, "measured")
        self._session.count("flops_measured_step", 1, f"step {step}: {flops:.4g} FLOPs measured")

    def _on_fork_in_child(self) -> None:
        # In a forked child (gpuutil._process): the session, its file and
        # its threads are the parent's; never touch them.
        self._forked = True
        self._path.mode = PATH_OFF



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
    communication_kernels: Optional[Sequence[str]] = None,
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
        communication_kernels: kernel-name substrings (case-insensitive)
            of the program's own communication kernels, besides the
            built-in families (NCCL, DeepEP, symmetric memory, custom
            all-reduce...; docs/accounting.md, "Communication"); for the
            process, as :func:`gpuutil.set_communication_kernels`. Default:
            ``GPUUTIL_COMM_KERNELS`` (comma-separated).

    Returns a :class:`Profile`; use it as a context manager.
    """
    if communication_kernels is not None:
        from gpuutil._api import set_communication_kernels

        set_communication_kernels(communication_kernels)
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
