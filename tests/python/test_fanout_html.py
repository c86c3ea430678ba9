"""The HTML page of a cluster report (issue 30): `gpuutil export html` of
the fan-out's JSON shows the Ranks table (bounded: the slowest and fastest
ranks and the stragglers) and the heat strip of own time per step by rank
(python/gpuutil/export/_heat_strip.py) with the straggler's row marked;
the combined multi-rank report gets the strip too; at 1,024 ranks the
strip groups ranks into at most 256 rows (the straggler's alone) and the
page stays small.

Ranks come from benchmarks/make_rank_traces.py (rank 4 of 6 is the planted
DataLoader straggler, 9 steps: more than summary.cluster.recent_steps
keeps, so own_by_step is what carries them); the 1,024-rank case is a
synthesised report dict. Headless Chromium draws the page (skipped
without chromium); GPUUTIL_UPDATE_DOCS_IMG=1 refreshes
docs/img/heat-strip.png from its screenshot.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest

from conftest import REPO, rank_trace_generator, traces_dir
from gpuutil.export import _heat_strip
from gpuutil.export import html as html_export

RANKS, STRAGGLER, DELAY_MS, COPIES = 6, 4, 25.0, 3
BASE_NAME = "hta_nccl_a100_rank0.json.gz"



@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory) -> Path:
    base = traces_dir() / BASE_NAME
    if not base.is_file():
        pytest.skip(f"base trace {base} not found (set GPUUTIL_TRACES_DIR)")
    out = tmp_path_factory.mktemp("ranks6")
    rank_trace_generator().make_rank_traces(out, RANKS, STRAGGLER, DELAY_MS, base=base, copies=COPIES)
    return out


@pytest.fixture(scope="module")
def cluster_json(ranks_dir: Path, run_cli, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cluster") / "cluster.json"
    proc = run_cli("analyze", str(ranks_dir / "rank*.json.gz"), "--jobs", "2", "--json", "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out


def _strip(page: str) -> str:
    m = re.search(r'<svg class="heat-strip".*?</svg>', page, re.S)
    assert m, "no heat strip in the page"
    return m.group(0)


def _rows(svg: str) -> List[Dict[str, Any]]:
    """The strip's rows: class, rank span, y, height."""
    return [{"cls": m.group(1), "ranks": m.group(2), "y": float(m.group(3)), "h": float(m.group(4))}
            for m in re.finditer(r'<rect class="(heat-row[^"]*)" data-ranks="([0-9-]+)" x="[0-9.]+" y="([0-9.]+)" '
                                 r'width="[0-9.]+" height="([0-9.]+)"', svg)]


def _painted(svg: str) -> Dict[str, List[float]]:
    """Per fill colour, the y of every cell run drawn in it."""
    out: Dict[str, List[float]] = {}
    for color, d in re.findall(r'<path fill="(#[0-9a-f]{6})" d="([^"]*)"/>', svg):
        out[color] = [float(y) for y in re.findall(r"M[0-9.]+ ([0-9.]+)h", d)]
    return out


def test_cluster_report_carries_every_ranks_own_time_for_more_steps_than_recent_steps(cluster_json: Path):
    report = json.loads(cluster_json.read_text())
    mat = report["own_by_step"]
    assert mat["ranks"] == list(range(RANKS))
    assert len(mat["steps"]) == 3 * COPIES > len(report["summary"]["cluster"]["recent_steps"])
    assert mat["straggler"] == [STRAGGLER] * len(mat["steps"])
    # The newest steps agree with the view's per-step detail.
    for s in report["summary"]["cluster"]["recent_steps"]:
        j = mat["steps"].index(s["step"])
        assert [mat["own_ns"][r["rank"]][j] for r in s["ranks"]] == [r["own_ns"] for r in s["ranks"]]
    # The straggler's own time is D more than every other rank's, in every step.
    for j in range(len(mat["steps"])):
        others = [mat["own_ns"][r][j] for r in range(RANKS) if r != STRAGGLER]
        assert max(others) == min(others)
        assert mat["own_ns"][STRAGGLER][j] - others[0] == pytest.approx(DELAY_MS * 1e6, rel=0.05)


def test_export_html_of_a_cluster_report_marks_the_stragglers_row_in_the_heat_strip(cluster_json: Path, run_cli,
                                                                                     tmp_path: Path):
    page_path = tmp_path / "cluster.html"
    proc = run_cli("export", "html", cluster_json, "-o", page_path)
    assert proc.returncode == 0, proc.stderr
    page = page_path.read_text()
    assert "<script" not in page and "https://" not in page
    assert "Cluster report: 6 of 6 ranks analysed, 9 steps compared" in page
    # The Ranks table (6 ranks: all of them) with the straggler's row marked.
    assert page.count('<tr class="straggler"><td>4</td>') == 1
    svg = _strip(page)
    assert 'data-rows="6" data-cols="9"' in svg
    rows = _rows(svg)
    assert [r["ranks"] for r in rows] == [f"{r}-{r}" for r in range(RANKS)]
    marked = [r for r in rows if "straggler" in r["cls"]]
    assert [r["ranks"] for r in marked] == ["4-4"]
    assert "\u25c0 straggler (dataloader)" in svg
    # Every cell of the straggler's row is the darkest red; every other rank's is neutral.
    painted = _painted(svg)
    assert set(painted[_heat_strip.SLOWER[-1]]) == {marked[0]["y"]}
    assert set(painted[_heat_strip.NEUTRAL]) == {r["y"] for r in rows if r is not marked[0]}
    assert set(painted) == {_heat_strip.SLOWER[-1], _heat_strip.NEUTRAL}


def test_the_combined_multi_rank_report_gets_the_strip_from_its_recent_steps(ranks_dir: Path, run_cli,
                                                                             tmp_path: Path):
    combined = tmp_path / "combined.json"
    files = sorted(str(p) for p in ranks_dir.glob("rank*.json.gz"))
    proc = run_cli("analyze", *files, "--json", "-o", combined)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(combined.read_text())
    assert report.get("kind") is None and "own_by_step" not in report  # the per-job report, as before
    page = html_export.render_html([report])
    assert page.count('class="breakdown"') >= 1  # its per-device plots stay
    svg = _strip(page)
    steps = len(report["summary"]["cluster"]["recent_steps"])
    assert f'data-rows="{RANKS}" data-cols="{steps}"' in svg
    assert [r["ranks"] for r in _rows(svg) if "straggler" in r["cls"]] == ["4-4"]


def _synthetic(n_ranks: int, n_steps: int, straggler: int, noise: float, slow: Dict[int, float]) -> Dict[str, Any]:
    """A cluster report of n_ranks (summary.ranks, the straggler finding,
    own_by_step) with own time 200 ms x (1 +- noise), the straggler 12% and
    the ranks of `slow` their factor slower."""
    rnd = random.Random(7)
    own = [[int(200e6 * (1 + rnd.uniform(-noise, noise)) * (1.12 if r == straggler else slow.get(r, 1.0)))
            for _ in range(n_steps)] for r in range(n_ranks)]
    ranks = [{"rank": r, "host": f"rank{r:05d}.json.gz", "steps": n_steps, "step_wall_p50_ns": 230_000_000,
              "own_p50_ns": sorted(own[r])[n_steps // 2], "collective_wait_p50_ns": 0, "collective_transfer_ns": 0,
              "relative_perf": 1.0, "start_skew_p50_ns": None} for r in range(n_ranks)]
    finding = {"id": "straggler", "title": f"Rank {straggler} is a straggler", "rank": straggler,
               "host": f"rank{straggler:05d}.json.gz", "cause": "dataloader", "evidence": "-", "fix": "-",
               "recoverable_ns": 1, "share_of_wall": 0.1}
    return {"schema": "gpuutil.report/1", "kind": "cluster",
            "source": {"inputs": n_ranks, "world_size": n_ranks, "ranks_analyzed": n_ranks, "bytes": 0},
            "summary": {"ranks_analyzed": n_ranks, "steps": n_steps, "ranks": ranks,
                        "cluster": {"world_size": n_ranks, "missing_ranks": [], "steps_compared": n_steps,
                                    "collective_instances": 0, "recent_steps": []},
                        "top_finding": finding},
            "findings": [finding], "diagnostics": [], "ranks_detail": [],
            "own_by_step": {"steps": list(range(n_steps)), "straggler": [straggler] * n_steps,
                            "ranks": list(range(n_ranks)), "own_ns": own}}


def test_1024_ranks_are_bucketed_with_the_straggler_alone_and_the_page_stays_small():
    report = _synthetic(1024, 64, straggler=537, noise=0.01, slow={10: 1.06})
    page = html_export.render_html([report], title="1,024 ranks")
    svg = _strip(page)
    rows = _rows(svg)
    assert 'data-cols="64"' in svg and len(rows) <= _heat_strip.MAX_ROWS + 2
    spans = [tuple(int(x) for x in r["ranks"].split("-")) for r in rows]
    # Consecutive, non-overlapping, covering every rank once.
    assert spans[0][0] == 0 and spans[-1][1] == 1023
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))
    assert max(b - a + 1 for a, b in spans) == 4  # 1,024 / 256
    # The straggler's row alone and marked; no other row marked.
    assert [r["ranks"] for r in rows if "straggler" in r["cls"]] == ["537-537"]
    # A bucket's cell is its slowest rank's: rank 10 (+6%) colours bucket 8-11, the other buckets stay neutral.
    painted = _painted(svg)
    y_of = {r["ranks"]: r["y"] for r in rows}
    hot = {y for color, ys in painted.items() if color in _heat_strip.SLOWER for y in ys}
    assert hot == {y_of["8-11"], y_of["537-537"]}
    # The Ranks table: the 10 slowest (the straggler first), a gap row, the 10 fastest; not 1,024 rows.
    table = page[page.index('<table class="ranks">'):page.index("</table>")]
    assert table.count("<tr") == 1 + 10 + 1 + 10
    assert table.index("<td>537</td>") < table.index("<td>10</td>") < table.index('class="gap"')
    # Small: one path per colour, one hover rectangle per row.
    assert len(page) < 150_000, len(page)
    assert svg.count("<path") <= 2 * _heat_strip.LEVELS + 2


def test_the_strip_is_bounded_even_when_every_cell_differs():
    report = _synthetic(4096, 500, straggler=3000, noise=0.3, slow={})
    page = html_export.render_html([report])
    svg = _strip(page)
    assert 'data-cols="63"' in svg  # 500 steps in groups of 8
    assert len(_rows(svg)) <= _heat_strip.MAX_ROWS + 2
    assert [r["ranks"] for r in _rows(svg) if "straggler" in r["cls"]] == ["3000-3000"]
    assert len(page) < 600_000, len(page)


def test_the_heat_strip_renders_in_headless_chromium(cluster_json: Path, run_cli, tmp_path: Path):
    from test_export_html import _chromium, _count_colors, _read_png, _screenshot

    exe = _chromium()
    page = tmp_path / "cluster.html"
    proc = run_cli("export", "html", cluster_json, "-o", page)
    assert proc.returncode == 0, proc.stderr
    shot = _screenshot(exe, page, tmp_path / "shot.png", "960,830")
    _, _, pixels = _read_png(shot)
    counts = _count_colors(pixels, {"straggler": _heat_strip.SLOWER[-1], "neutral": _heat_strip.NEUTRAL})
    # One row of 9 cells (~480 x 14 px) in the darkest red (the legend swatch alone is 144 px); five neutral rows.
    assert counts["straggler"] > 4_000, counts
    assert counts["neutral"] > 4 * counts["straggler"], counts
    if os.environ.get("GPUUTIL_UPDATE_DOCS_IMG") == "1":
        shutil.copyfile(shot, REPO / "docs" / "img" / "heat-strip.png")
