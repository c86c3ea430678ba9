"""Planted straggler at scale (issue 30): 64 rank traces made from one real
shared trace by benchmarks/make_rank_traces.py, analysed by the offline
fan-out (gpuutil.analyze_ranks on their directory, local process pool).

Rank S spends D ms in a DataLoader range at each step start; every other
rank's first collective kernel of each step is D ms longer (its wait for
S). By construction: exactly S is the straggler, its cause is
`dataloader`, and each other rank waits D per step (within 5%). Also pins
the generator itself: ranks and world size rewritten, valid deterministic
gzip, the planted ranges where they belong, and the size option.

The base is ../shared/traces/hta_nccl_a100_rank0.json.gz (its README
forbids copies in the repository); the tests skip when it is absent.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest

from conftest import rank_trace_generator, traces_dir

gpuutil = pytest.importorskip("gpuutil")

BASE_NAME = "hta_nccl_a100_rank0.json.gz"
RANKS = 64
STRAGGLER = 37
# Above the straggler threshold: max(0.1 ms, 5% of the median step wall),
# 5% of this base's ~247 ms planted step is 12.4 ms (docs/distributed.md).
DELAY_MS = 25.0



gen = rank_trace_generator()


@pytest.fixture(scope="module")
def base() -> Path:
    p = traces_dir() / BASE_NAME
    if not p.is_file():
        pytest.skip(f"base trace {p} not found (set GPUUTIL_TRACES_DIR)")
    return p


@pytest.fixture(scope="module")
def job(base: Path, tmp_path_factory) -> Dict[str, Any]:
    out = tmp_path_factory.mktemp("ranks64")
    return gen.make_rank_traces(out, RANKS, STRAGGLER, DELAY_MS, base=base)


@pytest.fixture(scope="module")
def report(job: Dict[str, Any]) -> Dict[str, Any]:
    return gpuutil.analyze_ranks([str(Path(job["paths"][0]).parent)], jobs=2)


def _head_info(path: str) -> Dict[str, Any]:
    """distributedInfo from the file's first 64 KiB (decompressed), as discovery reads it."""
    with gzip.open(path, "rb") as f:
        head = f.read(65536).decode("utf-8", "replace")
    m = re.search(r'"distributedInfo": (\{.*?\}),\n', head)
    assert m, head[:300]
    return json.loads(m.group(1))


def _events(path: str) -> List[Dict[str, Any]]:
    with gzip.open(path, "rb") as f:
        return json.loads(f.read())["traceEvents"]


def _stragglers(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [f for f in report["findings"] if f["id"] == "straggler"]


# --- the generator -----------------------------------------------------------------


def test_generator_rewrites_each_files_rank_and_world_size_ahead_of_its_events(job: Dict[str, Any]) -> None:
    assert len(job["paths"]) == RANKS
    for r, p in enumerate(job["paths"]):
        assert Path(p).name == f"rank{r:05d}.json.gz"
        info = _head_info(p)
        assert (info["rank"], info["world_size"]) == (r, RANKS)
        assert info["pg_config"][0]["ranks"] == list(range(RANKS))


def test_generator_writes_valid_gzip_byte_identical_on_a_second_run(base: Path, tmp_path: Path) -> None:
    first = gen.make_rank_traces(tmp_path / "a", 3, 1, DELAY_MS, base=base)
    second = gen.make_rank_traces(tmp_path / "b", 3, 1, DELAY_MS, base=base)
    for p, q in zip(first["paths"], second["paths"]):
        assert Path(p).read_bytes() == Path(q).read_bytes()
        with gzip.open(p, "rb") as f:
            doc = json.loads(f.read())  # reads to the end: checks the combined CRC-32 and length
        assert doc["distributedInfo"]["world_size"] == 3


def test_crc32_combine_equals_the_crc_of_the_concatenation() -> None:
    import zlib

    for a, b in [(b"", b"x"), (b"head", b"body" * 10_000), (bytes(range(256)) * 7, b"\x00" * 123_457)]:
        assert gen.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_straggler_gets_a_dataloader_range_at_each_step_start_and_steps_d_longer(base: Path, job: Dict[str, Any]) -> None:
    _, _, base_events = gen.load_base(base)
    base_steps = {e["name"]: e for e in gen.step_ranges(base_events)}
    ev = _events(job["paths"][STRAGGLER])
    steps = gen.step_ranges(ev)
    loaders = sorted((e for e in ev if e.get("name") == gen.DATALOADER_NAME), key=lambda e: e["ts"])
    assert len(loaders) == len(steps) == len(base_steps) == 3
    for s, dl in zip(steps, loaders):
        assert dl["ts"] == s["ts"] and dl["dur"] == pytest.approx(DELAY_MS * 1000)
        assert (dl["pid"], dl["tid"], dl["cat"]) == (s["pid"], s["tid"], "user_annotation")
        assert s["dur"] == pytest.approx(base_steps[s["name"]]["dur"] + DELAY_MS * 1000, abs=0.002)
    assert _head_info(job["paths"][STRAGGLER])["rank"] == STRAGGLER


def test_other_ranks_first_collective_of_each_step_is_d_longer(base: Path, job: Dict[str, Any]) -> None:
    _, _, base_events = gen.load_base(base)
    base_first = gen.first_collectives(base_events, gen.step_ranges(base_events))
    ev = _events(job["paths"][0])
    first = gen.first_collectives(ev, gen.step_ranges(ev))
    assert [c["name"] for c in first] == [c["name"] for c in base_first]
    for c, b in zip(first, base_first):
        assert c["dur"] == pytest.approx(b["dur"] + DELAY_MS * 1000, abs=0.002)
    assert not any(e.get("name") == gen.DATALOADER_NAME for e in ev)


def test_target_mb_repeats_the_base_until_a_rank_reaches_the_size(base: Path, tmp_path: Path) -> None:
    big = gen.make_rank_traces(tmp_path, 2, 1, DELAY_MS, base=base, target_mb=2.0)
    assert big["copies"] > 1
    for size in big["compressed_bytes"]:
        # the fewest whole copies reaching 2 MB: one copy fewer would not
        assert 2_000_000 <= size < 2_000_000 + 1.1 * size / big["copies"]
    assert len(big["steps"]) == 3 * big["copies"] and len(set(big["steps"])) == len(big["steps"])


# --- the fan-out on 64 ranks -----------------------------------------------------------


def test_exactly_the_planted_rank_is_the_straggler_with_cause_dataloader(report: Dict[str, Any]) -> None:
    found = _stragglers(report)
    assert [(f["rank"], f["cause"]) for f in found] == [(STRAGGLER, "dataloader")], [f["title"] for f in found]
    assert report["summary"]["cluster"]["world_size"] == RANKS
    assert report["summary"]["cluster"]["missing_ranks"] == []
    assert report["summary"]["cluster"]["collective_mismatches"] == 0


def test_every_other_rank_waits_d_per_step_within_5_percent(report: Dict[str, Any]) -> None:
    d_ns = DELAY_MS * 1e6
    ranks = {r["rank"]: r for r in report["summary"]["ranks"]}
    assert sorted(ranks) == list(range(RANKS))
    for r, info in ranks.items():
        if r == STRAGGLER:
            assert info["collective_wait_p50_ns"] <= 0.05 * d_ns, info
            assert info["own_p50_ns"] - ranks[0]["own_p50_ns"] == pytest.approx(d_ns, rel=0.05)
        else:
            assert info["collective_wait_p50_ns"] == pytest.approx(d_ns, rel=0.05), info
    steps = report["summary"]["cluster"]["recent_steps"]
    assert steps
    for s in steps:
        assert s["straggler"] == STRAGGLER
        for row in s["ranks"]:
            if row["rank"] != STRAGGLER:
                assert row["collective_wait_ns"] == pytest.approx(d_ns, rel=0.05), (s["step"], row)
