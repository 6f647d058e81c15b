"""Equivalence: how often "equivalent" is wrongly shown when the effect is exactly the margin,
and how many outputs per arm show it when nothing changed; the product's test against the
ones it replaced, on the same audits.

Simulated audits on the synthetic answer spaces of ``tests/stats/synthetic_effects`` (d=384),
one test at alpha=0.05: the effect interval (``dbpa.stats.effect_interval``, B=1000) and
four p-values of ``theta >= margin`` from it: the product's (``equivalence_p_value``: the
tilted bootstrap on its fine grid, the least-favourable test below it, since 2026-12-06),
the product's of 2026-11-27 (the least-favourable test intersected with the tilted
bootstrap on a grid of ratio 1.15, recomputed here from the interval's distances), the
least-favourable test alone (the product's 2026-11-26), and the percentile bootstrap's
``(1 + #{replicates >= margin}) / (1 + B)`` (the product's until 2026-11-26). Three tables:

1. the effect exactly at the margin (the margin set to each scenario's true effect): the
   share declaring "equivalent", which must stay <= alpha (95% Clopper-Pearson intervals);
2. no effect, the margin calibrated as ``dbpa run`` does by default: 3 replicate arms of
   the original, the 0.95 quantile of the energy distances between every two of the 4
   samples (6 pairs) at the same k;
3. no effect, fixed margins: the share declaring "equivalent" at each k, and the smallest k
   of the grid with power >= 0.8.

``python -m benchmarks.bench_equivalence`` takes ``--sims``, ``--ks`` and ``--shapes`` (none:
the power tables only) for shorter runs; it prints only (the result file is the suite's run).
The full run takes hours on 2 cores.

Candidates measured before the product's test and not adopted: Efron's bias-corrected
percentile (held the level, power 0.58-0.67 at the calibrated margin); score tests at the
margin with a normal first-order part whose variance was the worst case (level held, power
0.08-0.12: the normal part's lower tail is much heavier than the non-central law it stands
for) or estimated along the observed direction (power kept, but 0.12 at the margin on
``share_detail``, where the observed direction is mostly noise); a relabelling of the pooled
outputs instead of the residual bootstrap (about the same level and power, but it counts the
arms' difference as noise, so an obvious difference below a wide margin could never be shown).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import numpy as np
from scipy.stats import binomtest

from benchmarks._results import ResultFile
from dbpa.stats import (
    EffectInterval,
    TiltedSteps,
    calibrate_margin,
    effect_interval,
    equivalence_p_value,
)
from dbpa.stats._boundary import (
    NO_GUARD,
    guard_p_value,
    least_favourable_bound,
    least_favourable_p_value,
)
from dbpa.stats._interval import GUARD_START
from dbpa.stats._tilted import tilted_steps
from tests.stats.synthetic_effects import scenario, true_effect

ALPHA = 0.05
TARGET_POWER = 0.8
N_BOOTSTRAP = 1000
ROOT_SEED = 20261126
MARGINS = (0.02, 0.04, 0.08)
"""Fixed margins on the energy-distance scale (for scale: the shift scenario's effect is
about 0.064, the reweighted mixture's about 0.072)."""
AT_MARGIN = (
    "few_texts",
    "two_texts",
    "collapse",
    "collapse_hard",
    "share_detail",
    "mixture",
    "gauss_shift",
    "shift",
)
"""Scenarios whose effect is made the margin: a few repeated answers changing shares, or a
perturbed arm collapsing onto the original's most common answer, are the least favourable
cases; a drift of every answer alike the most favourable."""
UNEQUAL = (("few_texts", 20, 80), ("collapse_hard", 10, 40), ("collapse_hard", 40, 10))
"""Scenarios at the margin with unequal arms (original, perturbed outputs)."""
REPLICATES = 3
QUANTILE = 0.95
METHODS = ("product", "2026-11-27 (intersection)", "least favourable alone", "percentile")
OLD_GRID = {"ratio": 1.15, "size": 40, "coarse": 1}
"""The tilted bootstrap's grid of 2026-11-27."""


def _intersection_guard(interval: EffectInterval, rng: np.random.Generator) -> TiltedSteps:
    """The tilted bootstrap's steps as the product computed them on 2026-11-27: its grid
    from the same start, the p-value the larger of them and the least-favourable test's."""
    assert interval.distances is not None
    alone = replace(interval.boundary, guard=NO_GUARD)
    start = max(
        least_favourable_bound(alone, GUARD_START), least_favourable_bound(alone, 0.05) / 10
    )
    return tilted_steps(
        interval.distances, interval.k_a, start, interval.n_bootstrap, rng, **OLD_GRID
    )


def _p_values(
    interval: EffectInterval, old_guard: TiltedSteps, margin: float
) -> tuple[float, float, float, float]:
    """Per method (``METHODS``) the p-value of ``theta >= margin``."""
    above = int(np.count_nonzero(interval.bootstrap >= margin))
    alone = least_favourable_p_value(interval.boundary, margin)
    return (
        equivalence_p_value(interval, margin),
        max(alone, guard_p_value(old_guard, margin)),
        alone,
        (1 + above) / (1 + interval.n_bootstrap),
    )


def _rate(hits: int, n: int) -> str:
    ci = binomtest(hits, n).proportion_ci(0.95, method="exact")
    return f"{hits / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def _at_the_margin(name: str, k: int, k_b: int, sims: int, rng: np.random.Generator) -> np.ndarray:
    """Per method, the audits of ``name`` declared equivalent with the margin at its effect
    (``k`` original and ``k_b`` perturbed outputs)."""
    s, margin = scenario(name), true_effect(name)
    hits = np.zeros(len(METHODS), dtype=int)
    for _ in range(sims):
        original, perturbed = s.draw(rng, k)
        if k_b != k:
            perturbed = s.draw(rng, k_b)[1]
        interval = effect_interval(original, perturbed, n_bootstrap=N_BOOTSTRAP, rng=rng)
        old_guard = _intersection_guard(interval, rng)
        hits += np.array(_p_values(interval, old_guard, margin)) <= ALPHA
    return hits


def _null_audits(k: int, sims: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per audit and method: declared equivalent at every fixed margin (sims, methods,
    margins), and at the calibrated margin (sims, methods)."""
    null = scenario("null")
    fixed = np.empty((sims, len(METHODS), len(MARGINS)), dtype=bool)
    calibrated = np.empty((sims, len(METHODS)), dtype=bool)
    for i in range(sims):
        original, perturbed = null.draw(rng, k)
        interval = effect_interval(original, perturbed, n_bootstrap=N_BOOTSTRAP, rng=rng)
        old_guard = _intersection_guard(interval, rng)
        fixed[i] = np.array([_p_values(interval, old_guard, m) for m in MARGINS]).T <= ALPHA
        copies = [original, *(null.draw(rng, k)[0] for _ in range(REPLICATES))]
        margin = calibrate_margin(list(itertools.combinations(copies, 2)), quantile=QUANTILE)
        calibrated[i] = np.array(_p_values(interval, old_guard, margin.margin)) <= ALPHA
    return fixed, calibrated


def _smallest_k(ks: tuple[int, ...], shares: np.ndarray) -> str:
    """The first k of the grid whose share reaches the target power."""
    return next(
        (str(k) for k, s in zip(ks, shares, strict=True) if s >= TARGET_POWER), f">{ks[-1]}"
    )


def main(
    quick: bool = False,
    sims: int | None = None,
    ks: tuple[int, ...] | None = None,
    shapes: tuple[str, ...] = AT_MARGIN,
    write: bool = True,
) -> None:
    sims = sims or (60 if quick else 400)
    ks = ks or ((20, 40) if quick else (10, 20, 40, 80, 160))
    root = np.random.SeedSequence(ROOT_SEED)
    start = time.perf_counter()
    result_file = ResultFile("equivalence", quick)
    result_file.note(
        f"equivalence: {sims} audits per cell, k in {ks}, alpha={ALPHA}, B={N_BOOTSTRAP}; "
        f"at the margin: {', '.join(shapes)}"
    )
    cells = [(name, k, k) for name in shapes for k in ks]
    cells += [cell for cell in UNEQUAL if cell[0] in shapes]
    rows = []
    for (name, k, k_b), seed in zip(cells, root.spawn(len(cells)), strict=True):
        hits = _at_the_margin(name, k, k_b, sims, np.random.default_rng(seed))
        size = str(k) if k == k_b else f"{k}/{k_b}"
        rows.append([name, f"{true_effect(name):.4f}", size, *(_rate(int(h), sims) for h in hits)])
        print(*rows[-1], sep=" | ", flush=True)
    if rows:
        result_file.table(
            f"effect exactly at the margin: share declared equivalent (nominal <= {ALPHA})",
            ["scenario", "margin = effect", "k", *METHODS],
            rows,
        )
    calibrated_rows, fixed_rows = [], []
    shares = np.zeros((len(ks), len(METHODS), len(MARGINS)))
    for i, (k, seed) in enumerate(zip(ks, root.spawn(len(ks)), strict=True)):
        fixed, calibrated = _null_audits(k, sims // 2, np.random.default_rng(seed))
        calibrated_rows.append([k, *(_rate(int(h), sims // 2) for h in calibrated.sum(0))])
        shares[i] = fixed.mean(0)
        pair = [
            " / ".join(f"{share:.2f}" for share in shares[i, :, m]) for m in range(len(MARGINS))
        ]
        fixed_rows.append([k, *pair])
    result_file.table(
        f"no effect, margin calibrated on {REPLICATES} replicate arms (q={QUANTILE}, "
        f"{REPLICATES * (REPLICATES + 1) // 2} pairs at the same k): share declared equivalent",
        ["k", *METHODS],
        calibrated_rows,
    )
    needed = [
        " / ".join(_smallest_k(ks, shares[:, j, m]) for j in range(len(METHODS)))
        for m in range(len(MARGINS))
    ]
    result_file.table(
        "no effect, fixed margins: share declared equivalent (" + " / ".join(METHODS) + ")",
        ["k", *(f"margin {m:g}" for m in MARGINS)],
        [*fixed_rows, [f"k for power >= {TARGET_POWER}", *needed]],
    )
    print(f"\n{time.perf_counter() - start:.0f} s")
    if write:
        result_file.write()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sims", type=int, help="audits per cell")
    parser.add_argument("--ks", type=int, nargs="+", help="outputs per arm")
    parser.add_argument(
        "--shapes", nargs="*", choices=AT_MARGIN, default=AT_MARGIN, help="scenarios at the margin"
    )
    args = parser.parse_args()
    ks = tuple(args.ks) if args.ks else None
    main(quick=args.quick, sims=args.sims, ks=ks, shapes=tuple(args.shapes), write=False)
