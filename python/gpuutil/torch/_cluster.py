"""The cross-rank exchange: every rank's step summaries, through the job's
own c10d store, to a leader rank that assembles the cluster view
(docs/distributed.md).

A collector (the Collector protocol of ``gpuutil._collectors``) that turns on
by itself once ``torch.distributed`` is initialised, at the start of the
profile or at any later report. It never issues a collective and never
touches the training's process group or CUDA stream: it uses the default
group's key-value store (the TCPStore torchrun or ``init_process_group``
set up), under its own key prefix, with non-blocking operations only
(``set``, ``add``, ``check``, and ``get`` of a key known to exist).

* The training thread only hands over bytes: at most every
  ``cluster_interval_ms`` it takes the session's compact step summaries
  (one C++ call, ``Session.take_rank_batch_json``) and puts them in a
  bounded queue. Store I/O runs on a daemon thread.
* Each rank first measures its clock offset to the leader by round trips
  through the store (minimum round-trip time; the uncertainty is half of
  it), so step starts can be placed on one timeline; nothing else compares
  clocks across machines.
* The leader's thread reads every rank's batches (tickets from one store
  counter), feeds them to the C++ ``ClusterAssembler`` and publishes the
  view to the profile: ``prof.summary()`` gets ``ranks``, ``cluster`` and
  the straggler findings, and the JSON Lines file a ``gpuutil.cluster/1``
  record whenever the view changed.
* Faults never hang or crash a rank: a rank silent for ``cluster_timeout_s``
  is declared lost (named in ``cluster.missing_ranks`` or
  ``cluster.short_ranks``); at stop the leader waits at most that long for
  the others' last batches; a store error turns the exchange off with the
  reason in ``cluster.off``.

``GPUUTIL_CLUSTER_CLOCK_SHIFT_NS`` shifts the clock this rank publishes (a
test knob: it makes two launches on one machine look like two machines
whose CLOCK_MONOTONIC differ).
"""

from __future__ import annotations

import json
import os
import queue
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from gpuutil import _core

if TYPE_CHECKING:  # pragma: no cover
    from gpuutil._collectors import CollectorHandle

CLUSTER_SCHEMA = "gpuutil.cluster/1"
_CLOCK_ROUNDS = 5
_POLL_S = 0.05  # the leader's idle poll; publishing is at most every cluster_interval_ms anyway
_CLOCK_POLL_S = 0.001  # while clock round trips are in flight (their resolution; uncertainty is measured)
_profiles_started = 0  # per process; ranks create profiles in the same order


def _shift_ns() -> int:
    try:
        return int(os.environ.get("GPUUTIL_CLUSTER_CLOCK_SHIFT_NS", "0"))
    except ValueError:
        return 0


class ClusterCollector:
    """Collector protocol: publishes this rank's steps; on the leader, assembles."""

    name = "cluster"
    per_step = False  # works after each report batch (after_report)
    collects_gpu = False

    def __init__(self, prof: "CollectorHandle", *, interval_ms: float, timeout_s: float, leader: int) -> None:
        self._prof = prof
        self._interval_ns = int(interval_ms * 1e6)
        self._timeout_s = timeout_s
        self._leader = leader
        self._shift_ns = _shift_ns()
        self._host = socket.gethostname()
        self._active = False
        self._last_take_ns = 0
        self._queue: "queue.Queue[Optional[str]]" = queue.Queue(maxsize=64)
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._final_sent = threading.Event()
        self._view_lock = threading.Lock()
        self._view: Optional[Dict[str, Any]] = None  # newest view (leader)
        self._view_written: Optional[Dict[str, Any]] = None
        self.off: Optional[str] = None  # why the exchange stopped, if it did
        self._off_reported = False
        self._dropped_reported = 0
        self.batches_dropped = 0
        self.steps_dropped = 0
        self.rank = prof.rank
        self.world_size = prof.world_size
        self.clock_offset_ns: Optional[int] = None
        self.clock_uncertainty_ns: Optional[int] = None
        #: What the view cost this rank (benchmarks/bench_cluster_overhead.py):
        #: seconds on the training thread while profiling (after_report),
        #: seconds of the last one at stop (the leader waits there for the
        #: others' last batches), and the exchange thread's CPU seconds (set
        #: when it ends).
        self.training_thread_s = 0.0
        self.stop_s = 0.0
        self.exchange_thread_cpu_s: Optional[float] = None
        self.clock_sync_cpu_s: Optional[float] = None  # of which the clock sync (once per profile)

    # -- Collector protocol -------------------------------------------------
    def start(self, prof: "CollectorHandle") -> Optional[str]:
        self._try_activate()
        return None

    def on_step_end(self, prof: "CollectorHandle") -> None:
        pass

    def complete_until_ns(self) -> Optional[int]:
        return None

    def stop(self, prof: "CollectorHandle") -> None:
        pass  # the last batch goes out in after_report(final=True), after the last steps are reported

    def after_report(self, prof: "CollectorHandle", final: bool = False) -> None:
        """On the training thread after each report batch: hands this rank's
        new step summaries to the exchange thread (at most every
        interval); writes a changed cluster view to the JSON Lines file."""
        t0 = time.perf_counter()
        try:
            self._after_report(final)
        finally:
            if final:
                self.stop_s = time.perf_counter() - t0
            else:
                self.training_thread_s += time.perf_counter() - t0

    def _after_report(self, final: bool) -> None:
        self._report_problems()
        if not self._active and not self._try_activate():
            return
        now = _core.now_ns()
        if final or now - self._last_take_ns >= self._interval_ns:
            self._last_take_ns = now
            self._publish(final)
        if final:
            self._final_sent.set()
            if self._thread is not None:
                # The leader waits (bounded) for the others' last batches.
                self._thread.join(self._timeout_s + 5.0 if self.rank == self._leader else 5.0)
        self._write_view()
        self._report_problems()

    def _report_problems(self) -> None:
        session = self._prof.session
        if self.off is not None and not self._off_reported and self.world_size > 1:
            self._off_reported = True
            session.add_standing_diagnostic("cluster_off", self.off)
        dropped = self.steps_dropped + self.batches_dropped
        if dropped > self._dropped_reported:
            session.count("cluster_steps_dropped", dropped - self._dropped_reported, "")
            self._dropped_reported = dropped

    # -- the view (leader) ----------------------------------------------------
    def view(self) -> Optional[Dict[str, Any]]:
        with self._view_lock:
            return self._view

    def _write_view(self) -> None:
        view = self.view()
        if view is None or view is self._view_written:
            return
        self._view_written = view
        record = {"schema": CLUSTER_SCHEMA, "rank": self.rank, "time_ns": _core.now_ns()}
        record.update(view)
        self._prof.session.write_jsonl_line(json.dumps(record, separators=(",", ":")))
        self._prof.emit_cluster(record)  # tracker sinks with on_cluster (integrations/sinks.py)

    # -- activation -------------------------------------------------------------
    def _try_activate(self) -> bool:
        if self._active or self.off is not None:
            return self._active
        try:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                return False
            from torch.distributed import distributed_c10d as c10d

            world = dist.get_world_size()
            rank = dist.get_rank()
            store = c10d._get_default_store()
        except Exception as e:  # noqa: BLE001 - reported, never raised into training
            self.off = f"cannot reach the c10d store: {type(e).__name__}: {e}"
            return False
        if world < 2:
            self.off = "world size 1: nothing to compare"
            return False
        if not 0 <= self._leader < world:
            self.off = f"leader rank {self._leader} is not in the job (world size {world})"
            return False
        global _profiles_started
        _profiles_started += 1
        import torch.distributed as dist

        self._store = dist.PrefixStore(f"gpuutil/{_profiles_started}/", store)
        self.rank, self.world_size = rank, world
        self._prof.session.keep_rank_steps(4096)
        self._active = True
        target = self._lead if rank == self._leader else self._follow

        def run() -> None:
            try:
                target()
            finally:
                self.exchange_thread_cpu_s = time.thread_time()

        self._thread = threading.Thread(target=run, name="gpuutil-cluster", daemon=True)
        self._thread.start()
        return True

    def _publish(self, final: bool) -> None:
        text, dropped, n = self._prof.session.take_rank_batch_json(
            self.rank,
            self._host,
            finished=final,
            clock_offset_ns=self.clock_offset_ns,
            clock_uncertainty_ns=self.clock_uncertainty_ns,
            shift_ns=self._shift_ns,
        )
        self.steps_dropped += dropped
        if n == 0 and not final:
            return
        try:
            self._queue.put_nowait(text)
        except queue.Full:
            self.batches_dropped += 1

    def _clock(self) -> int:
        return _core.now_ns() + self._shift_ns

    # -- follower thread ---------------------------------------------------------
    def _follow(self) -> None:
        try:
            # Nothing is sent before the leader runs its view (it may start
            # profiling later, or not at all): batches wait in the bounded
            # queue meanwhile, and the ones that do not fit are counted.
            while not self._store.check(["leader"]):
                if self._final_sent.is_set():
                    self.off = f"the leader rank {self._leader} never started its cluster view"
                    return
                time.sleep(0.05)
            self._sync_clock()
            self.clock_sync_cpu_s = time.thread_time()
            while True:
                try:
                    text = self._queue.get(timeout=_POLL_S * 5)
                except queue.Empty:
                    if self._final_sent.is_set() and self._queue.empty():
                        return
                    continue
                if text is not None:
                    self._send(text)
                if self._final_sent.is_set() and self._queue.empty():
                    return
        except Exception as e:  # noqa: BLE001 - the leader or the store went away
            self.off = f"cluster exchange stopped: {type(e).__name__}: {e}"

    def _send(self, text: str) -> None:
        ticket = self._store.add("n", 1)
        self._store.set(f"t/{ticket}", text)

    def _sync_clock(self) -> None:
        """Offset to the leader's clock by round trips through the store; the
        sample with the shortest round trip wins (uncertainty: half of it)."""
        best: Optional[tuple] = None
        deadline = time.monotonic() + self._timeout_s
        for _ in range(_CLOCK_ROUNDS):
            ticket = self._store.add("clk/n", 1)
            t0 = self._clock()
            self._store.set(f"clk/q/{ticket}", str(self.rank))
            key = f"clk/a/{ticket}"
            while not self._store.check([key]):
                if time.monotonic() > deadline:
                    return  # no leader answer: no offset (skew stays unknown)
                time.sleep(_CLOCK_POLL_S)
            t_leader = int(self._store.get(key))
            t1 = self._clock()
            self._store.delete_key(key)
            self._store.delete_key(f"clk/q/{ticket}")
            rtt = t1 - t0
            if best is None or rtt < best[0]:
                best = (rtt, t_leader - (t0 + t1) // 2)
        if best is not None:
            self.clock_uncertainty_ns = best[0] // 2
            self.clock_offset_ns = best[1]

    # -- leader thread -----------------------------------------------------------
    def _lead(self) -> None:
        assembler = _core.ClusterAssembler(self.world_size)
        assembler.set_clock_offset(self.rank, 0, 0)
        assembler.set_host(self.rank, self._host)
        self.clock_offset_ns, self.clock_uncertainty_ns = 0, 0
        next_ticket, next_clock = 1, 1
        heard: Dict[int, float] = {}
        lost: set = set()
        finished: set = set()
        started = time.monotonic()
        errors: List[str] = []
        final_deadline: Optional[float] = None
        changed = False  # anything new for the view since it was last rendered
        last_full = 0.0
        try:
            self._store.set("leader", str(self.rank))
            while True:
                busy = False
                # Clock requests first: their round trip is the offset's
                # uncertainty. Each other rank asks _CLOCK_ROUNDS times, once;
                # after the last answer the store is no longer asked.
                clock_requests = (self.world_size - 1) * _CLOCK_ROUNDS
                pending_clock = self._store.add("clk/n", 0) if next_clock <= clock_requests else 0
                while next_clock <= pending_clock:
                    key = f"clk/q/{next_clock}"
                    if not self._store.check([key]):
                        break
                    self._store.set(f"clk/a/{next_clock}", str(self._clock()))
                    next_clock += 1
                    busy = True
                # The rest at most every _POLL_S (the fast polls while clock
                # round trips are in flight only answer them).
                now = time.monotonic()
                final = self._final_sent.is_set() and self._queue.empty()
                if not final and now - last_full < _POLL_S:
                    syncing = next_clock <= (self.world_size - 1) * _CLOCK_ROUNDS and now - started < self._timeout_s
                    if not syncing and self.clock_sync_cpu_s is None:
                        self.clock_sync_cpu_s = time.thread_time()
                    time.sleep(_CLOCK_POLL_S if syncing else max(0.0, _POLL_S - (now - last_full)))
                    continue
                last_full = now
                # Our own batches.
                while True:
                    try:
                        text = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if text is not None:
                        self._ingest(assembler, text, heard, finished, errors)
                        changed = True
                # The others'.
                count = self._store.add("n", 0)
                while next_ticket <= count:
                    key = f"t/{next_ticket}"
                    if not self._store.check([key]):
                        break  # being written; next round
                    text = self._store.get(key).decode("utf-8", "replace")
                    self._store.delete_key(key)
                    self._ingest(assembler, text, heard, finished, errors)
                    next_ticket += 1
                    busy = changed = True
                # Ranks silent too long are no longer waited for.
                # (Silent: nothing for timeout_s while the leader itself went
                # on publishing, so a long step is not mistaken for a loss.)
                mine = heard.get(self.rank, started)
                for r in range(self.world_size):
                    if r == self.rank or r in finished or r in lost:
                        continue
                    last = heard.get(r, started)
                    if now - last > self._timeout_s and mine - last > self._timeout_s:
                        lost.add(r)
                        assembler.mark_finished(r, heard_from=r in heard)
                        changed = True
                if final and final_deadline is None:
                    final_deadline = now + self._timeout_s
                done = final and (
                    len(finished | lost | {self.rank}) >= self.world_size or now > (final_deadline or now)
                )
                if done:  # the ranks still silent at the deadline are lost
                    for r in range(self.world_size):
                        if r != self.rank and r not in finished and r not in lost:
                            lost.add(r)
                            assembler.mark_finished(r, heard_from=r in heard)
                if changed or done:
                    assembler.advance(final=done)
                    self._set_view(assembler, lost, errors)
                    changed = False
                if done:
                    return
                if final and not busy:
                    time.sleep(0.005)  # at stop: the others' last batches
        except Exception as e:  # noqa: BLE001 - never into training
            self.off = f"cluster exchange stopped: {type(e).__name__}: {e}"
            try:
                assembler.advance(final=True)
                self._set_view(assembler, lost, errors)
            except Exception:  # pragma: no cover
                pass

    def _ingest(self, assembler: Any, text: str, heard: Dict[int, float], finished: set, errors: List[str]) -> None:
        error, rank, done = assembler.ingest(text)
        if error:
            errors.append(error)
            del errors[:-5]
            return
        heard[rank] = time.monotonic()
        if done:
            finished.add(rank)

    def _set_view(self, assembler: Any, lost: set, errors: List[str]) -> None:
        view = json.loads(assembler.view_json())
        cluster = view["cluster"]
        cluster["leader"] = self.rank
        cluster["lost_ranks"] = sorted(lost)
        cluster["batch_errors"] = list(errors)
        cluster["off"] = self.off
        with self._view_lock:
            if self._view is not None and self._view["cluster"] == cluster and self._view["ranks"] == view["ranks"]:
                return
            self._view = view
