"""Mutations of real Kineto traces for the process-level fuzzer
(mutate_traces.py): one seed number gives one mutated input, always the same.

A trace is loaded once as a prefix (the document up to its ``traceEvents``
array), the text of every event as it stands in the file, and a suffix; a
case copies that list, applies one to three event-level mutations (events
duplicated, deleted, reordered or cut to a window; ``ProfilerStep#N`` markers
duplicated at other times, swapped, renumbered, nested; numbers replaced by
extremes: 0, negatives, 1e308, huge integers, NaN text; intervals ending
before they start; names with control characters and newlines; categories,
phases, correlation ids and devices changed), joins the events back, and may
then apply byte-level mutations (truncation, byte flips, spans deleted or
duplicated, structural characters, invalid UTF-8) and gzip-level ones (a
truncated or corrupted member, a bad CRC or length, trailing garbage, a
second member). The ideas follow tests/cpp/mutation.h, the in-process
mutator; this one works on whole files for the command-line tools.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

# Number texts that stress the importer's number and time handling: zero and
# negatives, the edges of int64/uint64, doubles at their limits and beyond,
# and tokens that are not JSON (NaN, Infinity) or not numbers at all.
EXTREME_NUMBERS = [
    "0", "-0", "-1", "1", "-0.0005", "0.0000001", "1e308", "-1e308", "1e-308", "4.9e-324", "1e400", "-1e400",
    "1.7976931348623157e308", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "18446744073709551615", "18446744073709551616", "123456789012345678901234567890",
    "9007199254740993", "9223372036854775.807", "-9223372036854775.808", "9e15", "-9e15", "4611686018427387.904",
    "-4611686018427387.904", "86400000000.001", "1e19", "NaN", "-NaN", "Infinity", "-Infinity",
    "nan", "null", "true", "\"12\"", "[]", "{}",
]

# Names that a trace should never contain but a mutated one may.
STRANGE_NAMES = [
    "", "\n", "a\nb", "ProfilerStep#1\nProfilerStep#2", "tab\there", "nul\u0000byte", "\r\n", "\u001b[31mred\u001b[0m",
    "line\u2028sep", "\ud800lone", "quote\"and\\backslash", "\u00ff\u00fe", "\U0001f600", "x" * 70000,
    "ProfilerStep#", "ProfilerStep#-1", "ProfilerStep#99999999999999999999", "nccl:all_reduce\u0007",
    "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__\n", "cudaLaunchKernel\u0000",
]

STEP_NUMBERS = ["-1", "0", "1", "2", "99999999999999999999", "9223372036854775807", "9223372036854775808", "1e3",
                "", " 3", "3 ", "03", "+4", "0x10", "1.5", "\u0663"]

CATEGORIES = ["kernel", "Kernel", "cpu_op", "Operator", "cuda_runtime", "Runtime", "cuda_driver", "gpu_memcpy",
              "Memcpy", "gpu_memset", "Memset", "user_annotation", "gpu_user_annotation", "python_function",
              "cuda_sync", "ac2g", "Trace", "", "KERNEL", "brand_new"]
PHASES = ["X", "B", "E", "i", "I", "M", "s", "t", "f", "C", "b", "e", "", "XX"]

_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_NUMBER_TEXT = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STEP = re.compile(r'"ProfilerStep#[^"]*"')
_EVENTS_KEY = re.compile(r'"traceEvents"\s*:\s*\[')


@dataclass
class Seed:
    """A real trace, split into prefix, event texts and suffix."""

    name: str
    prefix: str
    events: List[str]
    suffix: str

    @classmethod
    def load(cls, path: Path) -> "Seed":
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "surrogateescape")
        stripped = text.lstrip()
        if stripped.startswith("["):
            at = len(text) - len(stripped) + 1
        else:
            m = _EVENTS_KEY.search(text)
            if m is None:
                raise ValueError(f"{path}: no traceEvents array")
            at = m.end()
        decoder = json.JSONDecoder()
        events: List[str] = []
        i = at
        n = len(text)
        while True:
            while i < n and text[i] in " \t\r\n":
                i += 1
            if i < n and text[i] == "]":
                break
            _, end = decoder.raw_decode(text, i)
            events.append(text[i:end])
            i = end
            while i < n and text[i] in " \t\r\n":
                i += 1
            if i < n and text[i] == ",":
                i += 1
        return cls(path.name, text[:at], events, text[i:])

    def render(self, events: Optional[List[str]] = None) -> str:
        return self.prefix + ",\n".join(self.events if events is None else events) + self.suffix


@dataclass
class Mutant:
    """One mutated input: the bytes, the file suffix, what was done."""

    data: bytes
    suffix: str
    mutations: List[str] = field(default_factory=list)


# ----------------------------------------------------------------- events


class _Events:
    """The case's event texts with helpers to edit single events."""

    def __init__(self, seed: Seed, rng: random.Random) -> None:
        self.seed = seed
        self.rng = rng
        self.items = list(seed.events)
        self.prefix = seed.prefix
        self.suffix = seed.suffix

    def pick(self, where: Optional[Callable[[str], bool]] = None) -> Optional[int]:
        if not self.items:
            return None
        if where is not None and self.rng.random() < 0.8:
            hits = [i for i, e in enumerate(self.items) if where(e)] if len(self.items) < 50000 else [
                i for i in (self.rng.randrange(len(self.items)) for _ in range(2000)) if where(self.items[i])]
            if hits:
                return self.rng.choice(hits)
        return self.rng.randrange(len(self.items))

    def parsed(self, i: int) -> Optional[Dict[str, Any]]:
        try:
            obj = json.loads(self.items[i])
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None

    def pick_parsed(self, where: Callable[[str], bool]) -> Tuple[int, Optional[Dict[str, Any]]]:
        """An event (preferring those `where` accepts) and its object; (-1, None) when there is none."""
        i = self.pick(where)
        return (-1, None) if i is None else (i, self.parsed(i))

    def dump(self, obj: Any, raw: Optional[Dict[str, str]] = None) -> str:
        """JSON text of obj; each placeholder string key of `raw` becomes its raw token."""
        text = json.dumps(obj, ensure_ascii=self.rng.random() < 0.5)
        for placeholder, token in (raw or {}).items():
            text = text.replace(json.dumps(placeholder), token)
        return text


def _is_step(e: str) -> bool:
    return "ProfilerStep#" in e


def _is_device(e: str) -> bool:
    return any(c in e for c in ('"kernel"', '"Kernel"', '"gpu_memcpy"', '"Memcpy"', '"gpu_memset"', '"Memset"'))


def _is_runtime(e: str) -> bool:
    return '"cuda_runtime"' in e or '"Runtime"' in e or '"cuda_driver"' in e


def _interesting(e: str) -> bool:
    return _is_step(e) or _is_device(e) or _is_runtime(e)


def _numeric_paths(obj: Any, path: Tuple[Any, ...] = ()) -> List[Tuple[Any, ...]]:
    out: List[Tuple[Any, ...]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _numeric_paths(v, path + (k,))
    elif isinstance(obj, list):
        for k, v in enumerate(obj):
            out += _numeric_paths(v, path + (k,))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out.append(path)
    return out


def _set_path(obj: Any, path: Tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def ev_duplicate(ev: _Events) -> str:
    rng = ev.rng
    if not ev.items:
        return "duplicate: no events"
    if rng.random() < 0.5:
        i = ev.pick(_interesting)
        assert i is not None
        copies = rng.choice([1, 1, 2, 10])
        for _ in range(copies):
            ev.items.insert(rng.randrange(len(ev.items) + 1), ev.items[i])
        return f"duplicate event #{i} x{copies}"
    a = rng.randrange(len(ev.items))
    b = min(len(ev.items), a + rng.choice([2, 10, 100, 1000]))
    span = ev.items[a:b]
    at = rng.randrange(len(ev.items) + 1)
    ev.items[at:at] = span
    return f"duplicate events [{a}, {b}) at {at}"


def ev_delete(ev: _Events) -> str:
    rng = ev.rng
    if not ev.items:
        return "delete: no events"
    a = rng.randrange(len(ev.items))
    b = min(len(ev.items), a + rng.choice([1, 1, 10, 100, 5000]))
    del ev.items[a:b]
    return f"delete events [{a}, {b})"


def ev_reorder(ev: _Events) -> str:
    rng = ev.rng
    if len(ev.items) < 2:
        return "reorder: too few events"
    mode = rng.randrange(3)
    if mode == 0:
        a = rng.randrange(len(ev.items))
        b = min(len(ev.items), a + rng.choice([2, 10, 500]))
        window = ev.items[a:b]
        rng.shuffle(window)
        ev.items[a:b] = window
        return f"shuffle events [{a}, {b})"
    if mode == 1:
        ev.items.reverse()
        return "reverse all events"
    i, j = rng.randrange(len(ev.items)), rng.randrange(len(ev.items))
    ev.items[i], ev.items[j] = ev.items[j], ev.items[i]
    return f"swap events #{i} and #{j}"


def ev_window(ev: _Events) -> str:
    """Keeps a contiguous window of events: a trace cut anywhere."""
    rng = ev.rng
    n = len(ev.items)
    if n < 10:
        return "window: too few events"
    size = rng.choice([1, 50, 500, 3000])
    a = rng.randrange(max(1, n - size))
    ev.items = ev.items[a:a + size]
    return f"keep events [{a}, {a + size})"


def ev_step_marker(ev: _Events) -> str:
    rng = ev.rng
    steps = [i for i, e in enumerate(ev.items) if _is_step(e)]
    if not steps:
        i = ev.pick(lambda e: '"cpu_op"' in e or '"user_annotation"' in e or '"Operator"' in e)
        if i is None:
            return "step: no events"
        obj = ev.parsed(i)
        if obj is None:
            return "step: unparsable event"
        obj["name"] = f"ProfilerStep#{rng.choice(STEP_NUMBERS)}"
        ev.items[i] = ev.dump(obj)
        return f"event #{i} renamed {obj['name']!r}"
    i = rng.choice(steps)
    obj = ev.parsed(i)
    if obj is None:
        return "step: unparsable event"
    mode = rng.randrange(6)
    ts = obj.get("ts") if isinstance(obj.get("ts"), (int, float)) else 0
    dur = obj.get("dur") if isinstance(obj.get("dur"), (int, float)) else 0
    if mode == 0:  # the same step number again at another time (issue 32 item 7)
        dup = copy.deepcopy(obj)
        dup["ts"] = ts + rng.choice([-10 * dur - 1e6, -dur / 2, dur / 3, dur, 5 * dur + 1e3, 1e9])
        dup["dur"] = dur * rng.choice([1, 1000, 0.001, 0])
        ev.items.insert(rng.randrange(len(ev.items) + 1), ev.dump(dup))
        return f"step #{i} {obj.get('name')!r} again at ts {dup['ts']} dur {dup['dur']}"
    if mode == 1 and len(steps) > 1:  # swap two step numbers
        j = rng.choice([s for s in steps if s != i])
        other = ev.parsed(j)
        if other is None:
            return "step: unparsable event"
        obj["name"], other["name"] = other.get("name"), obj.get("name")
        ev.items[i], ev.items[j] = ev.dump(obj), ev.dump(other)
        return f"swap step names of events #{i} and #{j}"
    if mode == 2:  # renumber
        obj["name"] = f"ProfilerStep#{rng.choice(STEP_NUMBERS)}"
        ev.items[i] = ev.dump(obj)
        return f"step #{i} renamed {obj['name']!r}"
    if mode == 3:  # nested or overlapping another window
        obj["ts"] = ts + rng.choice([dur / 2, -dur / 2, 1, -1])
        obj["dur"] = dur * rng.choice([0.5, 2, 1])
        ev.items[i] = ev.dump(obj)
        return f"step #{i} moved to ts {obj['ts']} dur {obj['dur']}"
    if mode == 4:  # every step marker gone but one, or all of them
        keep = rng.choice([None, i])
        ev.items = [e for k, e in enumerate(ev.items) if not _is_step(e) or k == keep]
        return "step markers removed" + ("" if keep is None else f" but #{keep}")
    obj["tid"] = rng.choice([0, -1, "other thread", 2**40])  # on another thread
    obj["pid"] = rng.choice([obj.get("pid"), 0, "Spans"])
    ev.items[i] = ev.dump(obj)
    return f"step #{i} moved to pid {obj['pid']!r} tid {obj['tid']!r}"


def ev_extreme_number(ev: _Events) -> str:
    rng = ev.rng
    i, obj = ev.pick_parsed(_interesting)
    if obj is None:
        return "number: no usable event"
    paths = _numeric_paths(obj)
    if not paths:
        return "number: event without numbers"
    preferred = [p for p in paths if p[-1] in ("ts", "dur", "device", "stream", "correlation", "bytes", "pid", "tid")]
    path = rng.choice(preferred if preferred and rng.random() < 0.7 else paths)
    token = rng.choice(EXTREME_NUMBERS)
    _set_path(obj, path, "\u0000NUM\u0000")
    ev.items[i] = ev.dump(obj, {"\u0000NUM\u0000": token})
    return f"event #{i} {'.'.join(map(str, path))} = {token}"


def ev_end_before_start(ev: _Events) -> str:
    rng = ev.rng
    i, obj = ev.pick_parsed(_interesting)
    if obj is None:
        return "end<start: no usable event"
    dur = obj.get("dur") if isinstance(obj.get("dur"), (int, float)) else 1
    obj["dur"] = rng.choice([-abs(dur) or -1, -1e-3, -0.0, -1e6])
    ev.items[i] = ev.dump(obj)
    return f"event #{i} dur {obj['dur']}"


def ev_name(ev: _Events) -> str:
    rng = ev.rng
    i, obj = ev.pick_parsed(_interesting)
    if obj is None:
        return "name: no usable event"
    name = rng.choice(STRANGE_NAMES)
    obj["name"] = name
    text = ev.dump(obj)
    if rng.random() < 0.3:  # an unescaped control character or raw newline inside the string
        text = text.replace("\\n", "\n").replace("\\t", "\t").replace("\\u0000", "\u0000")
    ev.items[i] = text
    return f"event #{i} name {name[:40]!r}{'...' if len(name) > 40 else ''}"


def ev_kind(ev: _Events) -> str:
    rng = ev.rng
    i, obj = ev.pick_parsed(_interesting)
    if obj is None:
        return "kind: no usable event"
    mode = rng.randrange(3)
    if mode == 0:
        obj["cat"] = rng.choice(CATEGORIES)
        what = f"cat {obj['cat']!r}"
    elif mode == 1:
        obj["ph"] = rng.choice(PHASES)
        what = f"ph {obj['ph']!r}"
    else:
        key = rng.choice(["name", "ts", "dur", "ph", "cat", "pid", "tid", "args"])
        if rng.random() < 0.5:
            obj.pop(key, None)
            what = f"without {key}"
        else:
            obj[key] = rng.choice([None, [], {}, "x", True, [1, 2]])
            what = f"{key} = {obj[key]!r}"
    ev.items[i] = ev.dump(obj)
    return f"event #{i} {what}"


def ev_links(ev: _Events) -> str:
    """Correlation ids and device/stream labels changed or shared."""
    rng = ev.rng
    i, obj = ev.pick_parsed(lambda e: _is_device(e) or _is_runtime(e))
    if obj is None or not isinstance(obj.get("args"), dict):
        return "links: no event with args"
    key = rng.choice(["correlation", "device", "stream", "External id"])
    value = rng.choice([0, -1, 1, 7, 2**31, 2**63 - 1, 10**30])
    obj["args"][key] = value
    ev.items[i] = ev.dump(obj)
    return f"event #{i} args.{key} = {value}"


def ev_shift(ev: _Events) -> str:
    """One event, or a run of them, moved far in time (a clock fault)."""
    rng = ev.rng
    if not ev.items:
        return "shift: no events"
    a = rng.randrange(len(ev.items))
    b = min(len(ev.items), a + rng.choice([1, 20, 300]))
    delta = rng.choice([-1e12, -1e6, 1e6, 1e12, 1e15])
    scale = rng.choice([1, 1, 1000, 0.001])
    for k in range(a, b):
        obj = ev.parsed(k)
        if obj is None or not isinstance(obj.get("ts"), (int, float)):
            continue
        obj["ts"] = obj["ts"] * scale + delta
        ev.items[k] = ev.dump(obj)
    return f"events [{a}, {b}) ts * {scale} + {delta}"


def ev_top_level(ev: _Events) -> str:
    """The document around the events: metadata numbers, the traceEvents key."""
    rng = ev.rng
    mode = rng.randrange(4)
    if mode == 0:
        matches = list(_NUMBER_TEXT.finditer(ev.prefix))
        if not matches:
            return "top: no number in the prefix"
        m = rng.choice(matches)
        token = rng.choice(EXTREME_NUMBERS)
        ev.prefix = ev.prefix[:m.start()] + token + ev.prefix[m.end():]
        return f"top: prefix number at {m.start()} = {token}"
    if mode == 1:
        renamed = rng.choice(['"traceEvent"', '"TraceEvents"', '"traceEvents "'])
        ev.prefix = ev.prefix.replace('"traceEvents"', renamed, 1)
        return "top: traceEvents key renamed"
    if mode == 2 and ev.prefix.lstrip().startswith("{"):
        extra = rng.choice(['"traceEvents": null, ', '"traceEvents": {}, ', '"traceEvents": [1, 2], ',
                            '"deviceProperties": 5, ', '"baseTimeNanoseconds": 1e308, ',
                            '"distributedInfo": {"rank": -1}, ', '"deviceProperties": [{"id": -1, "numSms": 0}], '])
        at = ev.prefix.index("{") + 1
        ev.prefix = ev.prefix[:at] + extra + ev.prefix[at:]
        return f"top: inserted {extra.strip()}"
    ev.suffix = ev.suffix + rng.choice([", ", "]", "}", " {}", "\u0000", "garbage"])
    return "top: content after the document"


EVENT_MUTATIONS: List[Callable[[_Events], str]] = [
    ev_duplicate, ev_delete, ev_reorder, ev_window, ev_step_marker, ev_step_marker, ev_extreme_number,
    ev_extreme_number, ev_end_before_start, ev_name, ev_kind, ev_links, ev_shift, ev_top_level,
]


# ----------------------------------------------------------------- bytes


def by_truncate(d: bytearray, rng: random.Random) -> str:
    n = rng.randrange(len(d) + 1)
    del d[n:]
    return f"truncate at {n}"


def by_flip(d: bytearray, rng: random.Random) -> str:
    if not d:
        return "flip: empty"
    at = []
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(d))
        d[i] = rng.randrange(256)
        at.append(i)
    return f"flip bytes at {at}"


def by_delete_span(d: bytearray, rng: random.Random) -> str:
    a = rng.randrange(len(d) + 1)
    n = rng.choice([1, 16, 64, 4096])
    del d[a:a + n]
    return f"delete bytes [{a}, {a + n})"


def by_duplicate_span(d: bytearray, rng: random.Random) -> str:
    if not d:
        return "dup span: empty"
    a = rng.randrange(len(d))
    span = d[a:a + rng.choice([1, 32, 128, 4096])]
    at = rng.randrange(len(d) + 1)
    d[at:at] = span
    return f"duplicate {len(span)} bytes from {a} at {at}"


def by_structural(d: bytearray, rng: random.Random) -> str:
    at = rng.randrange(len(d) + 1)
    ch = rng.choice([b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"[" * 10000, b"\x00", b"\n", b"\xff",
                     b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf"])
    d[at:at] = ch
    return f"insert {ch[:8]!r}{'...' if len(ch) > 8 else ''} at {at}"


def by_number(d: bytearray, rng: random.Random) -> str:
    m = _NUMBER.search(d, rng.randrange(len(d) + 1)) if d else None
    if m is None:
        return "number: none after the point"
    token = rng.choice(EXTREME_NUMBERS).encode()
    d[m.start():m.end()] = token
    return f"number at {m.start()} = {token.decode()}"


def by_whole(d: bytearray, rng: random.Random) -> str:
    mode = rng.randrange(4)
    if mode == 0:
        d[:0] = b"\xef\xbb\xbf"
        return "UTF-8 BOM first"
    if mode == 1:
        d[:] = rng.choice([b"", b" ", b"{}", b"[]", b"null", b"{\"traceEvents\": []}", b"\x1f\x8b"])
        return f"whole document {bytes(d)!r}"
    if mode == 2:
        d[:] = d.replace(b",", b",\n" * 2, rng.randint(1, 100))
        return "newlines after commas"
    d[:] = d.replace(b"  ", b"\t")
    return "tabs for double spaces"


BYTE_MUTATIONS: List[Callable[[bytearray, random.Random], str]] = [
    by_truncate, by_flip, by_flip, by_delete_span, by_duplicate_span, by_structural, by_number, by_number, by_whole,
]


# ----------------------------------------------------------------- gzip


def gz_mutate(d: bytes, rng: random.Random) -> Tuple[bytes, str]:
    b = bytearray(d)
    mode = rng.randrange(8)
    if mode == 0:
        n = rng.randrange(len(b) + 1)
        return bytes(b[:n]), f"gzip truncated at {n} of {len(d)}"
    if mode == 1 and len(b) > 18:
        i = rng.randrange(10, len(b) - 8)
        b[i] ^= 1 << rng.randrange(8)
        return bytes(b), f"gzip body bit flipped at {i}"
    if mode == 2 and len(b) >= 8:
        b[-8] ^= 0xFF
        return bytes(b), "gzip CRC32 wrong"
    if mode == 3 and len(b) >= 4:
        b[-4:] = struct.pack("<I", rng.choice([0, 1, 0xFFFFFFFF]))
        return bytes(b), "gzip ISIZE wrong"
    if mode == 4:
        tail = rng.choice([b"garbage", b"\x00" * 100, b"\x1f\x8b", b"\x1f\x8b\x08\x00" + b"\x00" * 6])
        return bytes(b) + tail, f"gzip trailing {tail[:8]!r}"
    if mode == 5:
        second = gzip.compress(rng.choice([b"", b" ", b"{\"traceEvents\": []}"]))
        return bytes(b) + second, "gzip second member"
    if mode == 6 and len(b) > 3:
        b[3] |= rng.choice([0x04, 0x08, 0x10, 0xE0])  # FEXTRA/FNAME/FCOMMENT/reserved flags with no such fields
        return bytes(b), f"gzip header flags {b[3]:#x}"
    if len(b) > 2:
        b[rng.randrange(2)] ^= 0xFF
    return bytes(b), "gzip magic broken"


def _gzip(data: bytes, level: int) -> bytes:
    # mtime 0: the same bytes every time for the same seed.
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


# ----------------------------------------------------------------- cases


def make_mutant(seeds: List[Seed], seed: int) -> Tuple[Seed, Mutant]:
    """The mutated input of case `seed` (deterministic)."""
    rng = random.Random(seed)
    base = rng.choice(seeds)
    ev = _Events(base, rng)
    done: List[str] = [f"trace {base.name}"]
    big = len(base.events) > 20000
    if big and rng.random() < 0.6:
        done.append(ev_window(ev))
    n_events = rng.choice([0, 1, 1, 1, 2, 3])
    # Most cases stay valid JSON, so that most reach the analysis.
    n_bytes = rng.choice([0, 0, 0, 0, 0, 0, 1, 1, 2]) if n_events else rng.choice([1, 1, 2])
    for _ in range(n_events):
        done.append(rng.choice(EVENT_MUTATIONS)(ev))
    # surrogatepass: a lone surrogate in a mutated name becomes invalid UTF-8.
    data = bytearray((ev.prefix + ",\n".join(ev.items) + ev.suffix).encode("utf-8", "surrogatepass"))
    for _ in range(n_bytes):
        done.append(rng.choice(BYTE_MUTATIONS)(data, rng))
    out = bytes(data)
    suffix = ".json"
    if rng.random() < (0.15 if big else 0.35):
        out = _gzip(out, rng.choice([1, 6, 9]))
        suffix = ".json.gz"
        done.append("gzip")
        if rng.random() < 0.4:
            out, what = gz_mutate(out, rng)
            done.append(what)
    if rng.random() < 0.03:  # the name says the other format
        suffix = ".json" if suffix == ".json.gz" else ".json.gz"
        done.append(f"named {suffix}")
    return base, Mutant(out, suffix, done)
