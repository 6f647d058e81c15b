"""The ROC figure (paper, Fig. 1) as a small SVG image (a data URI), drawn by hand.

Every labelled run draws it; on matplotlib it cost about 0.3 s and matplotlib's import
another second of every process that reported. As in ``_svg``, the image goes into an
``<img>`` (no script runs there) and every text in it is XML-escaped.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from xml.sax.saxutils import escape

from ._chart import GREY, INK, Chart, shortened
from ._data import RocView

WIDTH, HEIGHT = 356, 346
"""Size in CSS pixels: the square plot and its margins."""
FONT_SIZE = 11
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 10, 44
"""Margins around the square plot: tick labels and axis labels left and below."""
SIDE = min(WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM)
"""The plot is square: a false-positive rate and a true-positive rate on one scale."""
LIMITS = (-0.02, 1.02)
TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
ALLOWED_FPR = (0.01, 0.05)
"""Dotted verticals: the allowed false-positive rates the report reads TPR at."""
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
"""One per family, in turn (the order of matplotlib's default cycle, as before)."""
LEGEND_ROW = FONT_SIZE + 4
LABEL_LIMIT = 28


def _x(value: float) -> float:
    lo, hi = LIMITS
    return LEFT + (value - lo) / (hi - lo) * SIDE


def _y(value: float) -> float:
    lo, hi = LIMITS
    return TOP + SIDE - (value - lo) / (hi - lo) * SIDE


def _axes() -> str:
    bottom, right = _y(LIMITS[0]), _x(LIMITS[1])
    parts = [
        f'<path d="M{LEFT} {TOP}V{bottom:.1f}H{right:.1f}" fill="none" stroke="#666"/>',
        f'<line x1="{_x(0):.1f}" y1="{_y(0):.1f}" x2="{_x(1):.1f}" y2="{_y(1):.1f}" '
        f'stroke="{GREY}" stroke-dasharray="4 3"/>',
    ]
    for fpr in ALLOWED_FPR:
        parts.append(
            f'<line x1="{_x(fpr):.1f}" y1="{TOP}" x2="{_x(fpr):.1f}" y2="{bottom:.1f}" '
            f'stroke="{GREY}" stroke-width="0.8" stroke-dasharray="1 2"/>'
        )
    for tick in TICKS:
        label = f"{tick:.1f}"
        parts.append(
            f'<text x="{_x(tick):.1f}" y="{bottom + FONT_SIZE + 3:.1f}" '
            f'text-anchor="middle">{label}</text>'
            f'<text x="{LEFT - 4}" y="{_y(tick) + FONT_SIZE / 3:.1f}" '
            f'text-anchor="end">{label}</text>'
        )
    parts.append(
        f'<text x="{LEFT + SIDE / 2:.1f}" y="{bottom + 2 * FONT_SIZE + 8:.1f}" '
        'text-anchor="middle">false-positive rate (controls changed)</text>'
        f'<text transform="translate({FONT_SIZE + 2} {TOP + SIDE / 2:.1f}) rotate(-90)" '
        'text-anchor="middle">true-positive rate (targets changed)</text>'
    )
    return "".join(parts)


def _curve(roc: RocView, color: str) -> str:
    points = [(_x(f), _y(t)) for f, t in zip(roc.fpr, roc.tpr, strict=True)]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>' for x, y in points)
    return (
        f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.8"/>'
        f'<g fill="{color}">{dots}</g>'
    )


def _legend(items: Sequence[tuple[str, str]]) -> str:
    """Lower right inside the plot, as matplotlib placed it: the chance line on top, then each
    family in turn, the last at the bottom."""
    right = _x(LIMITS[1]) - 6
    rows = []
    for i, (color, label) in enumerate(reversed(items)):
        y = _y(LIMITS[0]) - 8 - LEGEND_ROW * i
        dash = ' stroke-dasharray="4 3"' if color == GREY else ""
        rows.append(
            f'<line x1="{right - 18}" y1="{y - FONT_SIZE / 3:.1f}" x2="{right}" '
            f'y2="{y - FONT_SIZE / 3:.1f}" stroke="{color}" stroke-width="1.8"{dash}/>'
            f'<text x="{right - 22}" y="{y:.1f}" text-anchor="end">{escape(label)}</text>'
        )
    return "".join(rows)


def roc_figure(rocs: Sequence[RocView]) -> Chart:
    """ROC curves over alpha, one per labelled family (paper, Fig. 1)."""
    colors = [COLORS[i % len(COLORS)] for i in range(len(rocs))]
    items = [(GREY, "chance")]
    for roc, color in zip(rocs, colors, strict=True):
        items.append((color, f"{shortened(roc.family, LABEL_LIMIT)} (AUC {roc.auc:.2f})"))
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="{FONT_SIZE}" '
        f'fill="{INK}"><rect width="100%" height="100%" fill="#fff"/>{_axes()}'
        + "".join(_curve(r, c) for r, c in zip(rocs, colors, strict=True))
        + _legend(items)
        + "</svg>"
    )
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")
    return Chart(uri=uri, width=WIDTH)
