"""Scenarios for the interval and equivalence simulations, with their true effect.

The answer-space shapes are those of benchmarks/_synthetic.py (the power benchmark's
arms); their true energy distance comes from large independent samples stratified by
answer type (exactly n * w_j answers of type j, so the type shares add no noise). The
``gauss_shift`` shape (two isotropic normal clouds whose means differ along one axis) has
a closed-form truth: every direction varies alike there, unlike in an answer space.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import gammaln, hyp1f1

from benchmarks._synthetic import AnswerSpace, Arm, answer_space, sample

TYPICAL = Arm(weights=(0.4, 0.3, 0.2, 0.1))
COMPACT = Arm(weights=(0.6, 0.4), detail=0.3, noise=0.15)
FEW_TEXTS = Arm(weights=(0.5, 0.3, 0.2), detail=0.0, noise=0.001)
"""Three nearly fixed answers, as a model that repeats a few texts."""
TWO_TEXTS = Arm(weights=(0.5, 0.5), detail=0.0, noise=0.001)
"""Two nearly fixed answers: all the noise lies along the one direction a change can take."""
COLLAPSE = (0.97, 0.02, 0.01)
"""A perturbed arm collapsing onto the original's most common answer: its sample is often
that answer alone, and the original's sample spread is smallest exactly when it too
over-represents that answer (the Wald-at-the-boundary problem of proportions)."""
SCENARIOS: dict[str, tuple[Arm, Arm]] = {
    "null": (TYPICAL, TYPICAL),
    "shift": (COMPACT, replace(COMPACT, drift=0.2)),
    "spread": (TYPICAL, replace(TYPICAL, detail=0.3)),
    "mixture": (TYPICAL, replace(TYPICAL, weights=(0.1, 0.3, 0.2, 0.4))),
    "few_texts": (FEW_TEXTS, replace(FEW_TEXTS, weights=(0.3, 0.3, 0.4))),
    "two_texts": (TWO_TEXTS, replace(TWO_TEXTS, weights=(0.35, 0.65))),
    "collapse": (replace(FEW_TEXTS, weights=(0.6, 0.3, 0.1)), replace(FEW_TEXTS, weights=COLLAPSE)),
    "collapse_hard": (
        replace(FEW_TEXTS, weights=(0.8, 0.15, 0.05)),
        replace(FEW_TEXTS, weights=COLLAPSE),
    ),
}
SHARE_DETAIL = Arm(weights=(0.5, 0.5), type_scale=0.5, detail=0.9, noise=0.2)
"""Two answer types worded in many ways (``DETAIL_RANK`` directions of detail): most of the
noise lies in many small directions, the change of shares along the one that varies most."""
DETAIL_RANK = 64
TRUTH_N = 4000
"""Outputs per arm behind a true effect."""
TRUE_EFFECTS = {
    "null": -0.00013869810828548435,
    "shift": 0.06350018919918143,
    "spread": 0.005077879937474661,
    "mixture": 0.07149090969640393,
    "few_texts": 0.07321134900068971,
    "two_texts": 0.04112755234611154,
    "collapse": 0.2051277434923695,
    "collapse_hard": 0.04346159710061038,
    "share_detail": 0.011405591146367078,
}
"""Energy distance ``2 E|X - Y| - E|X - X'| - E|Y - Y'|`` (``Scenario.energy_terms()``) of
each answer-space scenario (TRUTH_N outputs per arm, 1 s each): recorded, so that a test
process does not recompute them (every xdist worker did); ``tests/stats/test_synthetic_effects.py``
recomputes each once per run and fails on any change of a scenario that is not recorded here."""


GAUSS_DIM = 10
GAUSS_SHIFT = 0.7
"""Dimension and mean shift of the ``gauss_shift`` shape (theta about 0.106)."""


@dataclass(frozen=True)
class GaussianShift:
    """Two standard normal arms in ``dim`` dimensions, the perturbed mean moved by ``shift``."""

    dim: int
    shift: float

    def draw(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
        a = rng.standard_normal((k, self.dim))
        b = rng.standard_normal((k, self.dim))
        b[:, 0] += self.shift
        return a, b

    def energy_distance(self) -> float:
        """``2 E|X - Y| - E|X - X'| - E|Y - Y'|``: each difference is normal with covariance
        2I, so each mean is sqrt(2) times a (non-central) chi mean."""
        return (
            2.0
            * np.sqrt(2.0)
            * (_chi_mean(self.dim, self.shift / np.sqrt(2.0)) - _chi_mean(self.dim, 0.0))
        )


def _chi_mean(dim: int, noncentrality: float) -> float:
    """Mean of a non-central chi with ``dim`` degrees of freedom: ``sqrt(pi/2)
    L_{1/2}^{(dim/2 - 1)}(-lambda^2 / 2)``, the generalized Laguerre function as Kummer's M."""
    a = dim / 2.0 - 1.0
    scale = np.exp(gammaln(a + 1.5) - gammaln(1.5) - gammaln(a + 1.0))
    return float(np.sqrt(np.pi / 2.0) * scale * hyp1f1(-0.5, a + 1.0, -(noncentrality**2) / 2.0))


@dataclass(frozen=True)
class Scenario:
    """Two arms in one answer space."""

    space: AnswerSpace
    original: Arm
    perturbed: Arm

    def draw(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
        return sample(rng, self.space, self.original, k), sample(rng, self.space, self.perturbed, k)

    def energy_terms(self) -> tuple[float, float, float]:
        """``E|X - Y|``, ``E|X - X'|`` and ``E|Y - Y'|`` from TRUTH_N outputs per arm."""
        rng = np.random.default_rng(99)
        a = _stratified(rng, self.space, self.original, TRUTH_N)
        b = _stratified(rng, self.space, self.perturbed, TRUTH_N)
        return (
            _mean_distance(a, b, same=False),
            _mean_distance(a, a, same=True),
            _mean_distance(b, b, same=True),
        )


def scenario(name: str) -> Scenario | GaussianShift:
    if name == "gauss_shift":
        return GaussianShift(GAUSS_DIM, GAUSS_SHIFT)
    if name == "share_detail":
        space = answer_space(np.random.default_rng(7), rank=DETAIL_RANK)
        return Scenario(space, SHARE_DETAIL, replace(SHARE_DETAIL, weights=(0.3, 0.7)))
    return Scenario(answer_space(np.random.default_rng(7)), *SCENARIOS[name])


def _stratified(rng: np.random.Generator, space: AnswerSpace, arm: Arm, n: int) -> np.ndarray:
    weights = np.asarray(arm.weights) / np.sum(arm.weights)
    parts = []
    for j, w in enumerate(weights):
        one_type = replace(arm, weights=tuple(float(i == j) for i in range(weights.size)))
        parts.append(sample(rng, space, one_type, round(n * w)))
    return np.vstack(parts)


def _mean_distance(x: np.ndarray, y: np.ndarray, same: bool, block: int = 1000) -> float:
    """Mean Euclidean distance between unit rows (|x - y| = sqrt(2 - 2 x.y)), self-pairs out."""
    total = 0.0
    for i in range(0, len(x), block):
        total += float(np.sqrt(np.clip(2.0 - 2.0 * (x[i : i + block] @ y.T), 0.0, None)).sum())
    pairs = len(x) * (len(y) - 1) if same else len(x) * len(y)
    return total / pairs


def true_effect(name: str) -> float:
    """The scenario's true energy distance (Euclidean): from TRUTH_N outputs per arm (as
    recorded in TRUE_EFFECTS), or in closed form for ``gauss_shift``."""
    if name == "gauss_shift":
        return float(GaussianShift(GAUSS_DIM, GAUSS_SHIFT).energy_distance())
    return TRUE_EFFECTS[name]
