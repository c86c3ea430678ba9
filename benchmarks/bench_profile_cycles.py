"""Memory over many ``gpuutil.profile()`` start/stop cycles with torch
imported (issue 32, item 7): the resident size, glibc's heap in use
(mallinfo2) and Python's allocated blocks, printed every ``--every``
cycles, so that a growth can be told from the allocator touching its free
pages (which settles) and from a leak (which does not).

    .venv/bin/python benchmarks/bench_profile_cycles.py --cycles 20000 --every 2000
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import sys
import time


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20000)
    ap.add_argument("--every", type=int, default=2000)
    ap.add_argument("--output", action="store_true", help="each profile writes a steps file (/tmp)")
    args = ap.parse_args()
    import torch  # noqa: F401 - the PyTorch collector attaches only with torch imported

    import gpuutil

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2

    def rss_kb() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4

    out = "/tmp/gpuutil_bench_cycles.jsonl" if args.output else None
    t0 = time.perf_counter()
    print("cycles  rss_kB  heap_in_use_kB  python_blocks  s")
    for done in range(args.every, args.cycles + 1, args.every):
        for _ in range(args.every):
            with gpuutil.profile(out, report_interval_ms=0) as prof:
                with prof.step():
                    pass
        gc.collect()
        m = libc.mallinfo2()
        print(f"{done:6d}  {rss_kb():6d}  {(m.uordblks + m.hblkhd) // 1024:14d}  {sys.getallocatedblocks():13d}  "
              f"{time.perf_counter() - t0:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
