"""Tests of the self-contained HTML report (python/gpuutil/export/html.py).

The page is rendered by headless Chromium (Debian's ``chromium``, installed
by scripts/bootstrap.sh) into a screenshot, and the screenshot's pixels are
checked: the stacked-breakdown plot drew bars in the compute / idle colours
and the utilisation plot drew its lines. The page must make no network
request (no http(s) URL, no script). Set GPUUTIL_UPDATE_DOCS_IMG=1 to also
refresh docs/img/html-report.png from the screenshot.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Dict, Tuple

import pytest

from gpuutil.export import html as html_export

from conftest import REPO

RESNET = "kineto_resnet50_nw4_v100.json.gz"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no chromium on PATH: scripts/bootstrap.sh installs Debian's chromium package")


def _read_png(path: Path) -> Tuple[int, int, list]:
    """Minimal PNG decoder (8-bit RGB/RGBA, non-interlaced): width, height, rows of (r,g,b)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    i = 0
    for _ in range(height):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def _hex(color: str) -> Tuple[int, int, int]:
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def _count_colors(rows, colors: Dict[str, str], tol: int = 6) -> Dict[str, int]:
    targets = {k: _hex(v) for k, v in colors.items()}
    counts = {k: 0 for k in colors}
    for row in rows:
        for px in row:
            for k, t in targets.items():
                if abs(px[0] - t[0]) <= tol and abs(px[1] - t[1]) <= tol and abs(px[2] - t[2]) <= tol:
                    counts[k] += 1
    return counts


def _screenshot(exe: str, page: Path, shot: Path, size: str) -> Path:
    """Headless Chromium's screenshot of `page` (a window of `size`, "W,H")."""
    res = subprocess.run(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-background-networking", f"--window-size={size}", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert shot.is_file() and shot.stat().st_size > 0, res.stderr[-2000:]
    return shot


@pytest.fixture(scope="module")
def report(trace, installed_gpuutil):
    return installed_gpuutil.analyze(trace(RESNET))


def test_html_is_self_contained(report):
    page = html_export.render_html([report])
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    assert page.count('class="breakdown"') == 1 and page.count('class="utilisation"') == 1
    # The top finding leads the page.
    assert page.index("Top finding") < page.index('class="breakdown"')


def test_html_report_renders_in_headless_chromium(report, tmp_path, run_cli, trace):
    exe = _chromium()
    page = tmp_path / "report.html"
    proc = run_cli("export", "html", trace(RESNET), "-o", page)
    assert proc.returncode == 0, proc.stderr
    shot = _screenshot(exe, page, tmp_path / "shot.png", "960,1400")
    width, height, rows = _read_png(shot)
    assert (width, height) == (960, 1400)
    # Breakdown plot: compute bars dominate; the trace's idle causes show too.
    counts = _count_colors(rows, {
        "compute": html_export.COLORS["compute"],
        "idle_launch": html_export.COLORS["idle_launch"],
        "idle_host": html_export.COLORS["idle_host"],
        "busy_line": "#000000",
        "sm_line": html_export.LINE_COLORS["SM efficiency est %"],
    })
    assert counts["compute"] > 50_000, counts  # six ~130x150 px bars
    assert counts["idle_launch"] > 5_000, counts
    assert counts["idle_host"] > 1_000, counts
    # Utilisation plot: the SM-efficiency polyline drew (legend swatch alone is 144 px).
    assert counts["sm_line"] > 1_000, counts
    if os.environ.get("GPUUTIL_UPDATE_DOCS_IMG") == "1":
        dest = REPO / "docs" / "img" / "html-report.png"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, dest)


def test_stacked_bars_fill_the_step_wall():
    entries = [{"_step": 0, "wall_ns": 100, "busy_ns": 60,
                "breakdown_ns": {"compute": 60, "idle_dataloader": 40}}]
    svg = html_export.stacked_breakdown_svg(entries)
    heights = [float(part.split('height="')[1].split('"')[0]) for part in svg.split("<rect")[1:]]
    assert len(heights) == 2
    plot_h = html_export._H - html_export._PAD_B - html_export._PAD_T
    assert sum(heights) == pytest.approx(plot_h, abs=0.02)
    assert heights[0] == pytest.approx(0.6 * plot_h, abs=0.01)


def _host_step(step: int, loader_ns: int, wall_ns: int = 10_000_000) -> dict:
    rest = wall_ns - loader_ns
    main = {"rank": 0, "thread": 0, "tid": 1, "name": "main", "wall_ns": wall_ns,
            "breakdown_ns": {"dataloader": loader_ns, "forward": rest // 2, "backward": rest // 4,
                             "optimizer": rest - rest // 2 - rest // 4, "host_sync": 0, "collective": 0, "other": 0},
            "culprits": {}}
    return {"schema": "gpuutil.report/1", "sources": [{"path": "live", "rank": 0, "steps_source": "optimizer_step"}],
            "workload": {"kind": "training", "evidence": "1 backward op; 1 step from optimizer_step", "capture_ns": 0},
            "steps": [{"step": step, "start_ns": step * wall_ns, "end_ns": (step + 1) * wall_ns, "wall_ns": wall_ns,
                       "devices": [], "host": [main]}],
            "summary": {"devices": []}, "findings": [], "diagnostics": []}


def test_a_host_only_run_renders_its_per_step_host_breakdown_in_headless_chromium(tmp_path):
    """A host-only run (a live run without CUPTI) used to get no plot: it
    gets the main training thread's host categories per step, and its
    findings once (the run's, not one per step)."""
    exe = _chromium()
    reports = [_host_step(i, 6_000_000 if i % 13 != 5 else 100_000) for i in range(80)]
    page = html_export.render_html(reports)
    assert page.count('class="host-breakdown"') == 1
    assert page.count("<li><b>") == 1  # host_dataloader, the run's finding, once
    assert "The training thread waits for the next batch" in page
    path = tmp_path / "host.html"
    path.write_text(page)
    _, _, rows = _read_png(_screenshot(exe, path, tmp_path / "host.png", "960,900"))
    counts = _count_colors(rows, {k: html_export.HOST_COLORS[k] for k in ("dataloader", "forward", "optimizer")})
    assert counts["dataloader"] > 40_000, counts  # 80 bars, 60% of a 222 px plot each
    assert counts["forward"] > 5_000, counts
    assert counts["optimizer"] > 1_000, counts
