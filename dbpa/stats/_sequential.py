"""Sequential audits: look at each test after every round of outputs, stop it once its
answer is clear, and keep the family's error rate.

Peeking at a fixed-k permutation p-value after every round and stopping when it dips below
alpha is invalid: each look is another chance of a false rejection. Here the level is
spread over the looks by a weighted Bonferroni (union) bound, the simplest alpha-spending
design (Bonferroni spending; cf. Lan & DeMets 1983, Haybittle 1971 / Peto 1976 for small
interim levels): look j of a test (its first ``k_j`` outputs per arm) gets weight ``w_j``
(``sum w_j = 1``), and the test's **sequential p-value** after looks ``1..J`` is

    p_seq = min_j p_j / w_j    (capped at 1).

Each permutation p-value is valid (``P(p_j <= t) <= t`` under no change), so
``P(p_seq <= t) <= sum_j P(p_j <= t w_j) <= t``: ``p_seq`` is a valid p-value whatever the
dependence between looks and whenever the test stops. A family's multiplicity correction
then applies to the ``p_seq`` as to fixed-k p-values: Holm and Bonferroni keep the
family-wise error (any dependence), BY the false discovery rate (any dependence), BH the
false discovery rate as it does for the fixed design (positive dependence).

**Stopping.** A test stops as *changed* at the first look where ``p_seq`` reaches its
family's stop threshold: the lone threshold (``lone_threshold``: alpha/m for Holm,
Bonferroni and BH, alpha/(m H_m) for BY) while none of the family has stopped as changed,
and, once ``r`` have, the threshold of the correction's step ``r + 1``: alpha/(m - r) for
Holm (Holm 1979), alpha (r + 1)/m for BH and alpha (r + 1)/(m H_m) for BY (Benjamini &
Hochberg 1995; Benjamini & Yekutieli 2001); Bonferroni has no steps. The final correction
rejects every test so stopped whatever the open tests' p-values turn out to be (the r + 1
stopped p-values are each at most the step's threshold, so the step-down reaches, and the
step-up passes, step r + 1), so the early decision is the one the end would make; tests
reaching a look are taken in order of their sequential p-values. With ``futility``, a test
also stops (as *futile*, non-binding) at an interim look whose ``p_j`` exceeds it: stopping can only
remove rejections, so validity is kept; it costs some power on small effects, measured in
``python -m benchmarks sequential``. Tests still open at ``k_max`` stop there.

The default weights keep most of the level for the last look (``final_weight``, 0.85), so
power at ``k_max`` stays close to the fixed-k test's (a final weight of 0.7 cost 0.22 of
power on a moderate effect in the benchmark), and share the rest equally among the interim
looks, so that a large effect can stop at the first one; futility stops at p > 0.2. A look
can only stop a test as changed if its permutation p-value can reach ``w_j`` times the
lone threshold: ``min_permutations`` says how many permutations that takes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._multiplicity import CORRECTIONS, correct, lone_threshold
from ._permutation import permutation_test
from ._validation import RngLike, as_positive_int, as_probability, as_rng, choose

__all__ = [
    "SequentialDesign",
    "SequentialFamily",
    "SequentialTest",
    "family_stops",
    "min_permutations",
    "sequential_design",
    "sequential_family",
    "sequential_p_value",
    "sequential_stop",
    "stop_threshold",
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
    final_weight: float = 0.85,
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


def min_permutations(design: SequentialDesign, m: int, alpha: float, method: str) -> int:
    """Fewest permutations B with which every look can stop a test of a family of ``m`` as
    changed: the smallest p-value, 1/(B+1), must reach ``w_j`` times the lone threshold."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    threshold = stop_threshold(m, alpha, method)
    return int(np.ceil(1.0 / (min(design.weights) * threshold) - 1.0 - 1e-9))


def unreachable_looks(
    design: SequentialDesign, m: int, alpha: float, method: str
) -> tuple[int, ...]:
    """The looks at which no test of a family of ``m`` can stop as changed, whatever B: at
    k outputs per arm no permutation p-value is below 1/C(2k, k) (the observed split alone),
    and there that is above ``w_j`` times the lone threshold. Such looks stop tests for
    futility only."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    threshold = stop_threshold(m, alpha, method)
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
    """The permutation p-value at each look taken."""
    p_value: float
    """The sequential p-value when it stopped (``sequential_p_value``)."""
    stopped_at: int
    """Outputs per arm when it stopped."""
    reason: StopReason
    """``changed`` (reached the family's stop threshold), ``futile`` or ``k_max``."""


def stop_threshold(m: int, alpha: float, method: str, changed: int = 0) -> float:
    """The sequential p-value at which a test of a family of ``m`` stops as changed once
    ``changed`` of its tests have: the correction's threshold at step ``changed + 1``
    (alpha/(m - changed) for Holm, alpha (changed + 1)/m for BH, that over H_m for BY,
    alpha/m for Bonferroni), which the final correction rejects whatever the open tests'
    p-values. With ``changed = 0``, the family's lone threshold."""
    size = as_positive_int(m, "m")
    level = as_probability(alpha, "alpha")
    method = choose(method, "method", CORRECTIONS)
    done = as_positive_int(changed, "changed", minimum=0)
    if done >= size:
        raise ValueError(f"changed: must be below m = {size}, got {done}")
    lone = lone_threshold(size, level, method)
    if method == "holm":
        return level / (size - done)
    if method in {"bh", "by"}:
        return lone * (done + 1)
    return lone


def sequential_stop(
    p_values: Sequence[float], design: SequentialDesign, threshold: float
) -> SequentialTest | None:
    """The stopping rule after the looks taken so far (``p_values``, one per look in
    order): the test stops as ``changed`` once its sequential p-value reaches
    ``threshold`` (the family's ``stop_threshold``), as ``futile`` at an interim look whose
    p-value exceeds ``design.futility``, and at ``k_max`` in any case; None while open."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    j = len(p_values) - 1
    if not 0 <= j < len(design.looks):
        raise ValueError(
            f"p_values: one per look taken (1 to {len(design.looks)}), got {len(p_values)}"
        )
    limit = as_probability(threshold, "threshold")
    p_seq = sequential_p_value(p_values, design.weights[: j + 1])
    last = j == len(design.looks) - 1
    reason: StopReason | None = None
    if p_seq <= limit:
        reason = "changed"
    elif not last and design.futility is not None and p_values[-1] > design.futility:
        reason = "futile"
    elif last:
        reason = "k_max"
    if reason is None:
        return None
    return SequentialTest(tuple(float(p) for p in p_values), p_seq, design.looks[j], reason)


def family_stops(
    histories: Sequence[Sequence[float]],
    design: SequentialDesign,
    *,
    m: int,
    alpha: float,
    method: str,
    changed: int = 0,
) -> list[SequentialTest | None]:
    """One look at a family's open tests: ``histories`` holds each open test's p-values at
    the looks taken so far; ``changed`` tests of the family's ``m`` stopped as changed at
    earlier looks. Tests are taken in order of their sequential p-values and each is
    stopped by ``sequential_stop`` at the family's current ``stop_threshold``. Returns
    each test's stop, in the order given (None while open)."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    size = as_positive_int(m, "m")
    done = as_positive_int(changed, "changed", minimum=0)
    if len(histories) + done > size:
        raise ValueError(
            f"histories: {len(histories)} open tests and {done} changed exceed m = {size}"
        )
    order = sorted(
        range(len(histories)),
        key=lambda i: sequential_p_value(histories[i], design.weights[: len(histories[i])]),
    )
    stops: list[SequentialTest | None] = [None] * len(histories)
    for i in order:
        threshold = stop_threshold(size, alpha, method, done)
        stops[i] = stop = sequential_stop(histories[i], design, threshold)
        done += stop is not None and stop.reason == "changed"
    return stops


@dataclass(frozen=True)
class SequentialFamily:
    """A family tested sequentially, and its final correction."""

    tests: tuple[SequentialTest, ...]
    adjusted: NDArray[np.float64]
    """The sequential p-values adjusted by the family's correction."""
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


def sequential_family(
    original: ArrayLike,
    perturbed: Sequence[ArrayLike],
    design: SequentialDesign,
    *,
    alpha: float = 0.05,
    method: str = "holm",
    omega: str = "energy_cosine",
    n_permutations: int = 999,
    rng: RngLike = None,
    **omega_options: Any,
) -> SequentialFamily:
    """Test every perturbed arm against the original, look by look (each look uses the
    first ``k_j`` outputs of both arms, in order), stop each test by the design, and
    correct the family's sequential p-values by ``method``."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    a, arms = _arms_iv(original, perturbed, design.k_max)
    level = as_probability(alpha, "alpha")
    method = choose(method, "method", CORRECTIONS)
    gen = as_rng(rng)
    histories: list[list[float]] = [[] for _ in arms]
    tests: list[SequentialTest | None] = [None] * len(arms)
    for k in design.looks:
        open_tests = [i for i, t in enumerate(tests) if t is None]
        for i in open_tests:
            result = permutation_test(
                a[:k], arms[i][:k], omega=omega, n_permutations=n_permutations, rng=gen,
                **omega_options,
            )  # fmt: skip
            histories[i].append(result.p_value)
        changed = sum(1 for t in tests if t is not None and t.reason == "changed")
        found = family_stops(
            [histories[i] for i in open_tests], design, m=len(arms), alpha=level, method=method,
            changed=changed,
        )  # fmt: skip
        for i, stop in zip(open_tests, found, strict=True):
            tests[i] = stop
    finished = [t for t in tests if t is not None]
    assert len(finished) == len(arms)  # the last look stops every test
    final = correct([t.p_value for t in finished], method=method, alpha=level)
    stops = [t.stopped_at for t in finished]
    return SequentialFamily(
        tests=tuple(finished),
        adjusted=final.adjusted,
        reject=final.reject,
        calls=max(stops) + sum(stops),
        fixed_calls=(len(arms) + 1) * design.k_max,
    )
