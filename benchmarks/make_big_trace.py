#!/usr/bin/env python3
"""Writes a large synthetic Kineto trace: a real trace's events repeated with shifted times.

Used by the streaming-import benchmark (benchmarks/RESULTS.md, "Streaming
import"): a 1 GB trace is a shared trace of ~32 MB repeated 32 times. Each
copy k shifts every timestamp by k x (the trace's span rounded up to a
whole millisecond), and renumbers what must stay unique across copies:
`ProfilerStep#N` (by k x the number of steps), `correlation`, `External id`
and flow-arrow `id` values (by k x one more than the largest seen). The
text is edited in place with regular expressions, so the copies keep the
source's layout (Kineto's `},\\n  {` between events, its indentation) and
its exact decimal timestamps (`ts` values with fractional microseconds
keep their digits; only the integer part is shifted).

Usage:
  make_big_trace.py SOURCE(.json|.json.gz) OUT(.json|.json.gz) --copies N
  make_big_trace.py SOURCE OUT --target-mb 1000
Progress goes to stderr, one line per copy.
"""

import argparse
import gzip
import re
import sys

_TS = re.compile(rb'("ts": )(\d+)')
_DUR_ONLY = re.compile(rb'"dur": (\d+)')
_STEP = re.compile(rb"ProfilerStep#(\d+)")
_IDS = re.compile(rb'("(?:correlation|External id|id)": )(\d+)')


def _open_read(path):
    with open(path, "rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _split(text):
    """(head, events, tail): events is the traceEvents array's inside."""
    key = text.find(b'"traceEvents"')
    if key < 0:
        raise SystemExit("make_big_trace: the source has no traceEvents array")
    open_at = text.index(b"[", key) + 1
    # The array's closing bracket: the last `]` before the root's final `}`
    # when traceEvents is the last key (Kineto writes it so); otherwise the
    # first `\n  ]` after the array opens.
    close_at = text.find(b"\n  ]", open_at)
    if close_at < 0:
        close_at = text.rindex(b"]")
    return text[:open_at], text[open_at:close_at], text[close_at:]


def _span_us(events):
    """An upper bound of the events' time span in whole microseconds."""
    ts = [int(m.group(2)) for m in _TS.finditer(events)]
    durs = [int(m.group(1)) for m in _DUR_ONLY.finditer(events)]
    if not ts:
        return 1
    return max(ts) + (max(durs) if durs else 0) + 1 - min(ts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("out")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--copies", type=int)
    g.add_argument("--target-mb", type=float, help="stop after the first copy that reaches this size (MB = 1e6 bytes)")
    args = p.parse_args(argv)

    with _open_read(args.source) as f:
        text = f.read()
    head, events, tail = _split(text)
    span_us = (_span_us(events) // 1000 + 1) * 1000
    steps = [int(m.group(1)) for m in _STEP.finditer(events)]
    step_shift = (max(steps) - min(steps) + 1) if steps else 0
    ids = [int(m.group(2)) for m in _IDS.finditer(events)]
    id_shift = (max(ids) + 1) if ids else 0
    per_copy = len(events) + 4
    copies = args.copies if args.copies else max(1, int(-(-args.target_mb * 1e6 // per_copy)))

    out = gzip.open(args.out, "wb", compresslevel=1) if args.out.endswith(".gz") else open(args.out, "wb")
    written = 0
    with out:
        out.write(head)
        for k in range(copies):
            if k == 0:
                chunk = events
            else:
                ts_add, step_add, id_add = k * span_us, k * step_shift, k * id_shift
                chunk = _TS.sub(lambda m: m.group(1) + str(int(m.group(2)) + ts_add).encode(), events)
                chunk = _STEP.sub(lambda m: b"ProfilerStep#" + str(int(m.group(1)) + step_add).encode(), chunk)
                chunk = _IDS.sub(lambda m: m.group(1) + str(int(m.group(2)) + id_add).encode(), chunk)
                out.write(b",")
            out.write(chunk)
            written += len(chunk)
            print(f"make_big_trace: copy {k + 1}/{copies}, {written / 1e6:.0f} MB", file=sys.stderr, flush=True)
        out.write(tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
