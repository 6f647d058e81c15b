"""Equivalence: how many outputs per arm show "equivalent" when nothing changed, and how
often "equivalent" is wrongly shown when the effect is exactly the margin.

Simulated audits on the synthetic answer space of the power benchmark (d=384), one test at
alpha=0.05: the effect interval (``dbpa.stats.effect_interval``, energy distance, B=500) and
the bootstrap equivalence test against the margin (``equivalence_p_value <= alpha``). Three
tables:

1. no effect (both arms from the same distribution), fixed margins: the share of audits
   declaring "equivalent" at each k, and the smallest k of the grid with power >= 0.8;
2. no effect, the margin calibrated as ``dbpa run`` does by default: 3 replicate arms of
   the original, the 0.95 quantile of the energy distances between every two of the 4
   samples (6 pairs) at the same k;
3. the effect exactly at the margin (the shift and reweighted-mixture scenarios, the margin
   set to their true effect): the share declaring "equivalent", which must stay <= alpha
   (95% Clopper-Pearson intervals).
"""

from __future__ import annotations

import itertools
import time

import numpy as np
from scipy.stats import binomtest

from benchmarks._table import print_table
from dbpa.stats import calibrate_margin, effect_interval, equivalence_p_value
from tests.stats.synthetic_effects import scenario, true_effect

ALPHA = 0.05
TARGET_POWER = 0.8
N_BOOTSTRAP = 500
ROOT_SEED = 20261124
MARGINS = (0.02, 0.04, 0.08)
"""Fixed margins on the energy-distance scale (for scale: the shift scenario's effect is
about 0.064, the reweighted mixture's about 0.072)."""
REPLICATES = 3
QUANTILE = 0.95


def _rate(hits: int, n: int) -> str:
    ci = binomtest(hits, n).proportion_ci(0.95, method="exact")
    return f"{hits / n:.2f} [{ci.low:.2f}, {ci.high:.2f}]"


def _null_audits(k: int, sims: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per audit: the equivalence p-value at every fixed margin, and at the calibrated one
    (with that margin)."""
    null = scenario("null")
    fixed = np.empty((sims, len(MARGINS)))
    calibrated = np.empty((sims, 2))
    for i in range(sims):
        original, perturbed = null.draw(rng, k)
        interval = effect_interval(original, perturbed, n_bootstrap=N_BOOTSTRAP, rng=rng)
        fixed[i] = [equivalence_p_value(interval, m) for m in MARGINS]
        copies = [original, *(null.draw(rng, k)[0] for _ in range(REPLICATES))]
        margin = calibrate_margin(list(itertools.combinations(copies, 2)), quantile=QUANTILE)
        calibrated[i] = (equivalence_p_value(interval, margin.margin), margin.margin)
    return fixed, calibrated


def _at_the_margin(name: str, k: int, sims: int, rng: np.random.Generator) -> int:
    """Audits of scenario ``name`` declared equivalent with the margin at its true effect."""
    s, margin = scenario(name), true_effect(name)
    hits = 0
    for _ in range(sims):
        interval = effect_interval(*s.draw(rng, k), n_bootstrap=N_BOOTSTRAP, rng=rng)
        hits += equivalence_p_value(interval, margin) <= ALPHA
    return hits


def main(quick: bool = False) -> None:
    sims = 40 if quick else 200
    ks = (10, 20, 40) if quick else (10, 20, 40, 80, 160)
    rng = np.random.default_rng(ROOT_SEED)
    start = time.perf_counter()
    print(f"equivalence: {sims} audits per cell, alpha={ALPHA}, B={N_BOOTSTRAP} bootstrap")

    fixed_rows: list[list[object]] = []
    calibrated_rows: list[list[object]] = []
    shares: dict[float, list[float]] = {m: [] for m in MARGINS}
    for k in ks:
        fixed, calibrated = _null_audits(k, sims, rng)
        hits = (fixed <= ALPHA).sum(axis=0)
        for m, h in zip(MARGINS, hits, strict=True):
            shares[m].append(h / sims)
        fixed_rows.append([k, *(_rate(int(h), sims) for h in hits)])
        calibrated_rows.append(
            [
                k,
                f"{np.median(calibrated[:, 1]):.4f}",
                _rate(int((calibrated[:, 0] <= ALPHA).sum()), sims),
            ]
        )
    needed = [
        next(
            (str(k) for k, s in zip(ks, shares[m], strict=True) if s >= TARGET_POWER), f"> {ks[-1]}"
        )
        for m in MARGINS
    ]
    print_table(
        "no effect, fixed margins: share declared equivalent (95% CI)",
        ["k", *(f"margin {m:g}" for m in MARGINS)],
        [*fixed_rows, [f"k for power >= {TARGET_POWER}", *needed]],
    )
    print_table(
        f"no effect, margin calibrated on {REPLICATES} replicate arms (q={QUANTILE}, "
        f"{REPLICATES * (REPLICATES + 1) // 2} pairs at the same k)",
        ["k", "median margin", "declared equivalent"],
        calibrated_rows,
    )
    margin_rows = []
    for name in ("shift", "mixture"):
        for k in ks[1:4] if not quick else ks[1:]:
            hits = _at_the_margin(name, k, sims, rng)
            low = binomtest(hits, sims).proportion_ci(0.95, method="exact").low
            verdict = "ok" if low <= ALPHA else "ABOVE alpha"  # the CI must reach alpha
            margin_rows.append([name, f"{true_effect(name):.4f}", k, _rate(hits, sims), verdict])
    print_table(
        f"effect exactly at the margin: share declared equivalent (must be <= {ALPHA})",
        ["scenario", "margin = effect", "k", "declared equivalent", "<= alpha"],
        margin_rows,
    )
    print(f"\n{time.perf_counter() - start:.0f} s")
