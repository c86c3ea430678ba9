#!/usr/bin/env python3
"""GPU check of the live path: plants stalls of known size on a real GPU and
compares what gpuutil reports with them.

On the GPU machine, one command (docs/live-collection.md, "GPU check"):

    bash scripts/gpu_check.sh          # builds there, offline, then runs this; results in $OUT

which runs ``python3 benchmarks/gpu_check.py --out "$OUT"`` after the build.
Here, on a CPU machine, the same script runs end to end against the fake
CUPTI (and its simulated device) and is part of the tests:

    python benchmarks/gpu_check.py --self-test

Scenarios, each with its planted size, gpuutil's figure and a tolerance:
 1. dataloader  a real DataLoader (num_workers=0) sleeping 20 ms per batch,
                pipelined (no per-step sync): idle_dataloader per step,
                within 3 ms of the batch's sleeps as timed;
 2. item        .item() every step, then 5 ms of CPU: idle_host_sync with
                the aten::item culprit;
 3. tiny        5000 tiny kernels per step: every kernel counted, launch-bound,
                overhead compared with torch.profiler's;
 4. matmul      a bf16 matmul loop: MFU against torch-timed TFLOP/s;
 5. compile     torch.compile (Triton, driver-API launches): launch_unmatched 0;
 6. graph       a CUDA graph replayed across step boundaries: every kernel;
 7. profiler    torch.profiler inside a gpuutil profile, before it, and after
                it: both keep their kernels, the suspension is reported;
 8. nccl        NCCL with world size 1: time lands in communication;
 9. nvml        NVML health present and joined to the right device (UUID);
10. driver      torch-free C++ (benchmarks/gpu_check_driver.cpp): driver API
                and a JIT-compiled PTX kernel, planted host gap (5 ms usleep,
                checked against its timed length: -3%..+1.5 ms).
Every scenario also requires zero dropped, late, unfinished or invalid
records. In --self-test, scenarios that need the hardware (matmul MFU,
torch.compile, NVML) are marked SKIP with the reason.

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


def check_clean(checks: Checks, scenario: str, reports: List[Dict[str, Any]]) -> None:
    """Nothing dropped, late, unfinished or invalid; GPU collection on."""
    diags = diagnostics(reports)
    bad = {k: v for k, v in diags.items() if k in BAD_DIAGNOSTICS}
    checks.add(scenario, "records lost/late/invalid", "0", json.dumps(bad) if bad else "0", "exact", not bad)
    off = [d["example"] for r in reports[:1] for d in r["diagnostics"] if d["name"] == "gpu_collection_off"]
    checks.add(scenario, "GPU collection on", "yes", "yes" if not off else f"off: {off[0]}", "-", not off)


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
                    ("work", ctypes.c_void_p), ("n_work", ctypes.c_int)]

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
    hs = median([device0(r)["breakdown_ns"]["idle_host_sync"] / 1e6 for r in reports if device0(r)])
    c.add(name, "idle_host_sync per step (median)", ">= 5.0 ms", f"{hs:.2f} ms", ">= 4.5 ms", hs >= 4.5)
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
        if g.simulated:
            return kineto.get("kernels", 0)
        return sum(1 for e in tp.events() if e.device_type == torch.autograd.DeviceType.CUDA)

    def step(prof: Any) -> None:
        with prof.step():
            g.gpu_ms(2.0)
            g.synchronize()

    # gpuutil first, torch.profiler inside it.
    with gpuutil.profile(report_interval_ms=0) as prof:
        step(prof)
        with profile(activities=activities) as tp:
            step(prof)
            step(prof)
        step(prof)
    theirs = their_kernels(tp)
    reports = list(prof.reports)
    check_clean(c, name, reports)
    suspended = ["gpu_collection_suspended" in {d["name"] for d in r["diagnostics"]} for r in reports]
    kernels = [device0(r)["kernels"] if device0(r) else 0 for r in reports]
    c.add(name, "torch.profiler inside gpuutil: its kernels", "> 0", str(theirs), "> 0", theirs > 0)
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
        out.update(kernels=s.kernels, foreign=s.foreign_buffers_rejected)
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
        c.add(name, "communication per step (median)", "> 0 ms (all_reduce)", f"{comm:.3f} ms", "> 0", comm > 0)
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


def scenario_driver(c: Checks, g: Any, fake_lib: Optional[str], steps: int) -> None:
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
        proc = subprocess.run([exe, "--out", str(out), "--steps", str(steps), "--kernels", str(kernels),
                               "--host-ms", str(host_ms)], capture_output=True, text=True, env=env, timeout=120)
        if proc.returncode != 0:
            c.add(name, "driver-API scenario ran", "yes", f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}",
                  "-", False)
            return
        result = json.loads(out.read_text())
    reports = result["reports"]
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


# ---------------------------------------------------------------- main


SCENARIOS = ("dataloader", "item", "tiny", "matmul", "compile", "graph", "profiler", "nccl", "nvml", "driver")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--self-test", action="store_true", help="run against the fake CUPTI on this machine")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "build" / "gpu_check"),
                    help="folder for gpu_check.json (default: $OUT, else build/gpu_check)")
    ap.add_argument("--steps", type=int, default=8, help="measured steps per scenario")
    ap.add_argument("--only", default="", help="comma-separated scenarios to run")
    ap.add_argument("--deadline-s", type=float, default=280.0, help="skip what is left after this long")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    fake_lib = None
    if args.self_test:
        fake_lib = find_binary("libfake_cupti.so", "GPUUTIL_FAKE_CUPTI")
        if fake_lib is None:
            print("[gpu_check] --self-test needs libfake_cupti.so (build the C++ tests)", file=sys.stderr)
            return 2
        os.environ["GPUUTIL_CUPTI_LIBRARY"] = fake_lib
    import gpuutil  # before torch: NVTX injection
    import torch

    checks = Checks()
    env: Dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "gpuutil": gpuutil.__version__, "self_test": args.self_test}
    if args.self_test:
        g: Any = FakeGpu(torch, fake_lib)
        env["device"] = "simulated (fake CUPTI)"
    else:
        if not torch.cuda.is_available():
            print("[gpu_check] no CUDA device visible to torch; run the torch-free part only", flush=True)
            g = None
            env["device"] = "none (torch sees no GPU)"
        else:
            g = RealGpu(torch)
            env["device"] = torch.cuda.get_device_name(0)
            env["cuda"] = torch.version.cuda
    print(f"[gpu_check] {env}", flush=True)
    fns = {"dataloader": scenario_dataloader, "item": scenario_item, "tiny": scenario_tiny,
           "matmul": scenario_matmul, "compile": scenario_compile, "graph": scenario_graph,
           "profiler": scenario_profiler, "nccl": scenario_nccl, "nvml": scenario_nvml}
    only = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    for s in only:
        if s not in SCENARIOS:
            print(f"[gpu_check] unknown scenario {s!r}; one of {', '.join(SCENARIOS)}", file=sys.stderr)
            return 2
    for s in only:
        if time.monotonic() - t0 > args.deadline_s:
            checks.add(s, "ran", "-", "-", "-", None, f"skipped: past the {args.deadline_s:.0f} s deadline")
            continue
        started = time.monotonic()
        try:
            if s == "driver":
                scenario_driver(checks, g, fake_lib, args.steps)
            elif g is None:
                checks.add(s, "ran", "-", "-", "-", None, "torch sees no GPU")
            else:
                fns[s](checks, g, gpuutil, torch, args.steps)
        except Exception as e:  # noqa: BLE001 - a scenario that breaks is a failed check, the others still run
            traceback.print_exc()
            checks.add(s, "ran", "-", f"{type(e).__name__}: {e}"[:200], "-", False)
        print(f"[gpu_check] {s}: {time.monotonic() - started:.1f} s", flush=True)
    elapsed = time.monotonic() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps({"env": env, "elapsed_s": elapsed, "rows": checks.rows}, indent=1))
    print()
    print(f"gpu_check on {env['device']} (torch {torch.__version__}), {elapsed:.0f} s, results in {out / 'gpu_check.json'}")
    print(checks.table())
    return 1 if checks.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
