#!/usr/bin/env python3
"""GPU check of the live path: plants stalls of known size on a real GPU and
compares what gpuutil reports with them.

On the GPU machine, one command (docs/live-collection.md, "GPU check"):

    bash scripts/gpu_check.sh          # builds there, offline, then runs this; results in $OUT

which runs ``python3 benchmarks/gpu_check.py --out "$OUT"`` after the build.
Here, on a CPU machine, the same script runs end to end against the fake
CUPTI (and its simulated device) and is part of the tests:

    python benchmarks/gpu_check.py --self-test

First, before any scenario, ``gpu_check_probe`` (benchmarks/gpu_check_probe.cpp,
a process of its own) reports which behaviour this CUPTI shows for each row
of the fake CUPTI's matrix (sealing on a default flush, record placement,
per-thread or global buffers, API record at the call or its exit, timestamp
skew, held empty buffers, how soon records come back, callback names, graph
correlation in a second activity session, and what issue 36's collector
relies on: valid record times, held buffers' heads, stream ids from the
creation callback, what a re-registered clock does); its table is printed and kept in
gpu_check.json under "probe". In --self-test it runs on the fake and must
report the cell the fake was configured with (GPUUTIL_FAKE_CUPTI_MATRIX).

Scenarios, ordered by what they teach, each with its planted size, gpuutil's
figure and a tolerance:
 0. coverage    which callback ids torch's launches fire (CUDA 13's <<<>>> is
                __cudaLaunchKernel), driver calls nested in runtime ones,
                every kernel's launch learnt, valid times, nothing missing;
 1. pipelined   a never-idle pipelined loop: no sync, GPU saturated for
                >= 5 s, two launches per step, the host up to ~4 s ahead:
                compute = wall (+-2%) in every step, 0 late records, 0
                completion timeouts, 0 incomplete steps;
 2. long_kernel one 2.6 s kernel (longer than the old 2 s bound) running
                through five 0.5 s steps: its time is compute in each, 0 late,
                0 timeouts, 0 incomplete;
 3. profiler_thread  torch.profiler started and stopped on another thread
                while gpuutil profiles: it keeps its kernels; gpuutil's steps
                in between are collected or marked off, never zero activity
                without a reason, and collected again after it;
 4. dataloader  a real DataLoader (num_workers=0) sleeping 20 ms per batch,
                pipelined (no per-step sync): idle_dataloader per step,
                within 3 ms of the batch's sleeps as timed;
 5. item        .item() every step, then 5 ms of CPU: idle_host_sync with
                the aten::item culprit;
 6. tiny        5000 tiny kernels per step: every kernel counted, launch-bound,
                overhead compared with torch.profiler's;
 7. matmul      a bf16 matmul loop: MFU against torch-timed TFLOP/s;
 8. compile     torch.compile (Triton, driver-API launches): launch_unmatched 0;
 9. graph       a CUDA graph replayed across step boundaries: every kernel;
10. profiler    torch.profiler inside a gpuutil profile, before it, and after
                it: both keep their kernels, the suspension is reported,
                and whether Kineto kept CUPTI's subscription after it;
11. nccl        NCCL with world size 1: informational (an in-place SUM
                all_reduce on one rank may launch no kernel), records clean;
12. nvml        NVML health present and joined to the right device (UUID);
13. driver      torch-free C++ (benchmarks/gpu_check_driver.cpp): driver API
                and a JIT-compiled PTX kernel, planted host gap (5 ms usleep,
                checked against its timed length: -3%..+1.5 ms), on the
                libcupti the Python side loaded (--cupti-library).
Every scenario also requires zero dropped, late, unfinished or invalid
records. In --self-test, scenarios that need the hardware (matmul MFU,
torch.compile, NVML) are marked SKIP with the reason. --cxx-only runs the
probe and the driver scenario alone, without importing gpuutil or torch
(scripts/gpu_check.sh uses it when the Python headers are missing and the
Python module cannot be built). Scenarios left when --deadline-s has passed
are SKIPped with that reason (scripts/gpu_check.sh sets it so the whole run,
build included, ends within 240 s).

It prints one line per check as it goes and a table last, writes
gpu_check.json to --out (default: $OUT, else build/gpu_check), and exits 1
if any check failed (2 when it could not run at all). It reads the device
name through torch and never changes clocks, power limits or MIG.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]

#: Diagnostics that mean a record was lost, late or unusable.
BAD_DIAGNOSTICS = (
    "cupti_records_dropped",
    "cupti_records_late",
    "cupti_buffer_starved",
    "cupti_buffer_invalid",
    "cupti_timestamp_invalid",
    "cupti_completion_timeout",
    "cupti_record_missing",
    "cupti_clock_mismatch",
    "cupti_foreign_buffers",
    "session_events_dropped",
    "torch_ranges_dropped",
    "nvtx_records_dropped",
)


# ---------------------------------------------------------------- results


class Checks:
    """The rows of the result table."""

    def __init__(self) -> None:
        self.rows: List[Dict[str, Any]] = []

    def add(self, scenario: str, check: str, planted: str, measured: str, tolerance: str, ok: Optional[bool],
            note: str = "") -> None:
        status = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
        row = dict(scenario=scenario, check=check, planted=planted, measured=measured, tolerance=tolerance,
                   result=status, note=note)
        self.rows.append(row)
        print(f"[gpu_check] {scenario}: {check}: planted {planted}, measured {measured} ({tolerance}) -> {status}"
              + (f" [{note}]" if note else ""), flush=True)

    def info(self, scenario: str, check: str, measured: str, note: str = "") -> None:
        self.rows.append(dict(scenario=scenario, check=check, planted="-", measured=measured, tolerance="-",
                              result="INFO", note=note))
        print(f"[gpu_check] {scenario}: {check}: {measured}" + (f" [{note}]" if note else ""), flush=True)

    def failed(self) -> bool:
        return any(r["result"] == "FAIL" for r in self.rows)

    def table(self) -> str:
        cols = ("scenario", "check", "planted", "measured", "tolerance", "result")
        width = {c: max(len(c), *(len(str(r[c])) for r in self.rows)) for c in cols} if self.rows else {}
        lines = ["| " + " | ".join(c.ljust(width[c]) for c in cols) + " |",
                 "|" + "|".join("-" * (width[c] + 2) for c in cols) + "|"]
        for r in self.rows:
            lines.append("| " + " | ".join(str(r[c]).ljust(width[c]) for c in cols) + " |")
        return "\n".join(lines)


def devices_of(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    return report["steps"][0]["devices"] if report["steps"] else []


def device0(report: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    d = devices_of(report)
    return d[0] if d else None


def diagnostics(reports: List[Dict[str, Any]]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for r in reports:
        for d in r["diagnostics"]:
            out[d["name"]] = out.get(d["name"], 0) + int(d["count"])
    return out


def median(xs: List[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def check_clean(checks: Checks, scenario: str, reports: List[Dict[str, Any]], checked: tuple = ()) -> None:
    """Nothing dropped, late, unfinished or invalid; GPU collection on.
    `checked`: diagnostics a row of the scenario already checked."""
    diags = diagnostics(reports)
    bad = {k: v for k, v in diags.items() if k in BAD_DIAGNOSTICS and k not in checked}
    checks.add(scenario, "records lost/late/invalid", "0", json.dumps(bad) if bad else "0", "exact", not bad)
    off = [d["example"] for r in reports[:1] for d in r["diagnostics"] if d["name"] == "gpu_collection_off"]
    checks.add(scenario, "GPU collection on", "yes", "yes" if not off else f"off: {off[0]}", "-", not off)


def incomplete_steps(reports: List[Dict[str, Any]]) -> int:
    """Steps reported `complete: false` (their device records never all came)."""
    return sum(1 for r in reports for st in r["steps"] if st.get("complete") is False)


def check_completeness(c: Checks, scenario: str, reports: List[Dict[str, Any]]) -> None:
    """The three counts a step that waited for slow work must keep at zero."""
    diags = diagnostics(reports)
    for diag, what in (("cupti_records_late", "late records"), ("cupti_completion_timeout", "completion timeouts")):
        c.add(scenario, what, "0", str(diags.get(diag, 0)), "exact", diags.get(diag, 0) == 0)
    n = incomplete_steps(reports)
    c.add(scenario, "incomplete steps", "0", str(n), "exact", n == 0)


def synced_step(prof: Any, g: Any) -> None:
    """One step of 2 ms of GPU work, waited for."""
    with prof.step():
        g.gpu_ms(2.0)
        g.synchronize()


def profiler_kernels(g: Any, torch: Any, tp: Any, kineto: Dict[str, int]) -> int:
    """Kernels torch.profiler kept (--self-test: what the fake's second client got)."""
    if g.simulated:
        return kineto.get("kernels", 0)
    return sum(1 for e in tp.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def share(r: Dict[str, Any], bucket: str = "compute") -> float:
    d = device0(r)
    return d["breakdown_ns"][bucket] / d["wall_ns"] if d and d["wall_ns"] else 0.0


# ---------------------------------------------------------------- backends


class RealGpu:
    """The workload on the GPU through torch."""

    simulated = False

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.dev = torch.device("cuda")
        n = 4096
        self.a = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16)
        self.small = torch.zeros(16, device=self.dev)

    def gpu_ms(self, ms: float) -> Any:
        """About `ms` of matmuls (bf16 4096^3 is ~0.17 ms on an H200)."""
        y = None
        for _ in range(max(1, int(ms / 0.17))):
            y = self.torch.mm(self.a, self.b)
        return y

    def tiny(self, n: int) -> None:
        for _ in range(n):
            self.small.add_(1)

    def heavy(self, ms: float) -> int:
        """About `ms` of GPU work in few launches: 16384^3 bf16 matmuls
        (~11 ms each on an H200), timed once. Returns the launches made."""
        if getattr(self, "big", None) is None:
            n = 16384
            self.big = [self.torch.randn(n, n, device=self.dev, dtype=self.torch.bfloat16) for _ in range(3)]
            self.torch.mm(self.big[0], self.big[1], out=self.big[2])
            e0, e1 = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            e0.record()
            self.torch.mm(self.big[0], self.big[1], out=self.big[2])
            e1.record()
            self.torch.cuda.synchronize()
            self.mm_ms = max(0.05, e0.elapsed_time(e1))
        k = max(1, round(ms / self.mm_ms))
        for _ in range(k):
            self.torch.mm(self.big[0], self.big[1], out=self.big[2])
        return k

    def long_kernel(self, ms: float) -> Callable[[], float]:
        """One kernel of about `ms` (torch.cuda._sleep, its cycles per ms
        timed once); returns what tells its real length (ms) after a sync."""
        if getattr(self, "cycles_per_ms", None) is None:
            e0, e1 = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            self.torch.cuda._sleep(1_000_000)
            e0.record()
            self.torch.cuda._sleep(50_000_000)
            e1.record()
            self.torch.cuda.synchronize()
            self.cycles_per_ms = 50_000_000 / max(1e-3, e0.elapsed_time(e1))
        e0, e1 = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        e0.record()
        self.torch.cuda._sleep(int(ms * self.cycles_per_ms))
        e1.record()
        return lambda: e0.elapsed_time(e1)

    def item(self, y: Any) -> float:
        return float(y[0, 0].item())

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def nccl(self, t: Any) -> None:
        self.torch.distributed.all_reduce(t)


class FakeGpu:
    """The same workload on the fake CUPTI's simulated device (--self-test):
    its kernels are simulated, launched through the fake from this thread."""

    simulated = True

    class Work(ctypes.Structure):
        _fields_ = [("kind", ctypes.c_int), ("name", ctypes.c_char_p), ("device", ctypes.c_uint32),
                    ("stream", ctypes.c_uint32), ("start_ns", ctypes.c_int64), ("end_ns", ctypes.c_int64),
                    ("duration_ns", ctypes.c_int64), ("latency_ns", ctypes.c_int64),
                    ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                    ("registers_per_thread", ctypes.c_uint32), ("shared_memory_bytes", ctypes.c_uint32),
                    ("bytes", ctypes.c_uint64), ("copy_kind", ctypes.c_uint8), ("src_kind", ctypes.c_uint8),
                    ("dst_kind", ctypes.c_uint8), ("graph_id", ctypes.c_uint32)]

    class Call(ctypes.Structure):
        _fields_ = [("domain", ctypes.c_int), ("cbid", ctypes.c_uint32), ("start_ns", ctypes.c_int64),
                    ("end_ns", ctypes.c_int64), ("api_ns", ctypes.c_int64), ("captured", ctypes.c_int),
                    ("sync", ctypes.c_int), ("sync_device", ctypes.c_uint32), ("sync_stream", ctypes.c_uint32),
                    ("work", ctypes.c_void_p), ("n_work", ctypes.c_int), ("current_device", ctypes.c_int)]

    def __init__(self, torch: Any, lib: str) -> None:
        self.torch = torch
        self.fake = ctypes.CDLL(lib)
        self.fake.fake_cupti_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int64,
                                                       ctypes.c_int64]
        self.fake.fake_cupti_cbid.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
        self.fake.fake_cupti_cbid.restype = ctypes.c_uint32
        self.fake.fake_cupti_call_api.restype = ctypes.c_uint32

    def cbid(self, name: str) -> "tuple[int, int]":
        domain = ctypes.c_int(0)
        return self.fake.fake_cupti_cbid(name.encode(), ctypes.byref(domain)), domain.value

    def call(self, api: str, works: List["FakeGpu.Work"], sync: int = 0) -> int:
        cbid, domain = self.cbid(api)
        arr = (FakeGpu.Work * max(1, len(works)))(*works)
        c = FakeGpu.Call(domain=domain, cbid=cbid, api_ns=3000, sync=sync, work=ctypes.cast(arr, ctypes.c_void_p),
                         n_work=len(works))
        return self.fake.fake_cupti_call_api(ctypes.byref(c))

    def kernel(self, name: bytes, ns: int, stream: int = 7, graph_id: int = 0) -> "FakeGpu.Work":
        w = FakeGpu.Work(kind=0, name=name, stream=stream, duration_ns=ns, latency_ns=4000, graph_id=graph_id)
        w.grid[0], w.block[0] = 132, 256
        return w

    def gpu_ms(self, ms: float) -> Any:
        for _ in range(4):
            self.fake.fake_cupti_launch_kernel(b"sm90_xmma_gemm_bf16bf16_bf16f32", 7, int(ms * 1e6 / 4), 4000)
        return None

    def tiny(self, n: int) -> None:
        for _ in range(n):
            self.fake.fake_cupti_launch_kernel(b"vectorized_elementwise_kernel", 7, 300, 4000)

    def heavy(self, ms: float) -> int:
        for _ in range(2):
            self.fake.fake_cupti_launch_kernel(b"sm90_xmma_gemm_bf16bf16_bf16f32", 7, int(ms * 1e6 / 2), 4000)
        return 2

    def long_kernel(self, ms: float) -> Callable[[], float]:
        self.fake.fake_cupti_launch_kernel(b"spin_kernel", 7, int(ms * 1e6), 4000)
        return lambda: ms

    # gpuutil sees PyTorch's own aten::item range from its detail tier
    # (FUNCTION scope; a stand-in USER_SCOPE range here), so the item
    # scenario collects detail on every step with this device. A real
    # .item() is timed on every step by the Tensor.item wrapper instead.
    item_detail = "always"

    def item(self, y: Any) -> float:
        # What .item() of a device tensor is: PyTorch's aten::item range
        # around a copy that waits for the device.
        with self.torch.autograd.profiler.record_function("aten::item"):
            self.call("cudaMemcpyAsync", [], sync=2)
            self.fake.fake_cupti_device_synchronize()
        return 0.0

    def synchronize(self) -> None:
        self.call("cudaDeviceSynchronize", [], sync=1)

    def nccl(self, t: Any) -> None:
        self.fake.fake_cupti_launch_kernel(b"ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 3_000_000, 4000)


def busy_wait(seconds: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass


# ---------------------------------------------------------------- scenarios


def cupti_collector(prof: Any) -> Any:
    return next((x for x in prof._collectors if x.name == "cupti"), None)


def scenario_coverage(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    """Which CUPTI callback ids the workload's launches fire (a torch
    elementwise op is a CUDA 13 <<<>>> launch, __cudaLaunchKernel; a matmul
    is cuBLAS's), whether driver calls come nested inside runtime ones, and
    whether every kernel of the steps had its launch learnt and a valid
    record (issue 36, items 1 and 3)."""
    name = "coverage"
    g.gpu_ms(1.0)
    g.tiny(4)
    g.synchronize()
    with gpuutil.profile(report_interval_ms=0) as prof:
        col = cupti_collector(prof)
        for _ in range(max(2, steps // 2)):
            with prof.step():
                g.tiny(16)
                g.gpu_ms(1.0)
                g.synchronize()
    reports = list(prof.reports)
    if col is None:
        c.add(name, "CUPTI collector", "running", "not running", "-", False)
        return
    calls = col.learnt_calls()
    k = col.counters()
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
    c.info(name, "callback ids the launches fired (learnt at API exit)", ", ".join(f"{n}: {v}" for n, v in top) or "none",
           "a launch id missing here would have its kernels unwaited for")
    launches = sum(v for n, v in calls.items() if "Launch" in n)
    c.add(name, "launches learnt at API exit", "> 0", str(launches), "> 0", launches > 0)
    c.info(name, "driver calls nested in runtime calls", str(k.get("nested_calls", 0)),
           "> 0: CUPTI reports the runtime's internal driver calls too (one record completes both)")
    d = diagnostics(reports)
    c.add(name, "kernels without a learnt launch (launch_unmatched)", "0", str(d.get("launch_unmatched", 0)), "exact",
          d.get("launch_unmatched", 0) == 0)
    c.add(name, "records with zero or reversed times", "0", str(d.get("cupti_timestamp_invalid", 0)), "exact",
          d.get("cupti_timestamp_invalid", 0) == 0)
    c.add(name, "records missing / on another clock", "0 / 0",
          f"{d.get('cupti_record_missing', 0)} / {d.get('cupti_clock_mismatch', 0)}", "exact",
          d.get("cupti_record_missing", 0) == 0 and d.get("cupti_clock_mismatch", 0) == 0)
    regs = k.get("timestamp_registrations", 0)
    c.add(name, "gpuutil's clock registrations in this process", "<= 1", str(regs), "exact", regs <= 1)
    check_completeness(c, name, reports)
    check_clean(c, name, reports, checked=("launch_unmatched", "cupti_timestamp_invalid", "cupti_record_missing",
                                           "cupti_clock_mismatch"))


def scenario_pipelined(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    """What a saturated training loop looks like: the host never waits, the
    GPU never idles, and the host runs seconds ahead (further than the old
    2 s completion bound), so a step's records come seconds after its end."""
    name = "pipelined"
    step_gpu_ms, host_ms, gpu_total_s = 20.0, 5.0, 5.2
    n = int(gpu_total_s * 1000 / step_gpu_ms)
    g.heavy(step_gpu_ms)  # warm-up (and, on a GPU, the matmul timed once)
    g.synchronize()
    launches = 0
    t0 = time.perf_counter()
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(n):
            with prof.step():
                launches += g.heavy(step_gpu_ms)
                busy_wait(host_ms / 1e3)  # the host's own work: steps of real width
        host_s = time.perf_counter() - t0
        g.synchronize()
        gpu_s = time.perf_counter() - t0
    reports = list(prof.reports)[2:]
    shares = [share(r) for r in reports if device0(r)]
    off = [i + 2 for i, x in enumerate(shares) if abs(x - 1.0) > 0.02]
    c.info(name, "GPU busy / host loop / launches per step", f"{gpu_s:.1f} s / {host_s:.1f} s / {launches / n:.0f}",
           f"the host ended up to {max(0.0, gpu_s - host_s):.1f} s ahead of the GPU")
    c.add(name, "compute / wall, every step", f"100% ({len(reports)} steps)",
          f"min {100 * min(shares, default=0):.1f}%, max {100 * max(shares, default=0):.1f}%; {len(off)} off",
          "+-2%", bool(shares) and not off and len(shares) == len(reports),
          f"steps off: {off[:8]}" if off else "")
    check_completeness(c, name, reports)
    check_clean(c, name, reports, checked=("cupti_records_late", "cupti_completion_timeout"))


def scenario_long_kernel(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    """One kernel longer than the old 2 s bound, inside a step: its launch
    waits 2.6 s for its record while the GPU demonstrably works."""
    name = "long_kernel"
    kernel_ms, step_s, inside = 2600.0, 0.5, 5
    with gpuutil.profile(report_interval_ms=0) as prof:
        with prof.step():
            g.gpu_ms(1.0)
            g.synchronize()
        for i in range(inside):
            with prof.step():
                if i == 0:
                    measured = g.long_kernel(kernel_ms)
                time.sleep(step_s)
        with prof.step():
            g.synchronize()
    kernel = measured()
    reports = list(prof.reports)
    compute_ms = sum(device0(r)["breakdown_ns"]["compute"] / 1e6 for r in reports[1:] if device0(r))
    c.add(name, "its compute over the steps", f"{kernel:.0f} ms (one kernel, timed)", f"{compute_ms:.0f} ms", "+-2%",
          abs(compute_ms - kernel) <= 0.02 * kernel)
    shares = [share(r) for r in reports[2:1 + inside]]
    c.add(name, "compute / wall, steps inside the kernel", f"100% ({inside - 1} steps)",
          ", ".join(f"{100 * x:.1f}%" for x in shares), ">= 98%", len(shares) == inside - 1 and min(shares) >= 0.98)
    check_completeness(c, name, reports)
    stuck = sorted({f["id"] for r in reports for f in r.get("findings", []) if "stuck" in f["id"]})
    c.info(name, "'stuck' findings on a kernel that progressed", ", ".join(stuck) or "none")
    check_clean(c, name, reports, checked=("cupti_records_late", "cupti_completion_timeout"))


def scenario_profiler_thread(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    """torch.profiler (Kineto) started and stopped on another thread: the
    profiler state torch._C._autograd._profiler_enabled() reads is
    thread-local, so a step boundary on the training thread sees none while
    it traces. The guard's class patches see it enter and exit on any
    thread; the steps in between say gpu_collection_suspended (or, for a
    client no Python entry point shows, cupti_taken_over), it keeps its
    kernels, and gpuutil collects again after it."""
    import threading

    from torch.profiler import ProfilerActivity, profile

    name = "profiler_thread"
    activities = [ProfilerActivity.CPU] + ([] if g.simulated else [ProfilerActivity.CUDA])
    kineto: Dict[str, int] = {}
    if g.simulated:
        kineto_like(g, torch, kineto)
    started, stop = threading.Event(), threading.Event()
    theirs: Dict[str, int] = {}
    errors: List[str] = []

    def other() -> None:
        try:
            with profile(activities=activities) as tp:
                started.set()
                stop.wait(60)
            theirs["kernels"] = profiler_kernels(g, torch, tp, kineto)
        except Exception as e:  # noqa: BLE001 - reported as the check's result
            errors.append(f"{type(e).__name__}: {e}")
            started.set()

    with gpuutil.profile(report_interval_ms=0) as prof:
        synced_step(prof, g)
        synced_step(prof, g)
        th = threading.Thread(target=other, name="on-demand-profiler")
        th.start()
        started.wait(60)
        for _ in range(3):
            synced_step(prof, g)
        stop.set()
        th.join(60)
        for _ in range(3):
            synced_step(prof, g)
    reports = list(prof.reports)
    c.add(name, "torch.profiler on another thread: its kernels", "> 0",
          str(theirs.get("kernels", 0)) + (f" ({errors[0]})" if errors else ""), "> 0", theirs.get("kernels", 0) > 0)
    flagged = ("gpu_collection_off", "gpu_collection_suspended", "cupti_taken_over")

    def state(r: Dict[str, Any]) -> str:
        names = {d["name"] for d in r["diagnostics"]}
        why = [f for f in flagged if f in names]
        return why[0] if why else f"{device0(r)['kernels'] if device0(r) else 0} kernels"

    during, after = [state(r) for r in reports[2:5]], [state(r) for r in reports[5:8]]
    c.add(name, "steps while it traces: collected or marked off", "kernels > 0 or a reason", "; ".join(during),
          "every step", len(during) == 3 and all(x != "0 kernels" for x in during),
          "zero activity with no reason would be reported as an idle GPU")
    c.add(name, "steps after it stopped: collected", "> 0 kernels", "; ".join(after), "every step",
          len(after) == 3 and all(x.endswith("kernels") and x != "0 kernels" for x in after))
    check_clean(c, name, reports)


def scenario_dataloader(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "dataloader"

    waited: List[float] = []  # each sample's sleep as it really lasted (a loaded host oversleeps)

    class Slow(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 1 << 20

        def __getitem__(self, i: int) -> Any:
            t = time.perf_counter()
            time.sleep(0.005)  # 4 samples a batch: 20 ms per batch
            waited.append(time.perf_counter() - t)
            return torch.randn(256)

    loader = torch.utils.data.DataLoader(Slow(), batch_size=4, num_workers=0)
    device = "cpu" if g.simulated else "cuda"
    model = torch.nn.Linear(256, 256).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuutil.profile(report_interval_ms=0) as prof:  # steps from optimizer.step(): no prof.step()
        for _, x in zip(range(steps + 2), loader):
            loss = model(x.to(device)).square().mean()
            loss.backward()
            g.gpu_ms(1.0)
            opt.step()
            opt.zero_grad()
    reports = list(prof.reports)[2:]
    dl = median([device0(r)["breakdown_ns"]["idle_dataloader"] / 1e6 for r in reports if device0(r)])
    batches = [1e3 * sum(waited[i:i + 4]) for i in range(0, len(waited) - 3, 4)][2:]
    planted = median(batches) if batches else 20.0
    c.add(name, "idle_dataloader per step (median)", f"{planted:.2f} ms (4 x 5 ms sleeps, timed)", f"{dl:.2f} ms",
          "+-3 ms", planted - 3.0 <= dl <= planted + 3.0,
          "the batch's sleeps as timed plus the DataLoader's own work, minus the GPU's tail")
    check_clean(c, name, reports)


def scenario_item(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "item"
    with gpuutil.profile(report_interval_ms=0, detail=getattr(g, "item_detail", "sampled")) as prof:
        for _ in range(steps + 2):
            with prof.step():
                y = g.gpu_ms(8.0)
                g.item(y)
                busy_wait(0.005)  # 5 ms of CPU after the sync: the GPU is drained
                g.gpu_ms(0.5)
    reports = list(prof.reports)[2:]
    # Host sync lasts while the host is blocked (docs/accounting.md, issue
    # 37): the 5 ms of CPU work after the sync is host time, not host sync.
    hs = median([device0(r)["breakdown_ns"]["idle_host_sync"] / 1e6 for r in reports if device0(r)])
    host = median([device0(r)["breakdown_ns"]["idle_host"] / 1e6 for r in reports if device0(r)])
    c.add(name, "idle_host per step (median)", ">= 5.0 ms (the CPU work after the sync)", f"{host:.2f} ms",
          ">= 4.5 ms", host >= 4.5)
    c.add(name, "idle_host_sync per step (median)", "the blocked time only (< 5 ms)", f"{hs:.2f} ms", "< 4.5 ms",
          hs < 4.5)
    culprits = [device0(r)["culprits"]["host_sync"][0]["name"] for r in reports
                if device0(r) and device0(r)["culprits"]["host_sync"]]
    top = max(set(culprits), key=culprits.count) if culprits else "(none)"
    c.add(name, "host_sync culprit", "aten::item", top, "exact", top == "aten::item")
    check_clean(c, name, reports)


def contiguous_steps(gpuutil: Any, torch: Any, steps: int, body: Callable[[int], None]) -> List[Dict[str, Any]]:
    """Steps that tile time (ended by optimizer.step(), as in training), so
    every kernel starts inside some step: counts can be exact."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.0)
    with gpuutil.profile(report_interval_ms=0) as prof:
        for s in range(steps):
            body(s)
            opt.step()
    return list(prof.reports)


def timed_steps(work: Callable[[], None], steps: int, wrap: Callable[[], Any], marker: Optional[str]) -> float:
    """Seconds per step of `work` under the context `wrap()`."""
    with wrap() as p:
        work()
        t = time.perf_counter()
        for _ in range(steps):
            if marker == "gpuutil":
                with p.step():
                    work()
            else:
                work()
                if marker == "torch":
                    p.step()
        return (time.perf_counter() - t) / steps


def scenario_tiny(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "tiny"
    n = 5000
    g.tiny(n)
    g.synchronize()
    def body(s: int) -> None:
        g.tiny(n)
        if s == steps - 1:
            g.synchronize()  # the last step holds every kernel launched

    reports = contiguous_steps(gpuutil, torch, steps, body)
    total = sum(device0(r)["kernels"] for r in reports if device0(r))
    c.add(name, "kernels counted", str(n * steps), str(total), "exact", total == n * steps)
    share = median([(device0(r)["breakdown_ns"]["idle_launch"] + device0(r)["breakdown_ns"]["idle_host"])
                    / device0(r)["wall_ns"] for r in reports if device0(r)])
    c.add(name, "launch+host idle share (median)", "launch-bound", f"{100 * share:.0f}%", "> 50%", share > 0.5)
    check_clean(c, name, reports)
    # Overhead, interleaved rounds: none, gpuutil, torch.profiler.
    from torch.profiler import ProfilerActivity, profile

    def work() -> None:
        g.tiny(n)
        g.synchronize()

    activities = [ProfilerActivity.CPU] + ([] if g.simulated else [ProfilerActivity.CUDA])
    runs: Dict[str, List[float]] = {"none": [], "gpuutil": [], "torch.profiler": []}
    for _ in range(3):
        runs["none"].append(timed_steps(work, 4, contextlib.nullcontext, None))
        runs["gpuutil"].append(timed_steps(work, 4, lambda: gpuutil.profile(report_interval_ms=0), "gpuutil"))
        runs["torch.profiler"].append(timed_steps(work, 4, lambda: profile(activities=activities), "torch"))
    base = median(runs["none"])
    ours = 100 * (median(runs["gpuutil"]) / base - 1)
    theirs = 100 * (median(runs["torch.profiler"]) / base - 1)
    measured = f"gpuutil {ours:+.1f}%, torch.profiler {theirs:+.1f}%"
    if g.simulated:
        c.info(name, "overhead vs no profiler", measured,
               "simulated kernels: the fake's own record writing is most of it; torch.profiler does not see them")
    else:
        c.add(name, "overhead vs torch.profiler", "lower", measured, "gpuutil < torch.profiler", ours < theirs)


def scenario_matmul(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "matmul"
    if g.simulated:
        c.add(name, "MFU vs torch-timed TFLOP/s", "-", "-", "-", None, "needs the real tensor cores")
        return
    n, k = 8192, 20
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)

    def loop() -> None:
        for _ in range(k):
            torch.mm(a, b)

    loop()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    loop()
    e1.record()
    torch.cuda.synchronize()
    tflops = 2 * n**3 * k / (e0.elapsed_time(e1) / 1e3) / 1e12
    with gpuutil.profile(flops_per_step=2 * n**3 * k, dtype="bf16", report_interval_ms=0) as prof:
        for _ in range(steps + 2):
            with prof.step():
                loop()
                torch.cuda.synchronize()
    reports = list(prof.reports)[2:]
    compute = median([device0(r)["breakdown_ns"]["compute"] / device0(r)["wall_ns"] for r in reports])
    c.add(name, "compute share (median)", ">= 95%", f"{100 * compute:.1f}%", ">= 95%", compute >= 0.95)
    mfus = [device0(r)["mfu"] for r in reports if device0(r).get("mfu") is not None]
    peak = [device0(r)["peak_flops_per_s"] for r in reports if device0(r).get("peak_flops_per_s")]
    if not mfus or not peak:
        c.add(name, "MFU vs torch-timed TFLOP/s", f"{tflops:.0f} TFLOP/s", "MFU null", "+-5% rel", False,
              "no peak for this device name")
    else:
        ref = tflops * 1e12 / peak[0]
        mfu = median(mfus)
        c.add(name, "MFU vs torch-timed TFLOP/s", f"{100 * ref:.1f}% ({tflops:.0f} TFLOP/s)", f"{100 * mfu:.1f}%",
              "+-5% rel", abs(mfu - ref) <= 0.05 * ref)
    check_clean(c, name, reports)


def scenario_compile(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "compile"
    if g.simulated:
        c.add(name, "Triton launches matched", "-", "-", "-", None,
              "needs Triton on a GPU; the driver-API path is the 'driver' scenario here")
        return

    @torch.compile
    def f(x: Any) -> Any:
        return (x.sin() * 2 + 1).relu()

    x = torch.randn(1 << 20, device="cuda")
    f(x)
    torch.cuda.synchronize()
    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(steps):
            with prof.step():
                for _ in range(20):
                    f(x)
                torch.cuda.synchronize()
    reports = list(prof.reports)
    unmatched = diagnostics(reports).get("launch_unmatched", 0)
    kernels = sum(device0(r)["kernels"] for r in reports if device0(r))
    triton = any("triton" in k["name"] for r in reports if device0(r) for k in device0(r)["top_kernels"])
    c.add(name, "launch_unmatched", "0", str(unmatched), "exact", unmatched == 0)
    c.add(name, "Triton kernels seen", f">= {20 * steps}", f"{kernels} (triton names: {triton})", "-",
          kernels >= 20 * steps and triton)
    check_clean(c, name, reports)


def scenario_graph(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "graph"
    nodes = 40
    if g.simulated:
        def replay() -> None:
            g.call("cudaGraphLaunch", [g.kernel(b"graph_node", 250_000, graph_id=1) for _ in range(nodes)])
    else:
        x = torch.randn(1 << 22, device="cuda")
        graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            x.mul_(1.0)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(graph):
            for _ in range(nodes):
                x.mul_(1.0001)

        def replay() -> None:
            graph.replay()
    replay()
    g.synchronize()
    def body(s: int) -> None:
        replay()  # no sync: the graph runs on into the next steps
        if s == steps - 1:
            g.synchronize()

    reports = contiguous_steps(gpuutil, torch, steps, body)
    total = sum(device0(r)["kernels"] for r in reports if device0(r))
    c.add(name, "graph kernels counted", str(nodes * steps), str(total), "exact", total == nodes * steps)
    diags = diagnostics(reports)
    if "cupti_graph_correlation" in diags:
        c.info(name, "CUPTI 13.0 graph correlation", "flagged", "upgrade to CUPTI >= 13.1 Update 1")
    check_clean(c, name, reports)


def scenario_profiler(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "profiler"
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([] if g.simulated else [ProfilerActivity.CUDA])
    kineto: Dict[str, int] = {}
    if g.simulated:
        kineto_like(g, torch, kineto)

    def their_kernels(tp: Any) -> int:
        return profiler_kernels(g, torch, tp, kineto)

    def step(prof: Any) -> None:
        synced_step(prof, g)

    # gpuutil first, torch.profiler inside it.
    with gpuutil.profile(report_interval_ms=0) as prof:
        step(prof)
        with profile(activities=activities) as tp:
            step(prof)
            step(prof)
        step(prof)
        col = cupti_collector(prof)
        after = col.counters() if col is not None else {}
    theirs = their_kernels(tp)
    # Kineto before its lazy subscription keeps CUPTI's subscription after
    # its trace: gpuutil then runs without API callbacks (issue 36, item 4).
    c.info(name, "after torch.profiler: gpuutil's API callbacks", "on" if after.get("api_callbacks_on") else "off",
           "off: the client kept CUPTI's subscription; launches are learnt from records, resubscribed "
           f"{after.get('resubscribed', 0)} times")
    regs = after.get("timestamp_registrations", 0)
    c.add(name, "clock registrations after a torch.profiler cycle", "<= 1", str(regs), "exact", regs <= 1)
    reports = list(prof.reports)
    check_clean(c, name, reports)
    mismatched = diagnostics(reports).get("cupti_clock_mismatch", 0)
    c.add(name, "records on another clock after torch.profiler", "0", str(mismatched), "exact", mismatched == 0)
    suspended = ["gpu_collection_suspended" in {d["name"] for d in r["diagnostics"]} for r in reports]
    kernels = [device0(r)["kernels"] if device0(r) else 0 for r in reports]
    c.add(name, "torch.profiler inside gpuutil: its kernels (not CPU-only)", "> 0", str(theirs), "> 0", theirs > 0)
    c.add(name, "inside: steps suspended", "[F, T, T, F]", str([str(s)[0] for s in suspended]), "exact",
          suspended == [False, True, True, False])
    c.add(name, "inside: gpuutil kernels before/after", "> 0", f"{kernels[0]}, {kernels[-1]}", "> 0",
          kernels[0] > 0 and kernels[-1] > 0)
    # torch.profiler first, gpuutil started inside it.
    with profile(activities=activities) as tp:
        prof = gpuutil.profile(report_interval_ms=0).start()
        step(prof)
    step(prof)
    prof.stop()
    theirs = their_kernels(tp)
    reports = list(prof.reports)
    c.add(name, "torch.profiler before gpuutil: its kernels", "> 0", str(theirs), "> 0", theirs > 0)
    first = {d["name"] for d in reports[0]["diagnostics"]}
    c.add(name, "before: suspended, then collecting", "suspended; > 0 kernels",
          f"{'gpu_collection_suspended' in first}; {device0(reports[1])['kernels'] if device0(reports[1]) else 0}",
          "-", "gpu_collection_suspended" in first and bool(device0(reports[1])) and device0(reports[1])["kernels"] > 0)
    # torch.profiler after gpuutil stopped.
    with profile(activities=activities) as tp:
        g.gpu_ms(2.0)
        g.synchronize()
    theirs = their_kernels(tp)
    c.add(name, "torch.profiler after gpuutil: its kernels", "> 0", str(theirs), "> 0", theirs > 0)


def kineto_like(g: FakeGpu, torch: Any, out: Dict[str, int]) -> None:
    """--self-test: the fake's second CUPTI client does what Kineto does when
    torch.profiler prepares and stops (a CPU build of torch has no Kineto
    CUPTI); the guard is told the profiler traces CUDA, as on a GPU."""

    class ClientStats(ctypes.Structure):
        _fields_ = [("kernels", ctypes.c_uint64), ("memcpys", ctypes.c_uint64), ("api_records", ctypes.c_uint64),
                    ("buffers", ctypes.c_uint64), ("foreign_buffers_rejected", ctypes.c_uint64),
                    ("last_record_end_ns", ctypes.c_int64)]

    g.fake.fake_cupti_second_client_stop.restype = ClientStats
    P = torch.autograd.profiler.profile
    P._gpu_check_kineto_out = out  # where the next stop reports (each scenario passes its own)
    if getattr(P, "_gpu_check_kineto_like", False):
        return
    prepare, leave = P._prepare_trace, P.__exit__

    def _prepare_trace(self: Any, *a: Any, **k: Any) -> Any:
        r = prepare(self, *a, **k)
        g.fake.fake_cupti_second_client_start()
        return r

    def __exit__(self: Any, *a: Any, **k: Any) -> Any:
        r = leave(self, *a, **k)
        s = g.fake.fake_cupti_second_client_stop()
        P._gpu_check_kineto_out.update(kernels=s.kernels, foreign=s.foreign_buffers_rejected)
        return r

    P._prepare_trace, P.__exit__, P._gpu_check_kineto_like = _prepare_trace, __exit__, True
    from gpuutil.torch import _profiler_guard

    _profiler_guard.traces_gpu = lambda prof: True


def scenario_nccl(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "nccl"
    t = None
    if not g.simulated:
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1)
        t = torch.ones(1 << 24, device="cuda")
    try:
        with gpuutil.profile(report_interval_ms=0) as prof:
            for _ in range(steps):
                with prof.step():
                    g.nccl(t)
                    g.synchronize()
        reports = list(prof.reports)
        comm = median([device0(r)["breakdown_ns"]["communication"] / 1e6 for r in reports if device0(r)])
        # Informational: with one rank, an in-place SUM all_reduce may launch
        # no kernel at all (NCCL returns early), so 0 ms is not a failure.
        c.info(name, "communication per step (median)", f"{comm:.3f} ms",
               "world size 1: NCCL may launch nothing; a multi-rank run is needed to check this bucket")
        check_clean(c, name, reports)
    finally:
        if not g.simulated:
            torch.distributed.destroy_process_group()


def scenario_nvml(c: Checks, g: Any, gpuutil: Any, torch: Any, steps: int) -> None:
    name = "nvml"
    if g.simulated:
        c.add(name, "health present, joined by UUID", "-", "-", "-", None, "needs a driver's NVML")
        return
    import gpuutil.nvml

    gpuutil.nvml.enable(interval_s=0.2)
    try:
        with gpuutil.profile(report_interval_ms=0) as prof:
            for _ in range(steps):
                with prof.step():
                    g.gpu_ms(100.0)
                    g.synchronize()
        collector = next((x for x in prof._collectors if x.name == "nvml"), None)
    finally:
        gpuutil.nvml.disable()
    reports = list(prof.reports)[1:]
    health = [device0(r).get("health") or {} for r in reports if device0(r)]
    keys = ("sm_clock_mhz", "power_w", "energy_j", "throttle_power_ns", "temperature_c")
    present = {k: sum(1 for h in health if h.get(k) is not None) for k in keys}
    c.add(name, "health fields in every step", f"{len(health)} steps", json.dumps(present), "all",
          bool(health) and all(v == len(health) for v in present.values()))
    uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid).lower()
    sampled = [str(d[1]).lower() for d in collector.sampler.devices] if collector and collector.sampler else []
    joined = any(uuid.replace("gpu-", "") in s.replace("gpu-", "") for s in sampled)
    c.add(name, "sampled device is this process's (UUID)", uuid, ", ".join(sampled) or "(none)", "exact", joined)


def find_binary(name: str, env: str) -> Optional[str]:
    if os.environ.get(env):
        return os.environ[env]
    hits = sorted(glob.glob(str(REPO / "build*" / "**" / name), recursive=True))
    return hits[0] if hits else None


def scenario_driver(c: Checks, g: Any, fake_lib: Optional[str], steps: int, cupti: Optional[str] = None) -> None:
    name = "driver"
    exe = find_binary("gpu_check_driver", "GPUUTIL_GPU_CHECK_DRIVER")
    if exe is None:
        c.add(name, "driver-API scenario built", "yes", "not found", "-", False, "build target gpu_check_driver")
        return
    env = dict(os.environ)
    if fake_lib:
        env["GPUUTIL_CHECK_LIBCUDA"] = fake_lib
    host_ms, kernels = 5, 40
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "driver.json"
        cmd = [exe, "--out", str(out), "--steps", str(steps), "--kernels", str(kernels), "--host-ms", str(host_ms)]
        if cupti:
            cmd += ["--cupti-library", cupti]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        if proc.returncode != 0:
            c.add(name, "driver-API scenario ran", "yes", f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}",
                  "-", False)
            return
        result = json.loads(out.read_text())
    reports = result["reports"]
    c.info(name, "libcupti loaded", result.get("cupti_library") or "(none)",
           "the one the Python side loaded" if cupti and result.get("cupti_library") == cupti else "its own search")
    counts = [device0(r)["kernels"] if device0(r) else 0 for r in reports]
    c.add(name, "cuLaunchKernel kernels per step", str(kernels), str(sorted(set(counts))), "exact",
          counts == [kernels] * steps)
    unmatched = diagnostics(reports).get("launch_unmatched", 0)
    c.add(name, "launch_unmatched", "0", str(unmatched), "exact", unmatched == 0)
    host = median([device0(r)["breakdown_ns"]["idle_host"] / 1e6 for r in reports if device0(r)])
    # The gap as it really lasted (usleep oversleeps on a loaded host), timed by the program.
    slept = median([ns / 1e6 for ns in result["planted"].get("host_ns", [])] or [float(host_ms)])
    c.add(name, "planted host gap -> idle_host (median)", f"{slept:.2f} ms (usleep {host_ms} ms)", f"{host:.2f} ms",
          "-3%..+1.5 ms", slept * 0.97 <= host <= slept + 1.5)
    c.add(name, "driver callback ids traced", "> 0", str(result["counters"]["driver_cbids"]), "> 0",
          result["counters"]["driver_cbids"] > 0)
    check_clean(c, name, reports)


# ---------------------------------------------------------------- probe


class FakeMatrix(ctypes.Structure):
    """fake_cupti_matrix (tests/fake_cupti/fake_cupti.h)."""

    _fields_ = [("keep_appending", ctypes.c_int), ("device_records", ctypes.c_int), ("buffers", ctypes.c_int),
                ("api_record_at_exit", ctypes.c_int), ("skew_ns", ctypes.c_int64), ("hold_empty", ctypes.c_int),
                ("second_client", ctypes.c_int), ("launch_api", ctypes.c_int), ("nested_driver", ctypes.c_int),
                ("lazy_flush", ctypes.c_int), ("graph_internal_streams", ctypes.c_int),
                ("multi_subscriber", ctypes.c_int)]


def expected_probe(fake_lib: str, graph_bug: bool = False) -> Dict[str, str]:
    """What the probe must report for the cell the fake was configured with
    (GPUUTIL_FAKE_CUPTI_MATRIX, read by the fake as it loads)."""
    lib = ctypes.CDLL(fake_lib)
    lib.fake_cupti_get_matrix.restype = FakeMatrix
    m = lib.fake_cupti_get_matrix()
    device = m.device_records == 1
    return {
        # Device records written at completion leave no incomplete record in
        # any buffer: nothing is withheld, and no buffer shows the API order.
        "seal": "n/a" if device else ("seal=0" if m.keep_appending else "seal=1"),
        "records": "records=device" if device else "records=thread",
        "buffers": ("buffers=thread", "buffers=global", "buffers=switch")[m.buffers],
        "api": "n/a" if device else ("api=exit" if m.api_record_at_exit else "api=start"),
        # The fake's cuLaunchKernel lasts 3 us and its kernel starts 4 us after
        # the call began: a skew above 1 us shows as a start before the call's end.
        "skew": "skew>0" if m.skew_ns > 1000 else "skew=0",
        "hold": "hold=1" if m.hold_empty else "hold=0",
        "names": "names=header",
        "graph": "graph=stale_after_first" if graph_bug else "graph=matched",
        "timestamps": "timestamps=valid",
        "heads": "heads=zero_until_written",
        "streams": "streams=created_callback",
        # Each registration after the first leaves that many kernel records
        # of the next session on CUPTI's default clock (the fake reproduces
        # pytorch/pytorch#192021's standalone repro).
        "clock": "reregistration=0_then_1",
    }


def probe_cell(row: Dict[str, str]) -> str:
    """A probe row's cell as expected_probe() spells it (skew: seen or not)."""
    cell = row["cell"]
    if row["row"] == "skew" and cell.startswith("skew="):
        return "skew>0" if int(cell.split("=", 1)[1]) > 0 else "skew=0"
    return cell


def probe_table(probe: Dict[str, Any]) -> str:
    rows = probe.get("rows", [])
    lines = ["| matrix row | this CUPTI | measured |", "|---|---|---|"]
    lines += [f"| {r['row']} | {r['cell']} | {r['measured']} |" for r in rows]
    return "\n".join(lines)


def run_probe(c: Checks, fake_lib: Optional[str], cupti: Optional[str], extra: List[str]) -> Dict[str, Any]:
    """gpu_check_probe in a process of its own; its rows into the table: in
    --self-test checked against the fake's configured cell, else reported."""
    name = "probe"
    exe = find_binary("gpu_check_probe", "GPUUTIL_GPU_CHECK_PROBE")
    if exe is None:
        c.add(name, "matrix probe built", "yes", "not found", "-", False, "build target gpu_check_probe")
        return {"error": "gpu_check_probe not found"}
    env = dict(os.environ)
    if fake_lib:
        env["GPUUTIL_CHECK_LIBCUDA"] = fake_lib
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "probe.json"
        cmd = [exe, "--out", str(out)] + (["--cupti-library", cupti] if cupti else []) + extra
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        if proc.returncode != 0 or not out.exists():
            why = f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
            c.add(name, "matrix probe ran", "yes", why, "-", False)
            return {"error": why}
        probe = json.loads(out.read_text())
    print(f"[gpu_check] CUPTI behaviour for each row of the fake's matrix ({probe['cupti']['path']}, "
          f"API version {probe['cupti']['version']}):", flush=True)
    print(probe_table(probe), flush=True)
    expected = expected_probe(fake_lib, "--fake-graph-correlation-bug" in extra) if fake_lib else None
    for row in probe["rows"]:
        want = expected.get(row["row"]) if expected else None
        if want is None:
            c.info(name, row["row"], f"{row['cell']}: {row['measured']}", row["settles"])
        else:
            got = probe_cell(row)
            c.add(name, row["row"], f"{want} (the fake's cell)", got, "exact", got == want, row["measured"][:200])
    return probe


def loaded_cupti(gpuutil: Any) -> Optional[str]:
    """The libcupti the Python side loads (a short profile asks the collector)."""
    try:
        with gpuutil.profile(report_interval_ms=0) as prof:
            col = next((x for x in prof._collectors if x.name == "cupti"), None)
            path = col._live.library_path if col is not None else ""
    except Exception:  # noqa: BLE001 - no path: the C++ programs search themselves
        return None
    return path or None


# ---------------------------------------------------------------- main


SCENARIOS = ("probe", "coverage", "pipelined", "long_kernel", "profiler_thread", "dataloader", "item", "tiny", "matmul",
             "compile", "graph", "profiler", "nccl", "nvml", "driver")
#: What --cxx-only runs (no gpuutil module, no torch).
CXX_ONLY = ("probe", "driver")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--self-test", action="store_true", help="run against the fake CUPTI on this machine")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "build" / "gpu_check"),
                    help="folder for gpu_check.json (default: $OUT, else build/gpu_check)")
    ap.add_argument("--steps", type=int, default=8, help="measured steps per scenario")
    ap.add_argument("--only", default="", help="comma-separated scenarios to run")
    ap.add_argument("--deadline-s", type=float, default=280.0, help="skip what is left after this long")
    ap.add_argument("--cxx-only", action="store_true",
                    help="run the probe and the driver scenario only, without importing gpuutil or torch")
    ap.add_argument("--probe-arg", action="append", default=[],
                    help="passed to gpu_check_probe (--self-test: --fake-graph-correlation-bug)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    only = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    for s in only:
        if s not in SCENARIOS:
            print(f"gpuutil: error: unknown scenario {s!r}; one of {', '.join(SCENARIOS)}", file=sys.stderr)
            return 2
    fake_lib = None
    if args.self_test:
        fake_lib = find_binary("libfake_cupti.so", "GPUUTIL_FAKE_CUPTI")
        if fake_lib is None:
            print("gpuutil: error: --self-test needs libfake_cupti.so (build the C++ tests)", file=sys.stderr)
            return 2
        os.environ["GPUUTIL_CUPTI_LIBRARY"] = fake_lib
    checks = Checks()
    env: Dict[str, Any] = {"python": platform.python_version(), "self_test": args.self_test}
    g: Any = None
    gpuutil = torch = None
    cupti: Optional[str] = fake_lib or os.environ.get("GPUUTIL_CUPTI_LIBRARY") or None
    if args.cxx_only:
        env["device"] = "simulated (fake CUPTI)" if args.self_test else "(not asked: --cxx-only)"
        env["mode"] = "cxx-only"
    else:
        import gpuutil  # before torch: NVTX injection
        import torch

        env.update(torch=torch.__version__, gpuutil=gpuutil.__version__)
        if args.self_test:
            g = FakeGpu(torch, fake_lib)
            env["device"] = "simulated (fake CUPTI)"
        elif not torch.cuda.is_available():
            print("[gpu_check] no CUDA device visible to torch; run the torch-free part only", flush=True)
            env["device"] = "none (torch sees no GPU)"
        else:
            g = RealGpu(torch)
            env["device"] = torch.cuda.get_device_name(0)
            env["cuda"] = torch.version.cuda
            cupti = cupti or loaded_cupti(gpuutil)
    env["cupti_library"] = cupti
    print(f"[gpu_check] {env}", flush=True)
    fns = {"coverage": scenario_coverage, "pipelined": scenario_pipelined, "long_kernel": scenario_long_kernel,
           "profiler_thread": scenario_profiler_thread, "dataloader": scenario_dataloader, "item": scenario_item,
           "tiny": scenario_tiny, "matmul": scenario_matmul, "compile": scenario_compile, "graph": scenario_graph,
           "profiler": scenario_profiler, "nccl": scenario_nccl, "nvml": scenario_nvml}
    probe: Dict[str, Any] = {}
    times: Dict[str, float] = {}
    for s in [x for x in SCENARIOS if x in only]:
        if time.monotonic() - t0 > args.deadline_s:
            checks.add(s, "ran", "-", "-", "-", None, f"skipped: past the {args.deadline_s:.0f} s deadline")
            continue
        started = time.monotonic()
        try:
            if s == "probe":
                probe = run_probe(checks, fake_lib, cupti, args.probe_arg)
            elif s == "driver":
                scenario_driver(checks, g, fake_lib, args.steps, cupti)
            elif args.cxx_only:
                checks.add(s, "ran", "-", "-", "-", None, "--cxx-only: the Python module was not built")
            elif g is None:
                checks.add(s, "ran", "-", "-", "-", None, "torch sees no GPU")
            else:
                fns[s](checks, g, gpuutil, torch, args.steps)
        except Exception as e:  # noqa: BLE001 - a scenario that breaks is a failed check, the others still run
            traceback.print_exc()
            checks.add(s, "ran", "-", f"{type(e).__name__}: {e}"[:200], "-", False)
        times[s] = round(time.monotonic() - started, 1)
        print(f"[gpu_check] {s}: {times[s]:.1f} s", flush=True)
    elapsed = time.monotonic() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps({"env": env, "elapsed_s": elapsed, "scenario_s": times,
                                                    "probe": probe, "rows": checks.rows}, indent=1))
    print()
    print(f"gpu_check on {env['device']} (torch {env.get('torch', '-')}), {elapsed:.0f} s, "
          f"results in {out / 'gpu_check.json'}")
    if probe.get("rows"):
        print("CUPTI behaviour (gpu_check_probe):")
        print(probe_table(probe))
        print()
    print(checks.table())
    return 1 if checks.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
