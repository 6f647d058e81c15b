"""The per-test figure as a small SVG image (a data URI), drawn by hand.

A report can hold hundreds of tests; matplotlib takes about 0.3 s per figure, this a
millisecond. The SVG goes into an ``<img>``, where no script of any kind runs, and every
text in it is XML-escaped.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from xml.sax.saxutils import escape

from ._chart import BLUE, GREY, INK, ORANGE, RED, Chart
from ._data import MapView, NullView, SimilarityView, TestView
from ._format import fmt_omega

PANEL_W, PANEL_H = 260, 184
"""Size of one panel in CSS pixels."""
FONT_SIZE = 10
"""Every text of the figure, in CSS pixels at its natural size (the report never shows it
smaller on a screen wider than the figure; opened large it grows)."""
LEGEND_ROW = FONT_SIZE + 3
LEFT, RIGHT, TOP, BOTTOM = 36, 8, 8 + 2 * LEGEND_ROW + 4, 34
"""Margins inside a panel: axis labels left and bottom, a legend of two rows on top."""
X_LABEL, Y_LABEL = BOTTOM - 6, FONT_SIZE + 2
"""Baseline of the x axis' label below the plot; the y axis' label from the panel's left."""
OMEGA, TIMES = "\N{GREEK SMALL LETTER OMEGA}", "\N{MULTIPLICATION SIGN}"


def _num(value: float) -> str:
    return f"{value:.3g}"


class _Panel:
    """Maps data coordinates of one panel to pixels."""

    def __init__(self, x0: float, lo: float, hi: float, top: float) -> None:
        self.x0, self.lo, self.hi = x0, lo, hi if hi > lo else lo + 1.0
        self.top = top if top > 0 else 1.0
        self.width = PANEL_W - LEFT - RIGHT
        self.height = PANEL_H - TOP - BOTTOM

    def x(self, value: float) -> float:
        return self.x0 + LEFT + (value - self.lo) / (self.hi - self.lo) * self.width

    def y(self, value: float) -> float:
        return TOP + self.height - value / self.top * self.height

    def bars(
        self, edges: Sequence[float], heights: Sequence[float], color: str, opacity: float
    ) -> str:
        rects = []
        for left, right, h in zip(edges[:-1], edges[1:], heights, strict=True):
            if h <= 0:
                continue
            x, y = self.x(left), self.y(h)
            rects.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(self.x(right) - x, 0.6):.1f}" '
                f'height="{TOP + self.height - y:.1f}"/>'
            )
        return f'<g fill="{color}" fill-opacity="{opacity}">{"".join(rects)}</g>'

    def vline(self, value: float, color: str, width: float, dash: str = "") -> str:
        x = self.x(min(max(value, self.lo), self.hi))
        style = f' stroke-dasharray="{dash}"' if dash else ""
        return (
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + self.height}" '
            f'stroke="{color}" stroke-width="{width}"{style}/>'
        )

    def axes(self, xlabel: str, ylabel: str) -> str:
        bottom = TOP + self.height
        left = self.x0 + LEFT
        ticks = "".join(
            f'<text x="{self.x(v):.1f}" y="{bottom + FONT_SIZE + 2}" text-anchor="{anchor}">'
            f"{_num(v)}</text>"
            for v, anchor in (
                (self.lo, "start"),
                ((self.lo + self.hi) / 2, "middle"),
                (self.hi, "end"),
            )
        )
        return (
            f'<path d="M{left} {TOP}V{bottom}H{left + self.width}" fill="none" stroke="#666"/>'
            f"{ticks}"
            f'<text x="{left + self.width / 2:.1f}" y="{bottom + X_LABEL}" text-anchor="middle">'
            f"{escape(xlabel)}</text>"
            f'<text transform="translate({self.x0 + Y_LABEL} {TOP + self.height / 2:.1f}) '
            'rotate(-90)" '
            f'text-anchor="middle">{escape(ylabel)}</text>'
        )


def _legend(x0: float, items: Sequence[tuple[str, str]]) -> str:
    parts = []
    for i, (color, label) in enumerate(items):
        y = 8 + LEGEND_ROW * i
        parts.append(
            f'<rect x="{x0 + LEFT}" y="{y}" width="10" height="8" fill="{color}"/>'
            f'<text x="{x0 + LEFT + 14}" y="{y + 8}">{escape(label)}</text>'
        )
    return "".join(parts)


def _similarity_panel(s: SimilarityView, x0: float) -> str:
    panel = _Panel(x0, s.edges[0], s.edges[-1], max(max(s.p0, default=0), max(s.p1, default=0)))
    return (
        panel.bars(s.edges, s.p0, BLUE, 0.55)
        + panel.bars(s.edges, s.p1, ORANGE, 0.55)
        + panel.vline(s.p0_mean, BLUE, 1.2, "4 2")
        + panel.vline(s.p1_mean, ORANGE, 1.2, "4 2")
        + panel.axes(f"{s.similarity} similarity", "share of pairs")
        + _legend(x0, [(BLUE, "P0 original"), (ORANGE, f"P1 original {TIMES} perturbed")])
    )


def _null_panel(n: NullView, x0: float) -> str:
    lo, hi = min(n.edges[0], n.observed), max(n.edges[-1], n.observed)
    panel = _Panel(x0, lo, hi, max(n.counts, default=0))
    observed = f"observed {OMEGA} = {fmt_omega(n.observed)}"
    return (
        panel.bars(n.edges, n.counts, GREY, 1.0)
        + panel.vline(n.observed, RED, 2)
        + panel.axes(OMEGA, "permutations")
        + _legend(x0, [(GREY, "null (permuted splits)"), (RED, observed)])
    )


def _map_panel(m: MapView, x0: float) -> str:
    """Both arms on the family's output map (its first two principal components), with
    their centroids as rings."""
    x_lo, x_hi, y_lo, y_hi = m.frame
    left, width = x0 + LEFT, PANEL_W - LEFT - RIGHT
    height = PANEL_H - TOP - BOTTOM

    def at(x: float, y: float) -> tuple[float, float]:
        return (
            left + (x - x_lo) / (x_hi - x_lo or 1.0) * width,
            TOP + height - (y - y_lo) / (y_hi - y_lo or 1.0) * height,
        )

    def dots(points: Sequence[tuple[float, float]], color: str) -> str:
        circles = "".join(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.4"/>' for cx, cy in (at(*p) for p in points)
        )
        return f'<g fill="{color}" fill-opacity="0.6">{circles}</g>'

    def ring(point: tuple[float, float], color: str) -> str:
        cx, cy = at(*point)
        return (
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="none" stroke="{color}" '
            'stroke-width="2"/>'
        )

    bottom = TOP + height
    first, second = (f"{100 * share:.0f}%" for share in m.explained)
    return (
        dots(m.original, BLUE)
        + dots(m.perturbed, ORANGE)
        + ring(m.original_centroid, BLUE)
        + ring(m.perturbed_centroid, ORANGE)
        + f'<path d="M{left} {TOP}V{bottom}H{left + width}" fill="none" stroke="#666"/>'
        + f'<text x="{left + width / 2:.1f}" y="{bottom + X_LABEL}" text-anchor="middle">'
        + f"first principal component ({first})</text>"
        + f'<text transform="translate({x0 + Y_LABEL} {TOP + height / 2:.1f}) rotate(-90)" '
        + f'text-anchor="middle">second ({second})</text>'
        + _legend(x0, [(BLUE, "original outputs"), (ORANGE, "perturbed (rings: centroids)")])
    )


def test_figure(view: TestView) -> Chart:
    """P0 vs P1 histograms and the output map (when the outputs are embedded), and the
    permutation null."""
    panels = []
    if view.similarity is not None:
        panels.append(_similarity_panel(view.similarity, 0))
    if view.map is not None:
        panels.append(_map_panel(view.map, PANEL_W * len(panels)))
    panels.append(_null_panel(view.null, PANEL_W * len(panels)))
    width = PANEL_W * len(panels)
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{PANEL_H}" '
        f'viewBox="0 0 {width} {PANEL_H}" font-family="sans-serif" font-size="{FONT_SIZE}" '
        f'fill="{INK}">'
        f'<rect width="100%" height="100%" fill="#fff"/>{"".join(panels)}</svg>'
    )
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")
    return Chart(uri=uri, width=width)
