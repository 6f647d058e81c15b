"""How many outputs per arm would likely settle an inconclusive decision.

A perturbation is inconclusive when its effect interval reaches both up to the margin
and down to 0: neither "equivalent" (upper bound < margin) nor "changed" is shown. The
projection is the textbook sample size of a one-sided z-test (e.g. Chow, Shao & Wang,
*Sample Size Calculations in Clinical Research*, 2008, ch. 3): take the estimate as the
true effect and the interval's half-width ``w = high - estimate`` (or ``estimate - low``)
as ``z * se`` at k0 outputs per arm, with ``se`` shrinking like ``1/sqrt(k)`` (the rate
of a non-degenerate U-statistic; near no effect it shrinks faster, like ``1/k``, so the
projection errs towards more outputs). Then with ``z_b`` the ``power`` quantile, the
decision settles with probability ``power`` at

* ``k = k0 * ((w (z_l + z_b) / z) / (margin - estimate))**2`` (equivalent), when the
  estimate is below the margin, or else
* ``k = k0 * ((w (z_l + z_b) / z) / estimate)**2`` (changed; the permutation test has
  about the power of the interval's lower bound), when the estimate is above 0,

where ``z_l`` is the quantile of the one-sided level the decision needs (in a family, the
level its correction asks of this test, smaller than the interval's own).

It is a projection for planning the next run, not a decision rule: no error rate rests
on it. ``dbpa plan`` simulates the change test's power at candidate k from stored
outputs, which is the better estimate for the "changed" side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy.special import ndtri

from ._validation import as_finite, as_positive_int, as_probability

__all__ = ["Settling", "corrected_level", "settling_k"]


@dataclass(frozen=True)
class Settling:
    """The projected outputs per arm at which an inconclusive decision would settle."""

    k: int
    """Outputs per arm (each of the two arms)."""
    towards: Literal["equivalent", "changed"]
    """Which decision the projection reaches."""


def corrected_level(alpha: float, p_value: float, adjusted_p: float) -> float | None:
    """The raw level a test's p-value must reach under its family's correction, read off
    its raw and adjusted p-values: ``alpha * p / adjusted p`` (alpha/m for Bonferroni), at
    most alpha; None when the adjusted p-value is 0 (nothing to read)."""
    a, p, adjusted = (
        as_finite(v, n)
        for v, n in ((alpha, "alpha"), (p_value, "p_value"), (adjusted_p, "adjusted_p"))
    )
    return min(a * p / adjusted, a) if adjusted > 0 else None


def settling_k(
    estimate: float,
    low: float,
    high: float,
    margin: float,
    k: int,
    *,
    confidence: float = 0.90,
    level: float | None = None,
    power: float = 0.8,
    max_k: int = 100_000,
) -> Settling | None:
    """Projected k per arm at which the two-sided ``confidence`` interval ``[low, high]``
    around ``estimate``, seen at ``k`` outputs per arm, would settle against ``margin``
    with probability ``power`` by a one-sided test at ``level`` (default ``(1 -
    confidence) / 2``, the interval's own; smaller where a family's correction asks for
    more); None when it is already settled at that level, when the estimate gives no
    direction (at most 0), or when the projection exceeds ``max_k``."""
    est, lo, hi = (
        as_finite(v, n) for v, n in ((estimate, "estimate"), (low, "low"), (high, "high"))
    )
    delta = as_finite(margin, "margin")
    if delta <= 0:
        raise ValueError(f"margin: must be positive, got {margin!r}")
    if not lo <= hi:
        raise ValueError(f"low: {low!r} is above high, {high!r}")
    k0 = as_positive_int(k, "k", minimum=2)
    z = float(ndtri((1.0 + as_probability(confidence, "confidence")) / 2.0))
    one_sided = (1.0 - confidence) / 2.0 if level is None else as_probability(level, "level")
    z_level = float(ndtri(1.0 - one_sided))
    scale = (z_level + float(ndtri(as_probability(power, "power")))) / z
    cap = as_positive_int(max_k, "max_k", minimum=k0)
    upper = est + (hi - est) * z_level / z  # the bounds at ``level``
    lower = est - (est - lo) * z_level / z
    if upper < delta or lower > 0:
        return None
    if est < delta:
        ratio, towards = (hi - est) * scale / (delta - est), "equivalent"
    elif est > 0:
        ratio, towards = (est - lo) * scale / est, "changed"
    else:
        return None
    needed = math.ceil(k0 * ratio**2)
    if needed > cap:
        return None
    return Settling(k=max(needed, k0 + 1), towards=towards)  # type: ignore[arg-type]
