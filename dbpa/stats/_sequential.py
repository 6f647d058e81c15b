"""Sequential audits: the looks, and what they share with the boundary.

A test of a sequential audit looks at its first ``k_j`` outputs per arm at each look
``j`` of a ``SequentialDesign`` and spends a share ``w_j`` of its level there (``sum w_j =
1``). Where it stops as changed is decided on the joint permutation distribution of its
looks (``_group_sequential``). This module holds the design, the per-test and per-family
results, and ``sequential_p_value``, the weighted-Bonferroni combination ``min_j p_j / w_j``
of valid per-look p-values (valid whatever the dependence between looks and whenever the
test stops: ``P(min_j p_j / w_j <= t) <= sum_j P(p_j <= w_j t) <= t``), which the audit uses
for the equivalence p-values of the looks taken.

The default weights keep 0.7 of the level for the last look and share the rest equally
among the interim looks (0.1 each with four looks); futility stops at a look p-value above
0.2. The group-sequential boundary does not pay twice for crossings the looks share, so it
can spend more at the interim looks than a union bound could for the same power at k max:
measured in ``python -m benchmarks sequential``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._multiplicity import lone_threshold
from ._validation import as_positive_int, as_probability

__all__ = [
    "SequentialDesign",
    "SequentialFamily",
    "SequentialTest",
    "sequential_design",
    "sequential_p_value",
    "unreachable_looks",
]

StopReason = Literal["changed", "futile", "k_max"]


@dataclass(frozen=True)
class SequentialDesign:
    """When a sequential test looks, and how much of the level each look spends."""

    looks: tuple[int, ...]
    """Outputs per arm at each look, increasing; the last is ``k_max``."""
    weights: tuple[float, ...]
    """Share of the level spent at each look (sum 1)."""
    futility: float | None
    """Stop a test at an interim look whose p-value exceeds this; None: never."""

    @property
    def k_max(self) -> int:
        """Outputs per arm of a test that never stops early."""
        return self.looks[-1]


def sequential_design(
    k_max: int,
    *,
    first: int = 8,
    n_looks: int = 4,
    final_weight: float = 0.7,
    futility: float | None = 0.2,
) -> SequentialDesign:
    """Looks at ``n_looks`` arm sizes evenly spaced from ``first`` to ``k_max`` (rounded),
    the last with weight ``final_weight`` and the others sharing the rest equally."""
    k = as_positive_int(k_max, "k_max", minimum=2)
    start = as_positive_int(first, "first", minimum=2)
    if start > k:
        raise ValueError(f"first: {first} is above k_max ({k_max})")
    n = as_positive_int(n_looks, "n_looks")
    final = float(final_weight)
    if not 0.0 < final <= 1.0:
        raise ValueError(f"final_weight: must be in (0, 1], got {final_weight!r}")
    if futility is not None:
        futility = as_probability(futility, "futility")
    looks = tuple(sorted({int(v) for v in np.rint(np.linspace(start, k, n))}))
    if len(looks) == 1:
        return SequentialDesign(looks=looks, weights=(1.0,), futility=futility)
    interim = (1.0 - final) / (len(looks) - 1)
    weights = (*([interim] * (len(looks) - 1)), final)
    return SequentialDesign(looks=looks, weights=weights, futility=futility)


def unreachable_looks(
    design: SequentialDesign, m: int, alpha: float, method: str
) -> tuple[int, ...]:
    """The looks at which no test of a family of ``m`` can stop as changed, whatever B: at
    k outputs per arm no permutation p-value is below 1/C(2k, k) (the observed split alone),
    and there that is above ``w_j`` times the lone threshold. Such looks stop tests for
    futility only."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    threshold = lone_threshold(as_positive_int(m, "m"), alpha, method)
    return tuple(
        k
        for k, w in zip(design.looks, design.weights, strict=True)
        if 1.0 / math.comb(2 * k, k) > w * threshold
    )


def sequential_p_value(p_values: ArrayLike, weights: ArrayLike) -> float:
    """``min_j p_j / w_j`` over the looks taken so far (capped at 1): a valid p-value under
    any stopping rule when the weights of all planned looks sum to at most 1."""
    p = np.asarray(p_values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p_values: one per look taken (at least one), got shape {p.shape}")
    if w.shape != p.shape:
        raise ValueError(f"weights: one per look taken ({p.size}), got shape {w.shape}")
    if not ((p >= 0) & (p <= 1)).all():
        raise ValueError("p_values: must be in [0, 1]")
    if not (w > 0).all():
        raise ValueError("weights: must be positive")
    return float(min(1.0, np.min(p / w)))


@dataclass(frozen=True)
class SequentialTest:
    """One perturbation's sequential test."""

    p_values: tuple[float, ...]
    """The permutation p-value at each look taken (on the test's paths)."""
    p_value: float
    """Its p-value when it stopped: the stage-wise p-value (``_group_sequential``), 1 when
    stopped for futility."""
    stopped_at: int
    """Outputs per arm when it stopped."""
    reason: StopReason
    """``changed`` (crossed its boundary), ``futile`` or ``k_max``."""


@dataclass(frozen=True)
class SequentialFamily:
    """A family tested sequentially, and its final correction."""

    tests: tuple[SequentialTest, ...]
    adjusted: NDArray[np.float64]
    """The tests' p-values adjusted by the family's correction."""
    reject: NDArray[np.bool_]
    """Changed after the correction."""
    calls: int
    """Outputs sampled: the original arm up to the last stop, each perturbed arm up to its own."""
    fixed_calls: int
    """Outputs a fixed design at ``k_max`` samples: ``(m + 1) k_max``."""


def _arms_iv(
    original: ArrayLike, perturbed: Sequence[ArrayLike], k_max: int
) -> tuple[Any, list[Any]]:
    a = np.asarray(original, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < k_max:
        raise ValueError(f"original: needs k_max = {k_max} rows of embeddings, got shape {a.shape}")
    arms = [np.asarray(b, dtype=np.float64) for b in perturbed]
    if not arms:
        raise ValueError("perturbed: needs at least one perturbed arm")
    for i, b in enumerate(arms):
        if b.ndim != 2 or b.shape[0] < k_max or b.shape[1] != a.shape[1]:
            raise ValueError(
                f"perturbed: arm {i} needs k_max = {k_max} rows of {a.shape[1]} columns, "
                f"got shape {b.shape}"
            )
    return a, arms
