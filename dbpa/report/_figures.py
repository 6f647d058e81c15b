"""The report's summary figures drawn on matplotlib, as PNG data URIs: TPR by allowed FPR and
alignment (the ROC and per-test figures are SVG: ``_roc``, ``_svg``).

Drawn on matplotlib's Agg canvas through the object API (``Figure`` +
``FigureCanvasAgg``): no pyplot, no global figure registry, nothing left open.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.typing import RcKeyType

from dbpa.stats import ModelChoice

from ._chart import BLUE, INK, RED, Chart, shortened
from ._data import Alignment
from ._format import fmt_omega, fmt_p, fmt_rate

__all__ = ["alignment_figure", "tpr_by_fpr_figure"]

DPI = 150
"""Pixels per inch of the PNGs; they are shown at 96 CSS pixels per inch, so stay sharp."""
CSS_PX_PER_INCH = 96
STYLE: dict[RcKeyType, Any] = {
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#666666",
    "legend.frameon": False,
    "legend.fontsize": 7.5,
}


def _plain(text: str, limit: int = 40) -> str:
    """A user string as literal plot text: shortened, ``$`` kept out of mathtext."""
    return shortened(text, limit).replace("$", r"\$")


@contextmanager
def _figure(width: float, height: float) -> Iterator[Figure]:
    """A figure on an Agg canvas, cleared when done."""
    with mpl.rc_context(STYLE):
        fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        try:
            yield fig
        finally:
            fig.clear()


def _chart(fig: Figure) -> Chart:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    return Chart(uri=uri, width=round(fig.get_figwidth() * CSS_PX_PER_INCH))


def tpr_by_fpr_figure(choices: Sequence[ModelChoice]) -> Chart:
    """TPR of every model at each allowed FPR; the best boxed in black (paper, Fig. 2)."""
    models = list(choices[0].points)
    width = 0.8 / len(models)
    with _figure(max(4.2, 1.1 + 0.45 * len(models) * len(choices)), 2.8) as fig:
        ax = fig.subplots()
        for i, model in enumerate(models):
            x = np.arange(len(choices)) + (i - (len(models) - 1) / 2) * width
            tpr = [c.points[model].tpr for c in choices]
            best = [c.model == model for c in choices]
            bars = ax.bar(
                x,
                tpr,
                width=width * 0.92,
                label=_plain(model, 28),
                edgecolor=[INK if b else "none" for b in best],
                linewidth=[2.2 if b else 0 for b in best],
            )
            ax.bar_label(bars, [fmt_rate(t) for t in tpr], padding=2, fontsize=7)
        ax.set_xticks(
            np.arange(len(choices)), [f"allowed FPR {fmt_rate(c.max_fpr)}" for c in choices]
        )
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("TPR")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _chart(fig)


def alignment_figure(rows: Sequence[Alignment]) -> Chart:
    """Omega of each swapped-in model against the reference model (paper, Fig. 3)."""
    tested = [a for a in rows if a.row.omega is not None]
    with _figure(6.0, 0.9 + 0.32 * len(tested)) as fig:
        ax = fig.subplots()
        y = np.arange(len(tested))[::-1]
        omegas = [a.row.omega for a in tested if a.row.omega is not None]
        colors = [RED if a.row.reject else BLUE for a in tested]
        ax.barh(y, omegas, color=colors, height=0.6)
        ax.set_yticks(y, [_plain(a.model) for a in tested])
        for yi, a, w in zip(y, tested, omegas, strict=True):
            p = fmt_p(a.row.p_value, a.row.p_floor)
            note = f" {fmt_omega(a.row.omega)}{a.row.stars}   p {p}"
            ax.text(w, yi, note, va="center", fontsize=7.5, color=INK)
        ax.set_xlim(0, max(omegas, default=1.0) * 1.45 or 1.0)
        ax.set_xlabel(f"ω against {_plain(rows[0].reference)} (red: changed after correction)")
        return _chart(fig)
