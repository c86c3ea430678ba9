"""Which rank each trace input is, before any is analysed: a bounded read of
each file's start (at most 1 MiB decompressed, gzip-aware, stopping as soon
as ``distributedInfo`` is parsed), in parallel threads, and the checks a
rank set must pass: every rank in ``[0, world_size)`` once.

``rank_from_name=REGEX`` takes the rank from the file's base name instead
(the first group, or the whole match), for traces that do not say.
Problems are one line naming the file(s): a duplicate rank always fails; a
missing rank or a file with no rank (or that cannot be read) fails under
``on_error="fail"`` and is set aside, with its reason, under ``"skip"``.
"""

from __future__ import annotations

import json
import os
import re
import zlib

from gpuutil.fanout._errors import FanoutError, one_line
from gpuutil.fanout._inputs import fsspec_module, is_url

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Dict, List, Optional, Sequence, Tuple

#: At most this much of a file's start (decompressed) is read to find its rank.
HEAD_LIMIT_BYTES = 1 << 20
_CHUNK_BYTES = 64 << 10
_KEY = re.compile(r'"distributedInfo"\s*:\s*\{')


class Input:
    """One trace input and what discovery learnt of it."""

    __slots__ = ("name", "rank", "world_size", "size_bytes", "problem")

    def __init__(self, name: str) -> None:
        self.name = name
        self.rank: Optional[int] = None
        self.world_size: Optional[int] = None
        self.size_bytes: Optional[int] = None
        self.problem: Optional[str] = None  # one line: why it cannot be used

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Input({self.name!r}, rank={self.rank}, world_size={self.world_size}, problem={self.problem!r})"


def _distributed_info(text: str) -> Optional[Dict[str, Any]]:
    m = _KEY.search(text)
    if m is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, m.end() - 1)
    except ValueError:
        return None  # cut by the chunk: read on
    return value if isinstance(value, dict) else None


def _open(name: str, storage_options: Dict[str, Any]) -> Tuple[Any, Optional[int]]:
    if is_url(name):
        fsspec = fsspec_module()
        # block_size is an argument of the file system's open(), not of its
        # constructor (s3fs hands unknown constructor arguments to aiobotocore).
        fs, path = fsspec.core.url_to_fs(name, **storage_options)
        f = fs.open(path, "rb", block_size=_CHUNK_BYTES)
        size = getattr(f, "size", None)
        return f, size if isinstance(size, int) else None
    f = open(name, "rb")  # noqa: SIM115 - closed by the caller
    return f, os.fstat(f.fileno()).st_size


def read_distributed_info(name: str, storage_options: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], Optional[int]]:
    """(distributedInfo or None, the file's size in bytes or None). Raises
    OSError (or a store's exception) when the file cannot be read."""
    f, size = _open(name, storage_options)
    try:
        inflate = None
        text = ""
        decoder = None
        produced = 0
        first = True
        while produced < HEAD_LIMIT_BYTES:
            chunk = f.read(_CHUNK_BYTES)
            if not chunk:
                break
            if first:
                first = False
                if chunk[:2] == b"\x1f\x8b":
                    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                import codecs

                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            if inflate is not None:
                try:
                    chunk = inflate.decompress(chunk, HEAD_LIMIT_BYTES - produced)
                except zlib.error as e:
                    raise OSError(f"broken gzip: {e}") from None
            produced += len(chunk)
            assert decoder is not None
            text += decoder.decode(chunk)
            info = _distributed_info(text)
            if info is not None:
                return info, size
            if inflate is not None and inflate.eof:
                break
        return None, size
    finally:
        f.close()


def _rank_of(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _discover_one(item: Input, storage_options: Dict[str, Any], pattern: Optional[re.Pattern]) -> Input:
    base = item.name.rstrip("/").rsplit("/", 1)[-1]
    if pattern is not None:
        m = pattern.search(base)
        if m is None:
            item.problem = f"{item.name}: its name does not match --rank-from-name {pattern.pattern!r}"
        else:
            text = m.group(1) if m.groups() else m.group(0)
            item.rank = int(text) if text.isdigit() else None
            if item.rank is None:
                item.problem = f"{item.name}: --rank-from-name matched {text!r}, not a rank number"
        try:  # the size, for progress; a missing file is named by its analysis
            item.size_bytes = None if is_url(item.name) else os.path.getsize(item.name)
        except OSError as e:
            item.problem = item.problem or f"cannot read {item.name}: {e.strerror or e}"
        return item
    try:
        info, item.size_bytes = read_distributed_info(item.name, storage_options)
    except FanoutError:
        raise
    except Exception as e:  # noqa: BLE001 - a store's error of any kind is one line naming the file
        why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}" if not isinstance(e, OSError) else str(e)
        item.problem = f"cannot read {item.name}: {one_line(why)}"
        return item
    if info is None:
        item.problem = (f"{item.name}: no distributedInfo in its first {HEAD_LIMIT_BYTES >> 20} MiB, so no rank "
                        "(pass --rank-from-name REGEX to take ranks from the file names)")
        return item
    item.rank = _rank_of(info.get("rank"))
    item.world_size = _rank_of(info.get("world_size"))
    if item.rank is None:
        item.problem = f"{item.name}: distributedInfo names no rank (pass --rank-from-name REGEX)"
    return item


def discover(names: Sequence[str], storage_options: Optional[Dict[str, Any]] = None,
             rank_from_name: Optional[str] = None, threads: int = 16) -> List[Input]:
    """Each input with its rank (or its problem), in the order given."""
    pattern = None
    if rank_from_name is not None:
        try:
            pattern = re.compile(rank_from_name)
        except re.error as e:
            raise FanoutError(f"--rank-from-name {rank_from_name!r} is not a regular expression: {e}") from None
    items = [Input(n) for n in names]
    opts = storage_options or {}
    if len(items) == 1:
        return [_discover_one(items[0], opts, pattern)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(items)))) as pool:
        return list(pool.map(lambda it: _discover_one(it, opts, pattern), items))


def _ranges(ranks: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5' (at most 8 runs, then '...')."""
    runs: List[str] = []
    values = sorted(ranks)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        runs.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(runs[:8]) + (", ..." if len(runs) > 8 else "")


class RankPlan:
    """The checked rank set: the inputs to analyse (by rank), the world size,
    and what was set aside under on_error="skip"."""

    def __init__(self) -> None:
        self.by_rank: Dict[int, Input] = {}
        self.world_size = 0
        self.skipped: List[Dict[str, Any]] = []  # {"rank", "input", "reason"}, by rank then input


def plan_ranks(items: Sequence[Input], on_error: str = "fail", world_size: Optional[int] = None) -> RankPlan:
    """Checks the discovered ranks (see the module's paragraph); FanoutError on a problem that fails."""
    plan = RankPlan()
    for it in items:
        if it.problem is not None:
            if on_error == "fail":
                raise FanoutError(it.problem)
            plan.skipped.append({"rank": it.rank, "input": it.name, "reason": it.problem})
            continue
        assert it.rank is not None
        other = plan.by_rank.get(it.rank)
        if other is not None:
            raise FanoutError(f"rank {it.rank} is in both {other.name} and {it.name} (one file per rank; pass "
                              "--rank-from-name REGEX to take ranks from the file names)")
        plan.by_rank[it.rank] = it
    if not plan.by_rank:
        raise FanoutError("no input has a rank to analyse" + (f" ({plan.skipped[0]['reason']})" if plan.skipped else ""))
    top = max(plan.by_rank) + 1
    said = max((it.world_size or 0 for it in plan.by_rank.values()), default=0)
    plan.world_size = world_size if world_size is not None else max(top, said)
    if top > plan.world_size:
        raise FanoutError(f"rank {top - 1} ({plan.by_rank[top - 1].name}) is outside world size {plan.world_size}")
    missing = [r for r in range(plan.world_size) if r not in plan.by_rank]
    if missing:
        if on_error == "fail":
            where = " (the traces' distributedInfo.world_size)" if world_size is None and said > top else ""
            raise FanoutError(f"missing rank{'s' if len(missing) > 1 else ''} {_ranges(missing)} of world size "
                              f"{plan.world_size}{where}: no input file (pass --on-error skip to analyse the ranks "
                              "present, or --world-size N)")
        plan.skipped.extend({"rank": r, "input": None, "reason": "no input file"} for r in missing)
    plan.skipped.sort(key=lambda s: (s["rank"] is None, s["rank"] if s["rank"] is not None else 0, s["input"] or ""))
    return plan
