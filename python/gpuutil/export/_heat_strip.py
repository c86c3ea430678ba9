"""The HTML report's heat strip: one row per rank, one cell per step, the
colour the rank's own time in that step (step wall minus collective wait)
relative to the median rank's in the same step, so a straggler is the one
red row (``gpuutil export html`` of a cluster report or of a multi-rank
report; docs/distributed.md, "Offline, at scale").

Stays small at any scale: at most :data:`MAX_ROWS` rank rows (more ranks
are grouped into buckets of consecutive ranks, each cell the bucket's
maximum, the row labelled with its rank range; the stragglers' rows are
always shown alone, up to :data:`MAX_ALONE`), at most :data:`MAX_COLS`
step columns (more steps are grouped the same way), colours quantised to
:data:`LEVELS` per side and drawn as one SVG path per colour (adjacent
cells of one colour merge), one hover rectangle with a title per row.
Pure functions from data to text.
"""

from __future__ import annotations

import html
import math
from statistics import median
from typing import Any, Dict, List, Optional, Sequence, Tuple

MAX_ROWS = 256
MAX_COLS = 64
MAX_ALONE = 8
LEVELS = 5
#: Slower than the median rank, light to dark (level 1..LEVELS).
SLOWER = ("#fde0dd", "#fcbba1", "#fc9272", "#ef3b2c", "#a50f15")
#: Faster than the median rank, light to dark.
FASTER = ("#deebf7", "#c6dbef", "#9ecae1", "#4292c6", "#08519c")
NEUTRAL = "#eeeeee"
NO_DATA = "#ffffff"
STRAGGLER_OUTLINE = "#212121"
#: The colour scale's end, as a fraction of the median: the largest deviation seen, within these bounds.
SCALE_MIN, SCALE_MAX = 0.05, 1.0
_W, _LABEL_W, _MARK_W, _TOP = 880, 110, 170, 18


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def matrix_of(report: Dict[str, Any], view: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The own-time matrix of a report: a cluster report's ``own_by_step``
    (its newest steps, every rank), else the cross-rank view's
    ``cluster.recent_steps`` (a multi-rank report's or a live record's
    newest steps). None when there is no step with two ranks."""
    mat = report.get("own_by_step")
    if isinstance(mat, dict) and mat.get("steps") and len(mat.get("ranks") or []) > 1:
        return mat
    steps = ((view or {}).get("cluster") or {}).get("recent_steps") or []
    ranks = sorted({int(r["rank"]) for s in steps for r in s.get("ranks", [])})
    if not steps or len(ranks) < 2:
        return None
    row = {rank: i for i, rank in enumerate(ranks)}
    own: List[List[Optional[int]]] = [[None] * len(steps) for _ in ranks]
    for j, s in enumerate(steps):
        for r in s.get("ranks", []):
            own[row[int(r["rank"])]][j] = r.get("own_ns")
    return {"steps": [s.get("step") for s in steps], "straggler": [s.get("straggler") for s in steps],
            "ranks": ranks, "own_ns": own}


def _ratios(own: Sequence[Sequence[Optional[int]]], cols: int) -> List[List[Optional[float]]]:
    """own / the median rank's own, per step (None: no data)."""
    out: List[List[Optional[float]]] = [[None] * cols for _ in own]
    for j in range(cols):
        vals = [row[j] for row in own if row[j] is not None]
        med = median(vals) if vals else 0
        if med <= 0:
            continue
        for i, row in enumerate(own):
            if row[j] is not None:
                out[i][j] = row[j] / med
    return out


def _groups(n: int, size: int) -> List[Tuple[int, int]]:
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def _rows(ranks: Sequence[int], alone: Sequence[int]) -> List[Tuple[int, int]]:
    """Row spans [a, b) over the rank indexes: one per rank up to MAX_ROWS
    ranks, else buckets of consecutive ranks cut around the ranks shown alone."""
    if len(ranks) <= MAX_ROWS:
        return [(i, i + 1) for i in range(len(ranks))]
    size = math.ceil(len(ranks) / MAX_ROWS)
    cuts = sorted(ranks.index(r) for r in alone if r in ranks)
    spans: List[Tuple[int, int]] = []
    start = 0
    for c in cuts + [len(ranks)]:
        spans += [(a + start, b + start) for a, b in _groups(c - start, size)]
        if c < len(ranks):
            spans.append((c, c + 1))
        start = c + 1
    return spans


def _max(values: Sequence[Optional[float]]) -> Optional[float]:
    got = [v for v in values if v is not None]
    return max(got) if got else None


def _color(ratio: Optional[float], scale: float) -> str:
    if ratio is None:
        return NO_DATA
    level = min(LEVELS, int(abs(ratio - 1) / scale * LEVELS + 0.5))
    if level == 0:
        return NEUTRAL
    return (SLOWER if ratio > 1 else FASTER)[level - 1]


def _pct(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.1f}%"


def _span_label(ranks: Sequence[int], a: int, b: int) -> str:
    return f"rank {ranks[a]}" if b - a == 1 else f"ranks {ranks[a]}\u2013{ranks[b - 1]}"


def heat_strip_svg(mat: Dict[str, Any], stragglers: Dict[int, str]) -> str:
    """The strip (see the module's paragraph). ``mat``: :func:`matrix_of`;
    ``stragglers``: rank -> cause, the ranks whose rows are shown alone and
    marked (the first MAX_ALONE)."""
    ranks = [int(r) for r in mat["ranks"]]
    steps = list(mat["steps"])
    ratios = _ratios(mat["own_ns"], len(steps))
    alone = [r for r in stragglers if r in ranks][:MAX_ALONE]
    row_spans = _rows(ranks, alone)
    col_spans = _groups(len(steps), math.ceil(len(steps) / MAX_COLS)) if steps else []
    cells = [[_max([ratios[i][j] for i in range(a, b) for j in range(c, d)]) for c, d in col_spans]
             for a, b in row_spans]
    dev = [abs(v - 1) for row in cells for v in row if v is not None]
    scale = min(SCALE_MAX, max(SCALE_MIN, max(dev) if dev else 0.0))
    n_rows = len(row_spans)
    h = 14 if n_rows <= 32 else max(3, min(14, 768 // n_rows))
    grid_w = _W - _LABEL_W - _MARK_W
    cw = min(40.0, grid_w / max(1, len(col_spans)))
    heights = [max(h, 12) if (b - a == 1 and ranks[a] in alone) else h for a, b in row_spans]
    height = _TOP + sum(heights) + 4
    paths: Dict[str, List[str]] = {}
    rows_svg: List[str] = []
    labels: List[str] = []
    alone_mids = [y2 + heights[k] / 2 + 4 for k, y2 in _alone_ys(row_spans, heights, ranks, alone)]
    y = _TOP
    last_label = -100.0
    for (a, b), row, rh in zip(row_spans, cells, heights):
        x0 = 0
        while x0 < len(row):  # one run of equal colour
            color = _color(row[x0], scale)
            x1 = x0 + 1
            while x1 < len(row) and _color(row[x1], scale) == color:
                x1 += 1
            paths.setdefault(color, []).append(
                f"M{_LABEL_W + x0 * cw:.1f} {y}h{(x1 - x0) * cw:.1f}v{rh}h{-(x1 - x0) * cw:.1f}z")
            x0 = x1
        label = _span_label(ranks, a, b)
        straggler = b - a == 1 and ranks[a] in alone
        worst = _max(row)
        if worst is None:
            tip = f"{label}: no step data"
        else:
            j = row.index(worst)
            c, d = col_spans[j]
            at = f"step {steps[c]}" if d - c == 1 else f"steps {steps[c]}\u2013{steps[d - 1]}"
            over = f" (the most of its {b - a} ranks)" if b - a > 1 else ""
            tip = f"{label}: own time per step at most {_pct(worst)} vs the median rank{over}, {at}"
        if straggler:
            tip += f"; straggler ({stragglers[ranks[a]]})"
        cls = "heat-row straggler" if straggler else "heat-row"
        stroke = f' stroke="{STRAGGLER_OUTLINE}" stroke-width="2"' if straggler else ""
        rows_svg.append(f'<rect class="{cls}" data-ranks="{ranks[a]}-{ranks[b - 1]}" x="{_LABEL_W}" y="{y}" '
                        f'width="{cw * len(row):.1f}" height="{rh}" fill="none" pointer-events="all"{stroke}>'
                        f"<title>{_e(tip)}</title></rect>")
        mid = y + rh / 2 + 4
        if straggler:
            labels.append(f'<text x="{_LABEL_W - 6}" y="{mid:.1f}" font-size="11" font-weight="bold" '
                          f'text-anchor="end">{_e(label)}</text>')
            labels.append(f'<text class="straggler-mark" x="{_LABEL_W + cw * len(row) + 6:.1f}" y="{mid:.1f}" '
                          f'font-size="11" font-weight="bold" fill="#b71c1c">\u25c0 straggler '
                          f'({_e(stragglers[ranks[a]])})</text>')
            last_label = mid
        elif mid - last_label >= 12 and all(abs(mid - m) >= 12 for m in alone_mids):
            labels.append(f'<text x="{_LABEL_W - 6}" y="{mid:.1f}" font-size="10" fill="#616161" '
                          f'text-anchor="end">{_e(label)}</text>')
            last_label = mid
        y += rh
    heads = []
    every = max(1, math.ceil(len(col_spans) / 8))
    last = len(col_spans) - 1
    for k, (c, d) in enumerate(col_spans):
        if k % every == 0 and (k == last or (last - k) * cw >= 30) or k == last:
            text = f"{steps[c]}" if d - c == 1 else f"{steps[c]}\u2013{steps[d - 1]}"
            heads.append(f'<text x="{_LABEL_W + (k + 0.5) * cw:.1f}" y="{_TOP - 5}" font-size="10" '
                         f'text-anchor="middle">{_e(text)}</text>')
    heads.append(f'<text x="{_LABEL_W - 6}" y="{_TOP - 5}" font-size="10" text-anchor="end">step</text>')
    body = "".join(f'<path fill="{c}" d="{"".join(d)}"/>' for c, d in sorted(paths.items()))
    return (f'<svg class="heat-strip" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" '
            f'viewBox="0 0 {_W} {height}" role="img" aria-label="own time per step by rank, vs the median rank" '
            f'data-rows="{n_rows}" data-cols="{len(col_spans)}" data-scale="{scale:.4f}">'
            + "".join(heads) + body + "".join(rows_svg) + "".join(labels) + "</svg>")


def _alone_ys(spans: Sequence[Tuple[int, int]], heights: Sequence[int], ranks: Sequence[int],
              alone: Sequence[int]) -> List[Tuple[int, int]]:
    """(row index, top y) of the rows shown alone (their labels win over bucket labels)."""
    y = _TOP
    out = []
    for k, ((a, b), rh) in enumerate(zip(spans, heights)):
        if b - a == 1 and ranks[a] in alone:
            out.append((k, y))
        y += rh
    return out


def legend(scale: float) -> str:
    """The colour key of a strip drawn with ``scale`` (its ``data-scale``)."""
    swatches = [(c, f"\u2212{100 * scale * (LEVELS - i) / LEVELS:.0f}%") for i, c in enumerate(reversed(FASTER))]
    swatches.append((NEUTRAL, "\u2248 median"))
    swatches += [(c, f"+{100 * scale * (i + 1) / LEVELS:.0f}%") for i, c in enumerate(SLOWER)]
    swatches.append((NO_DATA, "no data"))
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{c};border:1px solid #bdbdbd"></i>{_e(t)}</span>' for c, t in swatches) + "</div>"


def section(mat: Dict[str, Any], stragglers: Dict[int, str]) -> str:
    """The HTML section: heading, how to read it, the key and the strip."""
    svg = heat_strip_svg(mat, stragglers)
    scale = float(svg.split('data-scale="', 1)[1].split('"', 1)[0])
    ranks, steps = len(mat["ranks"]), len(mat["steps"])
    grouped = []
    if ranks > MAX_ROWS:
        grouped.append(f"{ranks} ranks in buckets of {math.ceil(ranks / MAX_ROWS)} consecutive ranks "
                       "(each cell the bucket's slowest; stragglers shown alone)")
    if steps > MAX_COLS:
        grouped.append(f"{steps} steps in groups of {math.ceil(steps / MAX_COLS)} (each cell the group's slowest)")
    how = ("One row per rank, one cell per step: the rank's own time in the step (step wall minus "
           "collective wait) against the median rank's in the same step; red is slower, blue faster. "
           f"The newest {steps} compared steps." + (" " + "; ".join(grouped) + "." if grouped else ""))
    return "<h2>Own time per step, by rank</h2>" + f"<p>{_e(how)}</p>" + legend(scale) + svg
