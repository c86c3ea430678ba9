#!/usr/bin/env python3
"""Writes N rank traces of one distributed job with a planted straggler, from one real rank trace.

Used by the offline fan-out tests and benchmark (issue 30:
tests/python/test_fanout_straggler.py, benchmarks/bench_fanout.py). The
base is a real Kineto trace with `ProfilerStep#N` steps and a GPU collective
kernel (NCCL/RCCL) in each step, by default the shared
`hta_nccl_a100_rank0.json.gz`. Every rank is that trace with its
`distributedInfo.rank` / `world_size` rewritten, and:

- the **straggler** rank S: at each step start a DataLoader range of D ms
  (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, a
  `user_annotation` range on the step's thread, as real traces record it);
  every later host event is D later per step start before it, host ranges
  across a step start (never the step's own range) are D longer, and device
  work moves with the launch call that queued it (work queued before the
  step start runs on; what is launched after it runs D later), so its GPU
  idles D behind the DataLoader and each step is D longer;
- **every other rank**: the first collective kernel starting in each step's
  host window is D longer (its wait for the straggler, at its start), and
  everything that starts after that kernel's start, host or device, is D
  later; host ranges across it are D longer, so each step is D longer too.

So by construction every rank's step is D longer than the base's, the
straggler's own time is D more than the others' (cause: DataLoader), and
each other rank waits D per step in its first collective.

`--target-mb` (or `--copies`) scales a rank to the benchmark's size: the
base's events are repeated K times, copy k shifted by k x the base's span
(rounded up to a whole ms) with its step numbers, `correlation`,
`External id` and flow ids renumbered, so each rank has K x the base's
steps. Output is gzip. Fast at 1,024 ranks: the two event bodies (straggler,
other) are serialised and deflated once; each rank file is a gzip member
whose rank-specific head (up to and including `distributedInfo`, ahead of
`traceEvents` as Kineto writes it) is deflated alone and ends with a full
flush, followed by the body's precompressed deflate blocks, and a CRC-32
combined arithmetically (zlib's crc32_combine): one valid single-member
gzip file per rank, written at disk speed. Deterministic: the same
arguments give byte-identical files.

Usage:
  make_rank_traces.py OUT_DIR --ranks 64 --straggler 5 --delay-ms 20
  make_rank_traces.py OUT_DIR --ranks 1024 --target-mb 2 [--base TRACE]
Files are OUT_DIR/rank00000.json.gz ...; one summary line goes to stderr.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import math
import os
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

DATALOADER_NAME = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
DEFAULT_BASE = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "hta_nccl_a100_rank0.json.gz"

_DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "gpu_memset", "Memcpy", "Memset", "gpu_user_annotation"}
_HOST_RANGE_CATS = {"user_annotation", "cpu_op", "Operator"}
_COLLECTIVE_MARKERS = ("nccl", "rccl")
_ID_KEYS = ("correlation", "External id")


class BaseTraceError(ValueError):
    """The base trace cannot plant a straggler (no steps, or a step without a collective kernel)."""


# --- reading and repeating the base -------------------------------------------------


def load_base(path: Path) -> Tuple[List[Tuple[str, object]], List[Tuple[str, object]], List[dict]]:
    """(keys before traceEvents, keys after it, events) of a Kineto trace (.json or .json.gz)."""
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        doc = json.loads(f.read())
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise BaseTraceError(f"{path}: no traceEvents array")
    keys = list(doc.keys())
    at = keys.index("traceEvents")
    head = [(k, doc[k]) for k in keys[:at]]
    tail = [(k, doc[k]) for k in keys[at + 1 :]]
    return head, tail, doc["traceEvents"]


def _is_step(e: dict) -> bool:
    return (
        e.get("ph") == "X"
        and e.get("cat") in _HOST_RANGE_CATS
        and str(e.get("name", "")).startswith("ProfilerStep#")
    )


def _end(e: dict) -> float:
    return float(e.get("ts", 0)) + float(e.get("dur", 0) or 0)


def repeat_events(events: List[dict], copies: int) -> List[dict]:
    """The events `copies` times, copy k shifted by k x the span (whole ms) and renumbered."""
    if copies <= 1:
        return list(events)
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    span_us = max(_end(e) for e in timed) - min(float(e["ts"]) for e in timed)
    shift_us = (math.floor(span_us / 1000.0) + 2) * 1000.0
    steps = [int(e["name"].split("#", 1)[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    step_shift = (max(steps) - min(steps) + 1) if steps else 0
    ids = [0]
    for e in events:
        if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
            ids.append(e["id"])
        for k in _ID_KEYS:
            v = (e.get("args") or {}).get(k)
            if isinstance(v, int):
                ids.append(v)
    id_shift = max(ids) + 1
    out = list(events)
    for c in range(1, copies):
        for e in events:
            if e.get("ph") == "M" or e.get("cat") == "Trace":
                continue  # metadata and the profiler's own span: once
            n = dict(e)
            if "ts" in n:
                n["ts"] = round(float(n["ts"]) + c * shift_us, 3)
            name = n.get("name")
            if isinstance(name, str) and name.startswith("ProfilerStep#"):
                n["name"] = f"ProfilerStep#{int(name.split('#', 1)[1]) + c * step_shift}"
            if n.get("ph") in ("s", "f", "t") and isinstance(n.get("id"), int):
                n["id"] = n["id"] + c * id_shift
            args = n.get("args")
            if isinstance(args, dict) and any(isinstance(args.get(k), int) for k in _ID_KEYS):
                args = dict(args)
                for k in _ID_KEYS:
                    if isinstance(args.get(k), int):
                        args[k] = args[k] + c * id_shift
                n["args"] = args
            out.append(n)
    for n in out:  # the profiler's span covers every copy
        if n.get("cat") == "Trace" and "dur" in n:
            n["dur"] = round(float(n["dur"]) + (copies - 1) * shift_us, 3)
    return out


# --- planting --------------------------------------------------------------------


def step_ranges(events: List[dict]) -> List[dict]:
    steps = sorted((e for e in events if _is_step(e)), key=lambda e: float(e["ts"]))
    if not steps:
        raise BaseTraceError("the base trace has no ProfilerStep#N host ranges")
    return steps


def first_collectives(events: List[dict], steps: List[dict]) -> List[dict]:
    """The first collective kernel starting in each step's host window."""
    colls = sorted(
        (
            e
            for e in events
            if e.get("ph") == "X"
            and e.get("cat") in ("kernel", "Kernel")
            and any(m in str(e.get("name", "")).lower() for m in _COLLECTIVE_MARKERS)
        ),
        key=lambda e: float(e["ts"]),
    )
    starts = [float(e["ts"]) for e in colls]
    out = []
    for s in steps:
        lo, hi = float(s["ts"]), _end(s)
        i = bisect.bisect_left(starts, lo)
        if i >= len(colls) or starts[i] >= hi:
            raise BaseTraceError(f"step {s['name']} has no collective kernel starting in its window")
        out.append(colls[i])
    return out


def _device_pids(events: List[dict]) -> set:
    return {e.get("pid") for e in events if e.get("cat") in _DEVICE_CATS}


def _launch_ts(events: List[dict]) -> Dict[int, float]:
    """correlation -> start of the host call that launched it (runtime/driver events)."""
    out: Dict[int, float] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") not in _DEVICE_CATS:
            c = (e.get("args") or {}).get("correlation")
            if isinstance(c, int) and e.get("cat") in ("cuda_runtime", "Runtime", "cuda_driver"):
                out[c] = float(e["ts"])
    return out


def plant(events: List[dict], straggler: bool, delay_ms: float) -> List[dict]:
    """A rank's events: the straggler's DataLoader ranges, or the others' lengthened collectives."""
    d_us = float(delay_ms) * 1000.0
    steps = step_ranges(events)
    launch: Dict[int, float] = {}
    step_end_at: Dict[float, float] = {}
    if straggler:
        points = [float(s["ts"]) for s in steps]
        stretched = {id(s) for s in steps}  # the step ranges keep their start
        step_end_at = {float(s["ts"]): _end(s) for s in steps}
        launch = _launch_ts(events)
    else:
        colls = first_collectives(events, steps)
        points = sorted(float(c["ts"]) for c in colls)
        stretched = {id(c) for c in colls}
    dev_pids = _device_pids(events)

    def n_le(t: float) -> int:
        return bisect.bisect_right(points, t)

    def n_lt(t: float) -> int:
        return bisect.bisect_left(points, t)

    out: List[dict] = []
    for e in events:
        if "ts" not in e or e.get("ph") == "M":
            out.append(e)
            continue
        ts = float(e["ts"])
        has_dur = "dur" in e
        end = _end(e)
        is_device = e.get("cat") in _DEVICE_CATS or (e.get("ph") in ("f", "t") and e.get("pid") in dev_pids)
        if is_device:
            if id(e) in stretched:  # the waiter's collective: D longer, at its start
                start_shift = n_lt(ts)
                extra = 1
            elif straggler:
                corr = (e.get("args") or {}).get("correlation") if e.get("ph") == "X" else e.get("id")
                at = launch.get(corr, ts) if isinstance(corr, int) else ts
                start_shift, extra = n_le(at), 0
            else:
                start_shift, extra = n_le(ts), 0
            new_ts, new_end = ts + start_shift * d_us, end + (start_shift + extra) * d_us
        else:
            start_shift = n_le(ts)
            if start_shift and points[start_shift - 1] == ts and (
                id(e) in stretched or (straggler and has_dur and end >= step_end_at[ts])
            ):
                start_shift -= 1  # the step's range (or one enclosing it) starts where it did
            new_ts = ts + start_shift * d_us
            new_end = max(new_ts, end + n_lt(end) * d_us)
        n = dict(e)
        n["ts"] = round(new_ts, 3)
        if has_dur:
            n["dur"] = round(new_end - new_ts, 3)
        out.append(n)
    if straggler:
        ext = 1 + max(
            [0] + [v for e in events for v in [(e.get("args") or {}).get("External id")] if isinstance(v, int)]
        )
        for i, s in enumerate(steps):
            out.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": DATALOADER_NAME,
                    "pid": s.get("pid"),
                    "tid": s.get("tid"),
                    "ts": round(float(s["ts"]) + i * d_us, 3),
                    "dur": round(d_us, 3),
                    "args": {"External id": ext + i, "Trace name": "PyTorch Profiler", "Trace iteration": 0},
                }
            )
    out.sort(key=lambda e: (e.get("ph") != "M", float(e.get("ts", 0))))
    return out


# --- serialising and gzip ---------------------------------------------------------


def _dumps(v: object) -> str:
    return json.dumps(v, separators=(", ", ": "))


def distributed_info(base: Optional[dict], rank: int, world_size: int) -> dict:
    info = dict(base or {"backend": "nccl"})
    info["rank"] = rank
    info["world_size"] = world_size
    if isinstance(info.get("pg_config"), list):
        info["pg_config"] = [
            dict(pg, pg_size=world_size, ranks=list(range(world_size))) if pg.get("pg_desc") == "default_pg" else pg
            for pg in info["pg_config"]
            if isinstance(pg, dict)
        ]
    return info


def head_text(head: Sequence[Tuple[str, object]], rank: int, world_size: int) -> bytes:
    """The document up to the opening of traceEvents, with this rank's distributedInfo."""
    base_info = dict(head).get("distributedInfo")
    items = [(k, v) for k, v in head if k != "distributedInfo"]
    items.append(("distributedInfo", distributed_info(base_info if isinstance(base_info, dict) else None, rank, world_size)))
    lines = [f"  {json.dumps(k)}: {_dumps(v)}," for k, v in items]
    return ("{\n" + "\n".join(lines) + '\n  "traceEvents": [\n').encode()


def body_text(events: List[dict], tail: Sequence[Tuple[str, object]]) -> bytes:
    """The events (one per line, as Kineto writes them) and the keys after traceEvents."""
    parts = [",\n".join("    " + _dumps(e) for e in events), "\n  ]"]
    for k, v in tail:
        parts.append(f",\n  {json.dumps(k)}: {_dumps(v)}")
    parts.append("\n}\n")
    return "".join(parts).encode()


def _gf2_times(mat: List[int], vec: int) -> int:
    s, i = 0, 0
    while vec:
        if vec & 1:
            s ^= mat[i]
        vec >>= 1
        i += 1
    return s


def _gf2_square(mat: List[int]) -> List[int]:
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A+B from crc(A), crc(B) and len(B) (zlib's crc32_combine):
    crc(A) is carried through len(B) zero bytes by squaring the GF(2)
    operator of one zero byte once per bit of len(B)."""
    one_bit = [0xEDB88320] + [1 << n for n in range(31)]
    op = _gf2_square(_gf2_square(_gf2_square(one_bit)))  # one zero byte
    while len2 > 0:
        if len2 & 1:
            crc1 = _gf2_times(op, crc1)
        len2 >>= 1
        if len2:
            op = _gf2_square(op)
    return crc1 ^ crc2


class CompressedBody:
    """A body deflated once (raw deflate, final block), with its CRC-32 and length."""

    def __init__(self, text: bytes, level: int = 6):
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        self.deflate = c.compress(text) + c.flush(zlib.Z_FINISH)
        self.crc = zlib.crc32(text)
        self.length = len(text)


_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, OS unknown


def gzip_member(head: bytes, body: CompressedBody, level: int = 6) -> bytes:
    """One gzip member of head + body: head deflated alone and fully flushed, then body's blocks."""
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    head_deflate = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    crc = crc32_combine(zlib.crc32(head), body.crc, body.length)
    trailer = struct.pack("<II", crc, (len(head) + body.length) & 0xFFFFFFFF)
    return _GZIP_HEADER + head_deflate + body.deflate + trailer


# --- the whole job -----------------------------------------------------------------


def rank_file_name(rank: int) -> str:
    return f"rank{rank:05d}.json.gz"


def copies_for_target(events: List[dict], tail, target_mb: float, level: int = 6) -> int:
    """The fewest whole copies whose compressed size reaches target_mb (MB = 1e6 bytes)."""
    one = CompressedBody(body_text(plant(events, False, 1.0), tail), level)
    return max(1, math.ceil(target_mb * 1e6 / len(one.deflate)))


def make_rank_traces(
    out_dir,
    ranks: int,
    straggler: int = 0,
    delay_ms: float = 20.0,
    base=DEFAULT_BASE,
    copies: Optional[int] = None,
    target_mb: Optional[float] = None,
    level: int = 6,
) -> dict:
    """Writes ranks files into out_dir; returns what was planted and written (a plain dict)."""
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    if not 0 <= straggler < ranks:
        raise ValueError(f"straggler rank {straggler} is not in 0..{ranks - 1}")
    if delay_ms <= 0:
        raise ValueError("delay_ms must be > 0")
    t0 = time.perf_counter()
    head, tail, events = load_base(Path(base))
    if copies is None:
        copies = copies_for_target(events, tail, target_mb, level) if target_mb else 1
    events = repeat_events(events, copies)
    steps = step_ranges(events)
    first_collectives(events, steps)  # fail early when a step has no collective
    bodies = {
        True: CompressedBody(body_text(plant(events, True, delay_ms), tail), level),
        False: CompressedBody(body_text(plant(events, False, delay_ms), tail), level),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths, sizes = [], []
    for r in range(ranks):
        data = gzip_member(head_text(head, r, ranks), bodies[r == straggler], level)
        p = out / rank_file_name(r)
        tmp = p.with_name(p.name + ".part")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
        paths.append(str(p))
        sizes.append(len(data))
    return {
        "base": str(base),
        "ranks": ranks,
        "straggler": straggler,
        "delay_ms": float(delay_ms),
        "copies": copies,
        "steps": [int(s["name"].split("#", 1)[1]) for s in steps],
        "paths": paths,
        "compressed_bytes": sizes,
        "uncompressed_bytes": {"straggler": bodies[True].length, "other": bodies[False].length},
        "seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--straggler", type=int, default=0, help="the slow rank (default 0)")
    p.add_argument("--delay-ms", type=float, default=20.0, help="D: the straggler's DataLoader time per step")
    p.add_argument("--base", default=str(DEFAULT_BASE), help="the real rank trace to start from")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--copies", type=int, help="repeat the base's events this many times per rank")
    g.add_argument("--target-mb", type=float, help="repeat them to about this compressed size (MB = 1e6 bytes)")
    p.add_argument("--level", type=int, default=6, help="deflate level (default 6)")
    args = p.parse_args(argv)
    try:
        info = make_rank_traces(
            args.out_dir, args.ranks, args.straggler, args.delay_ms, args.base, args.copies, args.target_mb, args.level
        )
    except (OSError, ValueError) as exc:
        print(f"make_rank_traces: error: {exc}", file=sys.stderr)
        return 2
    sizes = info["compressed_bytes"]
    print(
        f"make_rank_traces: {info['ranks']} ranks in {args.out_dir} (straggler {info['straggler']}, "
        f"D {info['delay_ms']:g} ms, {len(info['steps'])} steps, {info['copies']} copies of the base), "
        f"{sum(sizes) / 1e6:.1f} MB compressed ({max(sizes) / 1e6:.2f} MB per rank), {info['seconds']:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
