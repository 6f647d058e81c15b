"""The equivalence test's level at the margin and its power, percentile against score tests.

``python -m benchmarks.equivalence_score [--quick]`` (or ``python -m benchmarks
equivalence-score``).

A measurement for issue 16, not the product's method. The product's equivalence p-value of
``theta >= margin`` is the percentile one over the effect interval's bootstrap replicates;
it errs at about 0.07 at the margin where a few repeated answers change shares, because the
bootstrap's spread is that of the estimate, and an estimate below the margin has a smaller
spread than the margin would (``benchmarks/README.md``, "equivalence-bc"). The candidates
evaluate the spread *at the margin*, as a score test does (Wilson's interval, Farrington and
Manning's non-inferiority test), with the model of the interval's lower bound
(``dbpa.stats._interval``): under ``theta_0`` the U-statistic is ``theta_0 + D + L``, D its
degenerate part (law: U over random relabellings of the pooled outputs) and L its
first-order part, normal with variance ``g theta_0``. The p-value is the largest over
``theta_0 >= margin`` (a grid up to 5 margins) of ``(1 + sum_j Phi((U - theta_0 - D_j) /
sqrt(g theta_0))) / (1 + n)``:

- ``score, observed``: ``g`` from the observed direction of the change, the Rayleigh
  quotient of the arms' mean difference in the kernel's feature space under the pooled
  covariance (at most the worst case below; the direction is estimated, so noise tilts it
  towards the high-variance directions); in closed form, the gamma of ``interval_coverage``'s
  ``score, independent normal``, measured there for coverage at k <= 40;
- ``score, worst case``: ``g = gamma_max`` (the lower bound's Cauchy-Schwarz bound), valid
  whatever the direction.

The cells, seeds and tables are those of ``equivalence_bc`` (1000 audits per cell, B=1000
replicates and relabellings). About 45 minutes on two cores.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from benchmarks.equivalence_bc import N_BOOTSTRAP, tables
from dbpa.stats._interval import (
    _bootstrap,
    _gamma_max,
    _relabelled,
    energy_u_statistic,
    l2_distance,
)

SUPREMUM_GRID = np.array([1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0])
"""Hypothesised effects, in margins, over which a p-value takes its largest value."""


def gamma_observed(distances: np.ndarray, k_a: int) -> float:
    """First-order variance of U per unit theta along the arms' observed mean difference:
    ``4 (1/k_a + 1/k_b) c'M^2c / ((N - 1) c'Mc)``, ``M = -J D J``, c the mean difference's
    coefficients (``_gamma_max`` takes the largest eigenvalue of ``M`` instead)."""
    size = distances.shape[0]
    centred = distances - distances.mean(0) - distances.mean(1)[:, None] + distances.mean()
    c = np.concatenate([np.full(k_a, -1.0 / k_a), np.full(size - k_a, 1.0 / (size - k_a))])
    mc = -centred @ c
    quad = float(c @ mc)
    if quad <= 0.0:
        return _gamma_max(distances, k_a)
    return 4.0 * (1.0 / k_a + 1.0 / (size - k_a)) * float(mc @ mc) / quad / (size - 1)


def score_p_value(estimate: float, degenerate: np.ndarray, gamma: float, margin: float) -> float:
    """The score test's p-value of ``theta >= margin`` (its largest over the grid)."""
    theta = SUPREMUM_GRID[:, None] * margin
    below = ndtr((estimate - theta - degenerate) / np.sqrt(gamma * theta)).sum(axis=1)
    return float((1.0 + below.max()) / (1.0 + degenerate.size))


def p_values(
    original: np.ndarray, perturbed: np.ndarray, margin: float, rng: np.random.Generator
) -> tuple[float, float, float]:
    """The percentile (product), observed-direction score and worst-case score p-values."""
    k = len(original)
    distances = l2_distance(np.vstack([original, perturbed]))
    estimate = energy_u_statistic(distances, k)
    r = _bootstrap(distances, k, N_BOOTSTRAP, rng)
    percentile = (1 + np.count_nonzero(r >= margin)) / (1 + r.size)
    degenerate = _relabelled(distances, k, N_BOOTSTRAP, rng)
    return (
        percentile,
        score_p_value(estimate, degenerate, gamma_observed(distances, k), margin),
        score_p_value(estimate, degenerate, _gamma_max(distances, k), margin),
    )


def main(quick: bool = False) -> None:
    columns = ["percentile (product)", "score, observed", "score, worst case"]
    tables(p_values, "percentile vs score tests", columns, quick)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    main(quick=parser.parse_args().quick)
