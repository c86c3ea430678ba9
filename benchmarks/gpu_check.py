#!/usr/bin/env python3
"""GPU check for live collection: plants stalls of known size on a real GPU
and compares gpuutil's per-step attribution, MFU and overhead with them.

Reference target: one NVIDIA H200, PyTorch 2.11 (cu130), CUPTI 13. Status:
NOT YET RUN (written on a machine without a GPU; see docs/live-collection.md).

    python benchmarks/gpu_check.py            # builds gpuutil into this env, runs, prints a table last
    python benchmarks/gpu_check.py --no-build # use the installed gpuutil

What it does (about 3 minutes on an H200; hard limit 5):
  1. builds and installs gpuutil from this checkout (pip, no build isolation);
  2. runs four planted scenarios under ``gpuutil.profile()``:
     - dataloader: a 20 ms sleep inside an NVTX "enumerate(DataLoader)#..."
       range before each step's work -> idle_dataloader ~= 20 ms;
     - item: ``.item()`` after each step's matmuls, then 5 ms of CPU work ->
       idle_host_sync >= 5 ms (the GPU drained while the host was blocked);
     - tiny: 5000 tiny kernels per step (launch-bound) -> kernels == 5000 and
       idle_launch + idle_host the larger part of the step;
     - matmul: a bf16 8192^3 matmul loop -> compute >= 95% of the step and
       gpuutil's MFU within 5% of the MFU from torch-timed TFLOP/s;
  3. measures overhead: steps/s of the matmul and tiny workloads with no
     profiler, with gpuutil, and with torch.profiler (CPU+CUDA activities),
     in that order after gpuutil stopped (which also checks that gpuutil
     released CUPTI so torch.profiler records kernels);
  4. prints one row per check, PASS/FAIL, and a table last.

It never changes clocks, power limits, persistence or MIG settings: it only
reads the device name through torch.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 290.0  # stay inside 5 minutes including the build
H200_BF16_DENSE_TFLOPS = 989.4


def build() -> None:
    print("[gpu_check] building gpuutil into", sys.executable, flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", str(REPO)],
                   check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-build", action="store_true", help="use the installed gpuutil")
    ap.add_argument("--steps", type=int, default=12, help="measured steps per scenario")
    args = ap.parse_args()
    t_start = time.monotonic()
    if not args.no_build:
        build()

    import gpuutil  # before torch's first NVTX call: sets NVTX_INJECTION64_PATH
    import torch

    if not torch.cuda.is_available():
        print("[gpu_check] no CUDA device visible; this script needs a GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    print(f"[gpu_check] {name}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    peak = H200_BF16_DENSE_TFLOPS if "H200" in name else None

    rows = []  # (check, planted, measured, tolerance, ok)

    def check(label: str, planted: str, measured: str, tol: str, ok: bool) -> None:
        rows.append((label, planted, measured, tol, "PASS" if ok else "FAIL"))
        print(f"[gpu_check] {label}: planted {planted}, measured {measured} -> {'PASS' if ok else 'FAIL'}", flush=True)

    def per_step(prof, key: str) -> list:
        out = []
        for r in list(prof.reports)[2:]:  # skip warm-up steps
            for d in r["steps"][0]["devices"]:
                out.append(d["breakdown_ns"][key] if key in d["breakdown_ns"] else d[key])
        return out

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if xs else float("nan")

    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    small = torch.zeros(16, device=dev)

    def matmuls(k: int) -> None:
        for _ in range(k):
            torch.mm(a, b)

    # torch-timed TFLOP/s of the matmul loop (CUDA events), the MFU reference.
    matmuls(3)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    matmuls(20)
    e1.record()
    torch.cuda.synchronize()
    torch_tflops = 2 * n**3 * 20 / (e0.elapsed_time(e1) / 1e3) / 1e12
    print(f"[gpu_check] torch-timed bf16 matmul: {torch_tflops:.1f} TFLOP/s", flush=True)

    # 1. dataloader sleep inside an NVTX DataLoader range
    with gpuutil.profile() as prof:
        if prof.gpu_collection_off:
            print("[gpu_check] GPU collection is OFF:", prof.gpu_collection_off, file=sys.stderr)
        for _ in range(args.steps):
            with prof.step():
                torch.cuda.nvtx.range_push("enumerate(DataLoader)#gpu_check.__next__")
                time.sleep(0.020)
                torch.cuda.nvtx.range_pop()
                matmuls(2)
                torch.cuda.synchronize()
    dl = median(per_step(prof, "idle_dataloader")) / 1e6
    check("dataloader sleep -> idle_dataloader", "20.0 ms", f"{dl:.2f} ms", "+-1 ms", abs(dl - 20.0) <= 1.0)
    gpu_on = not prof.gpu_collection_off
    check("GPU collection on", "yes", "yes" if gpu_on else "; ".join(prof.gpu_collection_off), "-", gpu_on)

    # 2. .item() every step, then 5 ms of CPU work
    with gpuutil.profile() as prof:
        for _ in range(args.steps):
            with prof.step():
                matmuls(4)
                (a[0, 0] + 1).item()
                t = time.perf_counter()
                while time.perf_counter() - t < 0.005:
                    pass
                matmuls(1)
                torch.cuda.synchronize()
    hs = median(per_step(prof, "idle_host_sync")) / 1e6
    check(".item() + 5 ms CPU -> idle_host_sync", ">= 5.0 ms", f"{hs:.2f} ms", ">= 4.5 ms", hs >= 4.5)

    # 3. thousands of tiny kernels
    def tiny_step() -> None:
        for _ in range(5000):
            small.add_(1)
        torch.cuda.synchronize()

    with gpuutil.profile() as prof:
        for _ in range(args.steps):
            with prof.step():
                tiny_step()
    reports = list(prof.reports)[2:]
    kernels = median([r["steps"][0]["devices"][0]["kernels"] for r in reports])
    share = median([(d["breakdown_ns"]["idle_launch"] + d["breakdown_ns"]["idle_host"]) / d["wall_ns"]
                    for r in reports for d in r["steps"][0]["devices"]])
    check("tiny kernels -> kernels per step", "5000", str(kernels), "exact", kernels == 5000)
    check("tiny kernels -> launch+host idle share", "> 50%", f"{100 * share:.0f}%", "> 50%", share > 0.5)

    # 4. bf16 matmul loop: compute share and MFU
    flops = 2 * n**3 * 20
    with gpuutil.profile(flops_per_step=flops, dtype="bf16", peak_tflops=peak) as prof:
        for _ in range(args.steps):
            with prof.step():
                matmuls(20)
                torch.cuda.synchronize()
    reports = list(prof.reports)[2:]
    compute_share = median([d["breakdown_ns"]["compute"] / d["wall_ns"] for r in reports for d in r["steps"][0]["devices"]])
    check("matmul loop -> compute share", ">= 95%", f"{100 * compute_share:.1f}%", ">= 95%", compute_share >= 0.95)
    mfu = median([d["mfu"] for r in reports for d in r["steps"][0]["devices"] if d.get("mfu") is not None])
    if peak:
        ref = torch_tflops / peak
        check("matmul loop -> MFU vs torch-timed", f"{100 * ref:.1f}%", f"{100 * mfu:.1f}%", "+-5% rel",
              abs(mfu - ref) <= 0.05 * ref)

    # 5. overhead: none vs gpuutil vs torch.profiler
    def rate(workload, steps: int, wrap) -> float:
        """Steps per second of `workload` under the context `wrap()`."""
        with wrap() as p:
            for _ in range(2):
                workload()
            t = time.perf_counter()
            for _ in range(steps):
                if isinstance(p, gpuutil.Profile):
                    with p.step():
                        workload()
                else:
                    workload()
                    if p is not None:
                        p.step()  # torch.profiler's step marker
            return steps / (time.perf_counter() - t)

    import contextlib

    def none():
        return contextlib.nullcontext(None)

    def tprof():
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])

    for label, work, steps in (("matmul", lambda: (matmuls(20), torch.cuda.synchronize()), 10),
                               ("tiny", tiny_step, 10)):
        if time.monotonic() - t_start > DEADLINE_S - 60:
            print("[gpu_check] skipping overhead runs: near the 5 minute limit", flush=True)
            break
        base = rate(work, steps, none)
        ours = rate(work, steps, gpuutil.profile)
        theirs = rate(work, steps, tprof)
        ov = 100 * (base / ours - 1)
        check(f"overhead {label}: gpuutil", "< 2%", f"{ov:.1f}%", "< 2%", ov < 2.0)
        rows.append((f"overhead {label}: torch.profiler", "-", f"{100 * (base / theirs - 1):.1f}%", "-", "INFO"))

    # torch.profiler after gpuutil stopped must still record kernels (CUPTI released).
    from torch.profiler import ProfilerActivity, profile as tprofile

    with tprofile(activities=[ProfilerActivity.CUDA]) as tp:
        matmuls(2)
        torch.cuda.synchronize()
    cuda_events = [e for e in tp.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    check("torch.profiler after gpuutil records kernels", "> 0", str(len(cuda_events)), "> 0", len(cuda_events) > 0)

    elapsed = time.monotonic() - t_start
    print()
    print(f"gpu_check on {name} (torch {torch.__version__}), {elapsed:.0f} s")
    w = [max(len(str(r[i])) for r in rows + [("check", "planted", "measured", "tolerance", "result")]) for i in range(5)]
    header = ("check", "planted", "measured", "tolerance", "result")
    print("| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(header)) + " |")
    print("|" + "|".join("-" * (w[i] + 2) for i in range(5)) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |")
    return 0 if all(r[4] in ("PASS", "INFO") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
