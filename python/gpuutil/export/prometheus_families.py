"""gpuutil step reports folded into Prometheus metric families (pure).

:class:`ReportTotals` folds step reports (from ``gpuutil.profile(
on_step=...)``, a steps JSONL, or ``gpuutil.analyze``) into running totals
per (rank, device) and lists them as metric families. Every series carries
``job_id``, ``rank`` and ``host``; per-device series also ``device`` (the
CUDA device id) and ``UUID`` (dcgm-exporter's GPU label, ``GPU-…``; empty
when the GPU cannot be named: gpuutil.fleet.identity). Memory is bounded:
totals, not a history; one series per GPU per job per bucket.

It also keeps the latest cross-rank view, from a multi-rank report's
``summary.ranks`` or a live leader's ``gpuutil.cluster/1`` record (both go
to :meth:`ReportTotals.add`; ``gpuutil.profile(on_step=metrics)`` passes
the records too, through ``on_cluster``): ``gpuutil_rank_*`` series per
rank, labelled with that rank's ``rank`` and ``host``, and
``gpuutil_straggler{rank,host,cause} 1`` for each straggler finding.

Passed as ``gpuutil.profile(on_step=metrics)``, it is told when the profile
starts and stops (``on_profile_start``/``on_profile_stop``): it takes the
profile's ``job_id`` (unless given its own) and exports
``gpuutil_gpu_info{UUID,...} 1`` for each GPU while the profile runs; the
fleet rules (deploy/prometheus/gpuutil-rules.yml) count those as the GPUs
attached to a running job. User units (samples, tokens, useful steps) are
counted with :meth:`ReportTotals.count`.

No I/O and no ``prometheus_client`` here: rendering, serving and pushing
are :mod:`gpuutil.export.prometheus`, which builds on this module (never
the other way round). Metric names (all prefixed ``gpuutil_``) are listed
in docs/exports.md; the rules over them in docs/fleet.md.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple, TypeVar

from gpuutil._buckets import IDLE_CAUSES
from gpuutil.fleet import identity
from gpuutil.integrations.metrics import CLUSTER_SCHEMA, cluster_view, stragglers

_BUCKETS = ("compute", "communication", "memory", *("idle_" + c for c in IDLE_CAUSES))

#: (name, kind, help, [(labels, value)]): one metric family.
Family = Tuple[str, str, str, List[Tuple[Dict[str, str], float]]]

# health key -> (metric name, help, kind): "gauge" last value, "counter" summed.
_HEALTH = (
    ("nvml_utilization_pct", "gpuutil_nvml_utilization_ratio", "NVML utilization.gpu (duty cycle), last step", "ratio"),
    ("sm_clock_mhz", "gpuutil_sm_clock_mhz", "mean SM clock over the last step", "gauge"),
    ("sm_clock_max_mhz", "gpuutil_sm_clock_max_mhz", "maximum SM clock", "gauge"),
    ("power_w", "gpuutil_power_watts", "mean board power over the last step", "gauge"),
    ("temperature_c", "gpuutil_temperature_celsius", "mean GPU temperature over the last step", "gauge"),
    ("fb_used_bytes", "gpuutil_fb_used_bytes", "framebuffer memory used (max over the last step)", "gauge"),
    ("allocated_bytes", "gpuutil_allocated_bytes", "PyTorch allocated memory (max over the last step)", "gauge"),
    ("reserved_bytes", "gpuutil_reserved_bytes", "PyTorch reserved memory (max over the last step)", "gauge"),
    ("energy_j", "gpuutil_energy_joules_total", "energy used in steps", "counter"),
    ("throttle_power_ns", "gpuutil_throttle_power_seconds_total", "time clocks were power-throttled", "counter_ns"),
    ("throttle_thermal_ns", "gpuutil_throttle_thermal_seconds_total", "time clocks were thermally throttled",
     "counter_ns"),
)

# cross-rank view, per rank: (key in summary.ranks, metric name, help, kind, divisor to the unit).
_RANK = (
    ("last_step", "gpuutil_rank_last_step", "last step of the rank in the cross-rank view", "gauge", 1.0),
    ("step_wall_p50_ns", "gpuutil_rank_step_wall_p50_seconds", "median step wall time", "gauge", 1e9),
    ("own_p50_ns", "gpuutil_rank_own_p50_seconds",
     "median own time per step (step wall minus collective wait)", "gauge", 1e9),
    ("collective_wait_p50_ns", "gpuutil_rank_collective_wait_p50_seconds",
     "median time per step waiting in collectives for other ranks", "gauge", 1e9),
    ("collective_wait_ns", "gpuutil_rank_collective_wait_seconds_total",
     "time waiting in collectives for other ranks, over the compared steps", "counter", 1e9),
    ("collective_transfer_ns", "gpuutil_rank_collective_transfer_seconds_total",
     "collective time every rank spent (the shortest rank's duration), over the compared steps", "counter",
     1e9),
    ("relative_perf", "gpuutil_rank_relative_perf", "fastest rank's own time over this rank's (1 = fastest)",
     "gauge", 1.0),
    ("start_skew_p50_ns", "gpuutil_rank_start_skew_p50_seconds",
     "median lag of the rank's step start behind the earliest rank", "gauge", 1e9),
    ("throttled_steps", "gpuutil_rank_throttled_steps_total", "compared steps with throttled clocks", "counter",
     1.0),
)


def _scope(name: str, kind: str) -> str:
    """What a series' value covers, stated in its HELP text: counters and
    run ratios add up over the whole run, the other gauges are the last
    step's, the cross-rank ones the newest view's."""
    if name.startswith(("gpuutil_rank_", "gpuutil_straggler", "gpuutil_cluster_")):
        return "newest cross-rank view" if kind == "gauge" else "whole run, newest cross-rank view"
    if kind == "counter" or name == "gpuutil_busy_ratio":
        return "whole run"
    if name in ("gpuutil_gpu_info", "gpuutil_peak_flops"):
        return "while the profile runs" if name == "gpuutil_gpu_info" else "newest step"
    return "last step"


#: User units (:meth:`ReportTotals.count`): keyword -> (metric name, help).
UNITS = {
    "samples": ("gpuutil_samples_total", "samples the rank processed (its local batch per step), counted by the user"),
    "tokens": ("gpuutil_tokens_total", "tokens the rank processed, counted by the user"),
    "useful_steps": ("gpuutil_useful_steps_total",
                     "steps whose work was kept (e.g. covered by a saved checkpoint), counted by the user; "
                     "OEE quality = useful steps / steps"),
}


_T = TypeVar("_T", bound="ReportTotals")


class ReportTotals:
    """Running totals of step reports and the newest cross-rank view, as metric families."""

    def __init__(self, host: Optional[str] = None, job_id: Optional[str] = None,
                 gpu_uuids: identity.UuidOverride = None) -> None:
        """``job_id``: the label (default: the profile's, else from the
        environment, gpuutil.fleet.identity.job_id). ``gpu_uuids``: the GPUs'
        UUIDs by CUDA device id (a mapping, a list, or "GPU-a,GPU-b"),
        overriding what the process can find out (default:
        ``GPUUTIL_GPU_UUIDS``, else torch/NVML while a profile runs); for
        CPU-only jobs and tests. Raises ValueError for a bad one."""
        self.host = host if host is not None else socket.gethostname()
        self._own_job_id = job_id is not None
        self.job_id = identity.job_id(job_id)
        override = identity.parse_override(gpu_uuids)
        self._uuid_override = override if override is not None else identity.override_from_environment()
        self._names: Dict[Tuple[int, int], identity.GpuName] = {}
        self._live = False  # a profile of this process runs and feeds these totals
        self._attached_since: Optional[float] = None  # monotonic s at the running profile's start
        self._attached_before_s: Optional[float] = None  # time attached in earlier profiles (None: never)
        self._rank: Optional[int] = None  # the profile's rank (units counted without a rank)
        self._units: Dict[Tuple[int, str], float] = {}
        self._lock = threading.Lock()
        self._dev: Dict[Tuple[int, int], Dict[str, Any]] = {}
        self._findings: Dict[Tuple[int, str], float] = {}
        self._steps: Dict[int, int] = {}
        self._last_step_wall_s: Dict[int, float] = {}
        self._cluster: Optional[Dict[str, Any]] = None  # latest cross-rank view and who reported it

    def add(self, report: Dict[str, Any]) -> None:
        """Folds one gpuutil.report/1 dict (one or many steps) into the totals;
        a ``gpuutil.cluster/1`` record (or a report with ``summary.ranks``)
        replaces the cross-rank view."""
        if report.get("schema") == CLUSTER_SCHEMA:
            self._set_cluster(report, int(report.get("rank", 0)))
            return
        if str(report.get("schema", "")).startswith("gpuutil.run/"):
            return  # the run record: outside time, no step figures
        with self._lock:
            for step in report.get("steps", []):
                ranks = set()
                for d in step.get("devices", []):
                    key = (int(d.get("rank", 0)), int(d.get("device", 0)))
                    ranks.add(key[0])
                    t = self._dev.setdefault(key, {"wall_ns": 0, "busy_ns": 0, "kernels": 0,
                                                   **{b: 0 for b in _BUCKETS}, "health": {}, "counters": {}})
                    t["wall_ns"] += int(d.get("wall_ns", 0))
                    t["busy_ns"] += int(d.get("busy_ns", 0))
                    t["kernels"] += int(d.get("kernels", 0))
                    for b in _BUCKETS:
                        t[b] += int(d.get("breakdown_ns", {}).get(b, 0))
                    for k in ("mfu", "sm_efficiency_est", "achieved_occupancy_est"):
                        if d.get(k) is not None:
                            t[k] = float(d[k])
                    for hkey, _, _, kind in _HEALTH:
                        v = (d.get("health") or {}).get(hkey)
                        if v is None:
                            continue
                        if kind.startswith("counter"):
                            t["counters"][hkey] = t["counters"].get(hkey, 0.0) + float(v)
                        else:
                            t["health"][hkey] = float(v)
                    for key_, field in (("flops", "flops"), ("peak_flops", "peak_flops_per_s")):
                        if d.get(field) is not None:
                            if key_ == "flops":
                                t["flops"] = t.get("flops", 0.0) + float(d[field])
                            else:
                                t["peak_flops"] = float(d[field])
                for r in ranks or {0}:
                    self._steps[r] = self._steps.get(r, 0) + 1
                    self._last_step_wall_s[r] = int(step.get("wall_ns", 0)) / 1e9
            srcs = report.get("sources") or [{}]
            rank = int(srcs[0].get("rank", 0))
            for f in report.get("findings", []):
                key = (rank, str(f.get("id", "")))
                self._findings[key] = self._findings.get(key, 0.0) + int(f.get("recoverable_ns", 0)) / 1e9
            unnamed = [k for k in self._dev if k not in self._names]
        if unnamed:
            self._name_devices(unnamed)
        self._set_cluster(report, rank)

    def _name_devices(self, keys: List[Tuple[int, int]]) -> None:
        """Each new (rank, device) gets its UUID once: from the override, or,
        while a profile of this process runs, from torch/NVML; else none."""
        names: Dict[int, identity.GpuName] = {}
        if self._uuid_override is not None:
            names = {d: identity.GpuName(u) for d, u in self._uuid_override.items()}
        elif self._live:
            try:
                names = identity.gpu_names({d for _, d in keys})
            except Exception:  # noqa: BLE001 - a GPU that cannot be named has no UUID; never raised into training
                names = {}
        with self._lock:
            for key in keys:
                self._names.setdefault(key, names.get(key[1], identity.GpuName("")))

    # -- the profile's hooks (gpuutil.profile(on_step=metrics)) ----------
    def on_profile_start(self, prof: Any) -> None:
        """The profile started: its job id (unless one was given here) and
        rank; ``gpuutil_gpu_info`` is exported from now on."""
        with self._lock:
            if not self._own_job_id and getattr(prof, "job_id", None):
                self.job_id = str(prof.job_id)
            self._rank = int(getattr(prof, "rank", 0))
            self._live = True
            self._attached_since = time.monotonic()
            self._attached_before_s = self._attached_before_s or 0.0

    def on_profile_stop(self, prof: Any) -> None:
        """The profile stopped: its GPUs are no longer attached to a running job."""
        with self._lock:
            self._live = False
            if self._attached_since is not None:
                self._attached_before_s = (self._attached_before_s or 0.0) + time.monotonic() - self._attached_since
                self._attached_since = None

    def _attached_s(self) -> Optional[float]:
        """Seconds a profile of this process has run (None: never attached)."""
        if self._attached_before_s is None:
            return None
        running = time.monotonic() - self._attached_since if self._attached_since is not None else 0.0
        return self._attached_before_s + running

    def count(self, samples: float = 0, tokens: float = 0, useful_steps: float = 0,
              rank: Optional[int] = None) -> None:
        """Adds user units to their counters (``gpuutil_samples_total``,
        ``gpuutil_tokens_total``, ``gpuutil_useful_steps_total``), for
        ``rank`` (default: the profile's, else ``RANK``, else 0). Count the
        rank's own samples (its local batch): the rules sum over ranks.
        A unit never counted has no series (the rules take quality as 1)."""
        values = {"samples": samples, "tokens": tokens, "useful_steps": useful_steps}
        for unit, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == float("inf"):
                raise ValueError(f"{unit} must be a finite number >= 0, not {v!r}")
        with self._lock:
            if rank is None:
                rank = self._rank if self._rank is not None else _env_rank()
            for unit, v in values.items():
                if v:
                    self._units[(int(rank), unit)] = self._units.get((int(rank), unit), 0.0) + float(v)

    __call__ = add  # gpuutil.profile(on_step=metrics) also gets on_cluster

    def on_cluster(self, record: Dict[str, Any]) -> None:
        """The live profile's hook for the leader's ``gpuutil.cluster/1`` records."""
        self.add(record)

    def _set_cluster(self, record: Dict[str, Any], reporter: int) -> None:
        view = cluster_view(record)
        if view is None:
            return
        with self._lock:
            self._cluster = dict(view, reporter=reporter)

    def add_all(self: _T, reports: Iterable[Dict[str, Any]]) -> _T:
        for r in reports:
            self.add(r)
        return self

    def families(self) -> List[Family]:
        """The metric families, each ``(name, kind, help, [(labels, value)])``
        with ``labels`` an ordered dict of label values and the HELP text's
        scope ("[whole run]", "[last step]", ...) included; families without
        samples are left out. What gpuutil.export.prometheus's collector
        yields."""
        with self._lock:
            return [(name, kind, f"{help_} [{_scope(name, kind)}]", samples)
                    for name, kind, help_, samples in self._families() if samples]

    # -- families -------------------------------------------------------
    def _labels(self, rank: int, device: Optional[int] = None, host: Optional[str] = None,
                **extra: str) -> Dict[str, str]:
        labels = {"job_id": self.job_id, "rank": str(rank), "host": self.host if host is None else host}
        if device is not None:
            labels["device"] = str(device)
            labels["UUID"] = self._names.get((rank, device), identity.GpuName("")).uuid
        labels.update(extra)
        return labels

    def _families(self) -> List[Family]:
        out: List[Family] = []

        def family(name: str, kind: str, help_: str, samples: List[Tuple[Dict[str, str], float]]) -> None:
            out.append((name, kind, help_, samples))

        family("gpuutil_steps_total", "counter", "training steps reported",
               [(self._labels(r), float(n)) for r, n in sorted(self._steps.items())])
        family("gpuutil_last_step_wall_seconds", "gauge", "wall time of the last reported step",
               [(self._labels(r), v) for r, v in sorted(self._last_step_wall_s.items())])
        devs = sorted(self._dev.items())
        family("gpuutil_step_wall_seconds_total", "counter", "step wall time accounted on the device",
               [(self._labels(r, d), t["wall_ns"] / 1e9) for (r, d), t in devs])
        family("gpuutil_busy_seconds_total", "counter", "time the device had work (union of all streams)",
               [(self._labels(r, d), t["busy_ns"] / 1e9) for (r, d), t in devs])
        family("gpuutil_time_seconds_total", "counter",
               "step wall time by bucket (compute, communication, memory, idle_<cause>); sums to step wall",
               [(self._labels(r, d, bucket=b), t[b] / 1e9) for (r, d), t in devs for b in _BUCKETS])
        family("gpuutil_busy_ratio", "gauge", "busy share of step wall",
               [(self._labels(r, d), t["busy_ns"] / t["wall_ns"]) for (r, d), t in devs if t["wall_ns"] > 0])
        family("gpuutil_kernels_total", "counter", "kernels started in steps",
               [(self._labels(r, d), float(t["kernels"])) for (r, d), t in devs])
        family("gpuutil_flops_total", "counter", "model FLOPs of the steps on the device (MFU = rate / peak)",
               [(self._labels(r, d), t["flops"]) for (r, d), t in devs if "flops" in t])
        family("gpuutil_peak_flops", "gauge", "peak dense FLOP/s of the device at the run's dtype",
               [(self._labels(r, d), t["peak_flops"]) for (r, d), t in devs if "peak_flops" in t])
        attached_s = self._attached_s()
        if attached_s is not None:
            family("gpuutil_gpu_attached_seconds_total", "counter",
                   "time a profile of this job ran on the GPU (from the profile's start; the GPU time it held)",
                   [(self._labels(r, d), attached_s) for (r, d), _ in devs])
        if self._live:
            family("gpuutil_gpu_info", "gauge", "1 for each GPU a running profile of this job is attached to",
                   [(self._labels(r, d, parent_UUID=self._names.get((r, d), identity.GpuName("")).parent_uuid),
                     1.0) for (r, d), _ in devs])
        for unit, (name, help_) in UNITS.items():
            family(name, "counter", help_, [(self._labels(r), v) for (r, u), v in sorted(self._units.items())
                                            if u == unit])
        for key, name, help_ in (("mfu", "gpuutil_mfu_ratio", "model FLOP/s utilisation"),
                                 ("sm_efficiency_est", "gpuutil_sm_efficiency_ratio",
                                  "estimated SM efficiency"),
                                 ("achieved_occupancy_est", "gpuutil_achieved_occupancy_ratio",
                                  "estimated achieved occupancy")):
            family(name, "gauge", help_, [(self._labels(r, d), t[key]) for (r, d), t in devs if key in t])
        for hkey, name, help_, kind in _HEALTH:
            if kind.startswith("counter"):
                scale = 1e-9 if kind == "counter_ns" else 1.0
                family(name, "counter", help_, [(self._labels(r, d), t["counters"][hkey] * scale)
                                                for (r, d), t in devs if hkey in t["counters"]])
            else:
                scale = 0.01 if kind == "ratio" else 1.0
                family(name, "gauge", help_, [(self._labels(r, d), t["health"][hkey] * scale)
                                              for (r, d), t in devs if hkey in t["health"]])
        family("gpuutil_finding_recoverable_seconds_total", "counter",
               "time a finding's fix could recover (summed over reports)",
               [(self._labels(r, finding=f), v) for (r, f), v in sorted(self._findings.items())])
        if self._cluster is not None:
            out.extend(self._cluster_families(self._cluster))
        return out

    def _cluster_families(self, view: Dict[str, Any]) -> List[Family]:
        """(name, kind, help, samples) of the cross-rank view's series."""
        ranks = sorted(view["ranks"], key=lambda r: int(r["rank"]))
        hosts = {int(r["rank"]): str(r.get("host") or "") for r in ranks}
        fams = []
        for key, name, help_, kind, div in _RANK:
            fams.append((name, kind, help_, [(self._labels(int(r["rank"]), host=hosts[int(r["rank"])]),
                                              float(r[key]) / div) for r in ranks if r.get(key) is not None]))
        fams.append(("gpuutil_straggler", "gauge", "1 for each rank a straggler finding names, with its cause",
                     [(self._labels(int(f["rank"]), host=str(f.get("host") or hosts.get(int(f["rank"]), "")),
                                    cause=str(f.get("cause") or "")), 1.0)
                      for f in sorted(stragglers(view["findings"]), key=lambda f: int(f["rank"]))]))
        cluster, me = view["cluster"], self._labels(view["reporter"])
        if cluster.get("world_size") is not None:
            fams.append(("gpuutil_cluster_world_size", "gauge", "ranks in the job, as the reporting rank sees it",
                         [(me, float(cluster["world_size"]))]))
        for key in ("missing_ranks", "short_ranks", "lost_ranks"):
            if key in cluster:
                fams.append((f"gpuutil_cluster_{key}", "gauge", f"number of {key.replace('_', ' ')} in the view",
                             [(me, float(len(cluster[key] or [])))]))
        if cluster.get("collective_mismatches") is not None:
            fams.append(("gpuutil_cluster_collective_mismatches", "gauge",
                         "collective instances one rank had and another did not",
                         [(me, float(cluster["collective_mismatches"]))]))
        return fams



def _env_rank() -> int:
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0
