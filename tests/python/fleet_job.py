"""A profiled DDP job on CPU (gloo) with a planted DataLoader stall, serving
its gpuutil series on a port per rank (one it binds itself and writes to
DIR/port.<local rank>), for the fleet end-to-end test
(test_fleet_e2e.py). Run it under torchrun:

    GPUUTIL_CUPTI_LIBRARY=build/tests/cpp/libfake_cupti.so \\
    torchrun --standalone --nproc-per-node 2 tests/python/fleet_job.py --out DIR \\
        --uuids GPU-aaaa...,GPU-bbbb... --job-id fleet-e2e

Each rank's device is the project's fake CUPTI (tests/fake_cupti, loaded
through GPUUTIL_CUPTI_LIBRARY like the real libcupti): every step launches
one kernel of --kernel-ms on device 0 after a DataLoader fetch that sleeps
--stall-ms, so the GPU waits for input most of each step (idle_dataloader).
A CPU job has no GPU to name, so each rank passes its GPU's UUID explicitly
(``PrometheusMetrics(gpu_uuids=[...])``, the override docs/fleet.md
documents for CPU jobs and tests): rank r is on --uuids' entry r.

Every step counts its samples and tokens, and 3 steps of 4 as useful
(quality 0.75). The ranks step until DIR/stop-steps exists (rank 0 decides,
every step, and tells the others), then keep the profile running and
serving its final totals until DIR/exit exists (or --max-s passes), then
stop. Each rank writes DIR/steps.rank<R>.jsonl and, when it stops
stepping, DIR/stepped.rank<R>.json (steps, the wall time of the last step).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import gpuutil
from gpuutil.export import prometheus

SAMPLES_PER_STEP, TOKENS_PER_SAMPLE = 4, 128


class SlowDataset(torch.utils.data.Dataset):
    """The planted stall: every batch takes stall_s to load."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int):
        time.sleep(self.stall_s / SAMPLES_PER_STEP)
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, generator=g), torch.randn(4, generator=g)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--uuids", required=True, help="one GPU UUID per local rank, comma-separated")
    ap.add_argument("--job-id", required=True)
    ap.add_argument("--stall-ms", type=float, default=30.0)
    ap.add_argument("--kernel-ms", type=float, default=15.0)
    ap.add_argument("--flops-per-step", type=float, default=2e10)
    ap.add_argument("--peak-tflops", type=float, default=1.0)
    ap.add_argument("--max-s", type=float, default=240.0)
    args = ap.parse_args()

    torch.set_num_threads(1)
    fake = ctypes.CDLL(os.environ["GPUUTIL_CUPTI_LIBRARY"])
    fake.fake_cupti_reset(None)
    fake.fake_cupti_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64]

    dist.init_process_group("gloo")
    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
    metrics = prometheus.PrometheusMetrics(gpu_uuids=[args.uuids.split(",")[local]])
    # A port of its own choosing (a port picked free by the test could be
    # taken by torchrun's or gloo's sockets before this bind): the test reads
    # it from port.<local rank> and only then points Prometheus at it.
    server = prometheus.serve(metrics, port=0)
    port_file = os.path.join(args.out, f"port.{local}")
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_port))
    os.replace(port_file + ".tmp", port_file)

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = iter(torch.utils.data.DataLoader(SlowDataset(args.stall_ms / 1e3), batch_size=SAMPLES_PER_STEP))
    stop_steps, exit_file = os.path.join(args.out, "stop-steps"), os.path.join(args.out, "exit")
    t0 = time.time()
    prof = gpuutil.profile(os.path.join(args.out, "steps.jsonl"), job_id=args.job_id,
                           flops_per_step=args.flops_per_step, peak_tflops=args.peak_tflops, on_step=metrics,
                           cluster_interval_ms=500).start()
    steps = 0
    while True:
        flag = torch.tensor([int(rank == 0 and (os.path.exists(stop_steps) or time.time() - t0 > args.max_s))])
        dist.broadcast(flag, 0)
        if flag.item():
            break
        with prof.step():
            x, y = next(loader)
            fake.fake_cupti_launch_kernel(b"gemm", 7, int(args.kernel_ms * 1e6), 5000)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            fake.fake_cupti_device_synchronize()
        metrics.count(samples=SAMPLES_PER_STEP, tokens=SAMPLES_PER_STEP * TOKENS_PER_SAMPLE,
                      useful_steps=0 if steps % 4 == 3 else 1)
        steps += 1
    prof.flush()
    with open(os.path.join(args.out, f"stepped.rank{rank}.json"), "w") as f:
        json.dump({"steps": steps, "stopped_s": time.time()}, f)
    while not os.path.exists(exit_file) and time.time() - t0 < args.max_s + 60:
        time.sleep(0.1)  # the profile runs on (its GPUs stay attached) and the endpoint serves the totals
    prof.stop()
    server.shutdown()
    server.server_close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
