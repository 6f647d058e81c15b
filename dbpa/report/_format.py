"""How numbers read in every report format (one place, so HTML and Markdown agree)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

__all__ = [
    "MISSING",
    "fmt_cost",
    "fmt_count",
    "fmt_effect",
    "fmt_interval",
    "fmt_omega",
    "fmt_p",
    "fmt_rate",
    "fmt_time",
    "p_floor",
    "shown_estimate",
]

MISSING = "\N{EN DASH}"


class Bounded(Protocol):
    """An estimate with its interval (a test's ``EffectBounds``, ``EffectDifference``)."""

    @property
    def estimate(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...


"""Shown where a value does not exist (an untested perturbation, an unknown price)."""


def _positional(value: float, significant: int) -> str:
    """``value`` with ``significant`` digits, never in scientific notation."""
    return np.format_float_positional(
        value, precision=significant, unique=False, fractional=False, trim="-"
    )


def p_floor(evaluated: int, exact: bool) -> float:
    """Smallest p-value the test could give: 1/(B+1) for B random splits, 1/#splits if exact."""
    return 1.0 / evaluated if exact else 1.0 / (evaluated + 1)


def fmt_p(p: float | None, floor: float | None = None) -> str:
    """4 significant digits; at the test's resolution limit ``floor``, "≤" that limit.

    A p-value equal to 1/(B+1) means no permutation reached the observed statistic: the
    data say only that p is at most about that, so it reads "≤0.0005" (B = 1999).
    """
    if p is None or math.isnan(p):
        return MISSING
    if floor is not None and p <= floor * (1 + 1e-9):
        return "≤" + _positional(_round_up(floor, 2), 2)
    return _positional(p, 4)


def _round_up(value: float, significant: int) -> float:
    scale = 10.0 ** (significant - 1 - math.floor(math.log10(value)))
    return math.ceil(value * scale - 1e-9) / scale


def fmt_omega(value: float | None) -> str:
    """Omega with 3 decimals."""
    return MISSING if value is None or math.isnan(value) else f"{value:.3f}"


def fmt_effect(value: float | None) -> str:
    """Bias-corrected effect with a sign and 3 decimals."""
    return MISSING if value is None or math.isnan(value) else f"{value:+.3f}"


def shown_estimate(bounds: Bounded) -> float:
    """The estimate as tables show it: clipped into its own interval. The unbiased estimate
    of an effect can be negative, or (rarely) above the upper bound, and a percentile
    interval of a difference need not hold the difference of the estimates; a point shown
    outside its own interval reads as a contradiction, so tables show the nearest point of
    the interval (the record and the JSON keep the raw estimate)."""
    return min(max(bounds.estimate, bounds.low), bounds.high)


def fmt_interval(bounds: Bounded | None) -> str:
    """An estimate (clipped into its interval, ``shown_estimate``) and its interval, 3
    significant digits: ``0.0123 [0, 0.031]``."""
    if bounds is None:
        return MISSING
    low, high = (_positional(v, 3) for v in (bounds.low, bounds.high))
    return f"{_positional(shown_estimate(bounds), 3)} [{low}, {high}]"


def fmt_rate(value: float | None) -> str:
    """A share in [0, 1] as a percentage."""
    return MISSING if value is None or math.isnan(value) else f"{100 * value:.0f}%"


def fmt_count(value: int | None) -> str:
    """An integer with thousands separators."""
    return MISSING if value is None else f"{value:,}"


def fmt_cost(value: float | None) -> str:
    """US dollars; "unknown" when the provider's price was not known."""
    if value is None or math.isnan(value):
        return "unknown"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def fmt_time(iso: str | None) -> str:
    """An ISO 8601 timestamp as ``2026-11-21 18:54:07 UTC`` (in UTC)."""
    if not iso:
        return MISSING
    moment = datetime.fromisoformat(iso)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S}" + (" UTC" if moment.tzinfo is not None else "")
