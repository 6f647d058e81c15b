"""Alarms across a family of monitors (arms, prompts): e-Bonferroni or e-BH.

Both are valid under any dependence between the arms (Wang & Ramdas 2022, JRSS-B 84).
``"bonferroni"`` (the default) alarms arm i when its e-value reaches ``m / alpha``; applied to
each arm's largest e-value so far it keeps the monitor's promise for the whole family: the
probability that any arm without a change ever alarms is at most ``alpha`` (Ville's
inequality per arm at level ``alpha / m``, a union bound across arms), which is what a
sticky alarm that pages someone needs. ``"ebh"`` alarms the ``r`` arms with the largest
e-values, ``r`` the largest with ``e_(r) >= m / (alpha r)``: it controls the false discovery
rate at ``alpha`` at the tick it is applied to (with each arm's current e-value, an e-value
at any stopping time), and alarms more arms when many changed, but its promise is about one
tick's list, not about ever alarming.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import as_probability, choose

__all__ = ["E_FAMILY_METHODS", "FamilyAlarms", "family_alarms"]

E_FAMILY_METHODS = ("bonferroni", "ebh")


@dataclass(frozen=True)
class FamilyAlarms:
    """Which arms of a family alarm, and the line each e-value was held to."""

    alarmed: NDArray[np.bool_]
    """(m,) True where the arm alarms, in the order given."""
    threshold: float
    """The e-value an arm needed: ``m / alpha`` (bonferroni), ``m / (alpha r)`` (ebh, with
    ``r`` arms alarmed; ``m / alpha`` where none is)."""
    method: str
    alpha: float


def family_alarms(
    e_values: ArrayLike, *, alpha: float = 0.05, method: str = "bonferroni"
) -> FamilyAlarms:
    """Alarms of ``m`` arms from their e-values (module docstring for the two methods)."""
    e, level, method = _family_iv(e_values, alpha, method)
    m = e.size
    if method == "bonferroni":
        return FamilyAlarms(e >= m / level, m / level, method, level)
    order = np.argsort(-e, kind="stable")
    ranks = np.arange(1, m + 1)
    passing = np.nonzero(e[order] >= m / (level * ranks))[0]
    r = int(passing[-1]) + 1 if passing.size else 0
    alarmed = np.zeros(m, dtype=bool)
    alarmed[order[:r]] = True
    return FamilyAlarms(alarmed, m / (level * max(r, 1)), method, level)


def _family_iv(e_values: Any, alpha: Any, method: Any) -> tuple[NDArray[np.float64], float, str]:
    try:
        e = np.asarray(e_values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("e_values: not a numeric array") from None
    if e.ndim != 1 or e.size == 0:
        raise ValueError(f"e_values: must be a non-empty 1-D sequence, got shape {e.shape}")
    if np.any(np.isnan(e)) or np.any(e < 0.0):
        raise ValueError("e_values: every e-value must be a number >= 0")
    return e, as_probability(alpha, "alpha"), choose(method, "method", E_FAMILY_METHODS)
