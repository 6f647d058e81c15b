"""The drift history of a run's audit, drawn as one figure (``dbpa.drift`` reads it)."""

from __future__ import annotations

from datetime import datetime

from matplotlib.ticker import FuncFormatter, NullFormatter

from dbpa.drift import DriftHistory

from ._chart import GREY, RED, Chart
from ._figures import _chart, _figure, _plain

__all__ = ["drift_figure"]


def _tick_label(epoch: str) -> str:
    """A tick's epoch shortened for an axis: ``11-21 03:00`` for a scheduled time."""
    try:
        return f"{datetime.fromisoformat(epoch):%m-%d %H:%M}"
    except ValueError:
        return _plain(epoch, 16)


def drift_figure(history: DriftHistory) -> Chart:
    """Effect and p of every arm against the baseline tick, over the ticks (red: changed)."""
    ticks = {epoch: i for i, epoch in enumerate(history.epochs)}
    series: dict[str, list[tuple[int, float, float, bool]]] = {}
    for p in history.points:
        if p.against == "baseline":
            series.setdefault(p.label, []).append((ticks[p.epoch], p.effect, p.p_value, p.reject))
    alpha = history.points[0].alpha
    with _figure(8.4, 3.0 + 0.18 * (len(series) + 1) / 3) as fig:
        effect_ax, p_ax = fig.subplots(1, 2)
        for label, values in series.items():
            x, effect, p_value, reject = (list(v) for v in zip(*values, strict=True))
            (line,) = effect_ax.plot(x, effect, marker="o", ms=3, lw=1.2, label=_plain(label, 32))
            p_ax.plot(x, p_value, marker="o", ms=3, lw=1.2, color=line.get_color())
            changed = [i for i, r in enumerate(reject) if r]
            for ax, y in ((effect_ax, effect), (p_ax, p_value)):
                ax.scatter(
                    [x[i] for i in changed],
                    [y[i] for i in changed],
                    s=40,
                    facecolors="none",
                    edgecolors=RED,
                    linewidths=1.4,
                    zorder=3,
                )
        effect_ax.axhline(0, color=GREY, lw=0.8)
        effect_ax.set_ylabel("effect (\N{GREEK SMALL LETTER OMEGA} minus null mean)")
        p_ax.axhline(
            alpha, color=RED, lw=0.8, ls="--", label=f"\N{GREEK SMALL LETTER ALPHA} = {alpha:g}"
        )
        p_ax.set_yscale("log")
        p_ax.set_ylim(top=1.2)
        p_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        p_ax.yaxis.set_minor_formatter(NullFormatter())
        p_ax.set_ylabel("p (raw)")
        for ax in (effect_ax, p_ax):
            ax.set_xticks(range(len(history.epochs)), [_tick_label(e) for e in history.epochs])
            ax.tick_params(axis="x", labelrotation=30)
            ax.set_xlabel("tick")
        fig.legend(loc="outside lower center", ncol=3)
        return _chart(fig)
