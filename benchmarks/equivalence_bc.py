"""The equivalence test's level at the margin and its power, percentile against bias-corrected.

``python -m benchmarks.equivalence_bc [--quick]`` (or ``python -m benchmarks equivalence-bc``).

A measurement for issue 16, not the product's method: the product's equivalence p-value of
``theta >= margin`` is the percentile one, ``(1 + #{r >= margin}) / (1 + B)`` over the effect
interval's bootstrap replicates ``r``; the candidate is Efron's bias-corrected percentile
(BC; Efron 1981, "Nonparametric standard errors and confidence intervals"), whose upper bound
at level ``1 - alpha`` is the ``Phi(2 z0 + z_{1-alpha})`` quantile of the replicates, with
``z0 = Phi^-1(share of replicates below the estimate)``; as a p-value,
``1 - Phi(Phi^-1(share of replicates below the margin) - 2 z0)``. Both come from the same
replicates, drawn as ``dbpa.stats.effect_interval`` draws them (B=1000).

Every audit draws two arms of k outputs from a scenario of ``tests/stats/synthetic_effects``.
Tables: (1) the effect exactly at the margin (the margin set to the scenario's true effect):
the share declared equivalent, nominal <= 0.05; (2) no effect, the margin calibrated as
``dbpa run`` does by default (3 replicate arms of the original, the 0.95 quantile of the 6
pairs' distances at the same k); (3) no effect, fixed margins. 95% Clopper-Pearson intervals.
Each cell has its own seed, so cells can be rerun alone. About 25 minutes on two cores.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import numpy as np
from scipy.stats import binomtest, norm

from benchmarks._table import print_table
from dbpa.stats import calibrate_margin
from dbpa.stats._interval import _bootstrap, energy_u_statistic, l2_distance
from tests.stats.synthetic_effects import scenario, true_effect

ALPHA = 0.05
N_BOOTSTRAP = 1000
SHAPES = ("few_texts", "mixture", "shift", "spread", "gauss_shift")
FIXED_MARGINS = (0.02, 0.04, 0.08)


Rule = Callable[[np.ndarray, np.ndarray, float, np.random.Generator], tuple[float, ...]]
"""P-values of ``theta >= margin`` for one audit (original, perturbed, margin, rng)."""


def p_values(
    original: np.ndarray, perturbed: np.ndarray, margin: float, rng: np.random.Generator
) -> tuple[float, float]:
    """The percentile (product) and BC p-values of ``theta >= margin`` for one audit."""
    k = len(original)
    distances = l2_distance(np.vstack([original, perturbed]))
    estimate = energy_u_statistic(distances, k)
    r = _bootstrap(distances, k, N_BOOTSTRAP, rng)
    b = r.size
    percentile = (1 + np.count_nonzero(r >= margin)) / (1 + b)
    below_estimate = (np.count_nonzero(r < estimate) + 0.5 * np.count_nonzero(r == estimate)) / b
    z0 = norm.ppf(np.clip(below_estimate, 1 / b, 1 - 1 / b))
    below_margin = np.clip(np.count_nonzero(r < margin) / b, 0.5 / b, 1 - 0.5 / b)
    return percentile, float(1 - norm.cdf(norm.ppf(below_margin) - 2 * z0))


def cell(
    name: str, k: int, audits: int, seed: int, margin: float | None, rule: Rule = p_values
) -> tuple[int, ...]:
    """Audits of ``name`` declared equivalent by each p-value of ``rule`` (here percentile,
    BC); ``margin`` None: calibrated per audit on 3 replicate arms of the original."""
    s, rng = scenario(name), np.random.default_rng(seed)
    hits: np.ndarray | None = None
    for _ in range(audits):
        original, perturbed = s.draw(rng, k)
        m = margin
        if m is None:
            copies = [original, *(s.draw(rng, k)[0] for _ in range(3))]
            m = calibrate_margin(list(itertools.combinations(copies, 2)), quantile=0.95).margin
        declared = np.array(rule(original, perturbed, m, rng)) <= ALPHA
        hits = declared.astype(int) if hits is None else hits + declared
    assert hits is not None
    return tuple(int(h) for h in hits)


def rate(hits: int, n: int) -> str:
    ci = binomtest(hits, n).proportion_ci(0.95, method="exact")
    return f"{hits / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def tables(rule: Rule, title: str, columns: list[str], quick: bool) -> None:
    """The three tables (level at the margin, power with the calibrated and with fixed margins)
    of ``rule``'s p-values, one column each."""
    audits = 100 if quick else 1000
    ks = (20, 40) if quick else (10, 20, 40, 80, 160)
    start = time.perf_counter()
    print(f"equivalence, {title}: {audits} audits per cell, B={N_BOOTSTRAP}")
    rows = []
    for name in SHAPES:
        for k in ks:
            hits = cell(name, k, audits, 1000 + k, true_effect(name), rule)
            rows.append([name, f"{true_effect(name):.4f}", k, *(rate(h, audits) for h in hits)])
    print_table(
        f"effect exactly at the margin: share declared equivalent (nominal <= {ALPHA})",
        ["scenario", "margin = effect", "k", *columns],
        rows,
    )
    rows = [
        [k, *(rate(h, audits) for h in cell("null", k, audits, 2000 + k, None, rule))] for k in ks
    ]
    print_table(
        "no effect, margin calibrated on 3 replicate arms: share declared equivalent",
        ["k", *columns],
        rows,
    )
    rows = []
    for m in FIXED_MARGINS:
        for k in ks[1:]:
            hits = cell("null", k, audits // 2, 3000 + k, m, rule)
            rows.append([m, k, *(rate(h, audits // 2) for h in hits)])
    print_table(
        "no effect, fixed margins: share declared equivalent", ["margin", "k", *columns], rows
    )
    print(f"\n{time.perf_counter() - start:.0f} s")


def main(quick: bool = False) -> None:
    tables(p_values, "percentile vs BC", ["percentile (product)", "BC"], quick)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    main(quick=parser.parse_args().quick)
