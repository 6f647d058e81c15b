"""The drift monitor's evidence chart: each arm's log e-value over the ticks, the alarm line."""

from __future__ import annotations

import math

from dbpa.drift import MonitorHistory

from ._chart import RED, Chart
from ._drift import _tick_label
from ._figures import _chart, _figure, _plain

__all__ = ["evidence_figure"]


def evidence_figure(history: MonitorHistory) -> Chart:
    """log10 of each arm's e-value over its ticks since its baseline, the alarm line
    (the arms' ``m / alpha``) dashed, and a red ring where an arm alarmed."""
    epochs = history.epochs
    x_of = {epoch: i for i, epoch in enumerate(epochs)}
    series: dict[str, list[tuple[int, float, bool]]] = {}
    for p in history.points:
        value = p.log_e_value / math.log(10)
        series.setdefault(p.series, []).append((x_of[p.epoch], value, p.raised))
    threshold = max(p.threshold for p in history.points)
    line = math.log10(threshold)
    with _figure(6.4, 2.8 + 0.18 * (len(series) + 1) / 3) as fig:
        ax = fig.subplots()
        for label, values in series.items():
            x, y, raised = (list(v) for v in zip(*values, strict=True))
            ax.plot(x, y, marker="o", ms=2.5, lw=1.2, label=_plain(label, 32))
            ax.scatter(
                [x[i] for i, r in enumerate(raised) if r],
                [y[i] for i, r in enumerate(raised) if r],
                s=50,
                facecolors="none",
                edgecolors=RED,
                linewidths=1.4,
                zorder=3,
            )
        ax.axhline(line, color=RED, lw=0.9, ls="--", label=f"alarm line: e = {threshold:.3g}")
        ax.axhline(0.0, color="#a9b1bb", lw=0.8)
        ax.set_ylabel("evidence (log10 e-value)")
        step = max(1, len(epochs) // 12)
        ax.set_xticks(range(0, len(epochs), step), [_tick_label(e) for e in epochs[::step]])
        ax.tick_params(axis="x", labelrotation=30)
        ax.set_xlabel("tick")
        fig.legend(loc="outside lower center", ncol=3)
        return _chart(fig)
