"""The planner of k (``dbpa plan``): how stable its k is across pilots, and what B costs.

``stability``: a pilot run of one original and two perturbations with the same effect, drawn
from the same populations, at pilot k = 20, 30, 40; a Holm family of 8 at alpha = 0.05 (the
six perturbations the pilot lacks at p = 1), energy_l2, target power 0.8, 100 simulated
audits per k. The two perturbations' recommended k should agree within 30% (the larger at
most 1.3 times the smaller; one "not reached" and one number disagree). Planners:

* old: the planner before 2026-11-27 (``sizing`` then): each pair alone by ``plan_k`` at the
  lone level alpha/m, B = max(199, m/alpha - 1) = 199, candidates 5, 10, 20, 40 up to the
  pilot and bisection;
* new: ``plan_family``, the whole family at the audit's B = 1999;
* new, other seed: the new planner on the same pilots with another seed (its Monte Carlo
  noise alone).

The truth is the rejection rate in 1,000 fresh audits of the family per k. "pilot effects
apart" is the share of pilot runs whose two plug-in energy distances (the effect each pilot
shows) differ by more than 30%: k needed scales about as 1 / effect, so that share is what
no planner can remove from a pilot of that size.

``resolution``: the power of one test at the lone level alpha/8 as a function of B, from the
exact rejection probability ``P(Binomial(B, p) <= level (B+1) - 1)`` at each audit's p-value
(taken from B = 20,000 splits), 300 audits per k. ``dbpa plan`` simulates at the audit's B and
names the B that would resolve the level when 1/(B+1) > level/10.

The grid of ``plan_family`` (6 geometric sizes from 5 to the pilot's, refined around the
crossings down to a quarter of k) was chosen on 180 such curves with every integer k
simulated (a one-off script, not part of the suite): its k was within 1 output of the
all-integer k with about 7 sizes instead of 16-26, where a probit curve in sqrt(k) put the two
equal perturbations apart as often or more often.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import binom

from benchmarks._results import ResultFile
from benchmarks._synthetic import AnswerSpace, Arm, answer_space, sample
from dbpa.stats import correct, permutation_test, plan_family, plan_k

M, ALPHA, POWER, OMEGA = 8, 0.05, 0.8, "energy_l2"
LEVEL = ALPHA / M
B = 1999
OLD_B = 199
SIMULATIONS = 100
COMPACT = Arm(weights=(0.6, 0.4), detail=0.3, noise=0.15)
SHARES = Arm(weights=(0.8, 0.2))


@dataclass(frozen=True)
class Scenario:
    name: str
    original: Arm
    perturbed: Arm
    truth_ks: tuple[int, ...]


SCENARIOS = (
    Scenario(
        "drift 0.45 (every answer)",
        COMPACT,
        replace(COMPACT, drift=0.45),
        (10, 11, 12, 13, 14, 15, 16),
    ),
    Scenario(
        "shares 0.8/0.2 -> 0.2/0.8",
        SHARES,
        replace(SHARES, weights=(0.2, 0.8)),
        (14, 15, 16, 17, 18, 19, 20, 22),
    ),
)


def _differ(x: int | None, y: int | None) -> bool:
    if x is None or y is None:
        return (x is None) != (y is None)
    return max(x, y) > 1.3 * min(x, y)


def _energy(x: np.ndarray, y: np.ndarray) -> float:
    def mean_distance(u: np.ndarray, v: np.ndarray, same: bool) -> float:
        d = np.sqrt(np.clip(2.0 - 2.0 * u @ v.T, 0.0, None))
        return float(d.sum() / (len(u) * (len(u) - 1))) if same else float(d.mean())

    return 2 * mean_distance(x, y, False) - mean_distance(x, x, True) - mean_distance(y, y, True)


def _truth(space: AnswerSpace, scenario: Scenario, audits: int) -> tuple[list[float], int | None]:
    """Power of one of the two changes in fresh audits of the family, per k; the first k >= 0.8."""
    rng = np.random.default_rng(11)
    rates = []
    for k in scenario.truth_ks:
        hits = 0
        for _ in range(audits):
            a = sample(rng, space, scenario.original, k)
            p = np.ones(M)
            for j in range(2):
                b = sample(rng, space, scenario.perturbed, k)
                p[j] = permutation_test(a, b, omega=OMEGA, n_permutations=B, rng=rng).p_value
            hits += int(correct(p, method="holm", alpha=ALPHA).reject[:2].sum())
        rates.append(hits / (2 * audits))
    reached = [k for k, r in zip(scenario.truth_ks, rates, strict=True) if r >= POWER]
    return rates, reached[0] if reached else None


def stability(quick: bool, result_file: ResultFile) -> None:
    seeds = 4 if quick else 25
    sizes = (20,) if quick else (20, 30, 40)
    space = answer_space(np.random.default_rng(7))
    rows = []
    for scenario in SCENARIOS:
        started = time.perf_counter()
        rates, true_k = _truth(space, scenario, 100 if quick else 1000)
        result_file.note(
            f"{scenario.name}: fresh family power "
            + ", ".join(f"k={k}: {r:.3f}" for k, r in zip(scenario.truth_ks, rates, strict=True))
            + f" ({time.perf_counter() - started:.0f} s)"
        )
        for pilot_k in sizes:
            old, new, other, apart = [], [], [], 0
            started = time.perf_counter()
            candidates = sorted({c for c in (5, 10, 20, 40) if c < pilot_k} | {pilot_k})
            for seed in range(seeds):
                rng = np.random.default_rng(1000 + seed)
                a = sample(rng, space, scenario.original, pilot_k)
                pilots = [sample(rng, space, scenario.perturbed, pilot_k) for _ in range(2)]
                effects = [_energy(a, b) for b in pilots]
                apart += max(effects) > 1.3 * min(effects)
                old.append(
                    tuple(
                        plan_k(
                            a,
                            b,
                            omega=OMEGA,
                            m=M,
                            candidates=candidates,
                            n_simulations=SIMULATIONS,
                            n_permutations=OLD_B,
                            rng=seed,
                        ).k
                        for b in pilots
                    )
                )
                for found, plan_seed in ((new, seed), (other, seed + 500)):
                    plan = plan_family(
                        a,
                        pilots,
                        m=M,
                        omega=OMEGA,
                        n_simulations=SIMULATIONS,
                        n_permutations=B,
                        rng=plan_seed,
                    )
                    found.append(tuple(p.k for p in plan.perturbations))
            seconds = time.perf_counter() - started

            def summary(ks: list[tuple[int | None, ...]]) -> str:
                values = [k for pair in ks for k in pair if k is not None]
                missing = sum(k is None for pair in ks for k in pair)
                differ = sum(_differ(*pair) for pair in ks)
                mean = f"{np.mean(values):.1f}" if values else "-"
                return f"{differ}/{len(ks)} (mean k {mean}, {missing} none)"

            same_pilot = sum(_differ(x[0], y[0]) for x, y in zip(new, other, strict=True))
            rows.append(
                [
                    scenario.name,
                    pilot_k,
                    true_k if true_k is not None else "-",
                    summary(old),
                    summary(new),
                    f"{same_pilot}/{seeds}",
                    f"{apart}/{seeds}",
                    f"{seconds:.0f}",
                ]
            )
            print(f"  pilot k={pilot_k}: old {old}\n    new {new}\n    other seed {other}")
    result_file.table(
        "k of two equal changes, > 30% apart (Holm, m=8, energy_l2, power 0.8)",
        [
            "scenario",
            "pilot k",
            "true k",
            "old planner",
            "new planner",
            "new, other seed",
            "pilot effects apart",
            "s",
        ],
        rows,
    )


def resolution(quick: bool, result_file: ResultFile) -> None:
    audits = 60 if quick else 300
    space = answer_space(np.random.default_rng(7))
    budgets = (159, 199, 399, 799, 1599, 3199, 7999)
    for scenario in SCENARIOS:
        rng = np.random.default_rng(5)
        ks = scenario.truth_ks[::2]
        power = np.zeros((len(ks), len(budgets) + 1))
        for i, k in enumerate(ks):
            p = np.array(
                [
                    permutation_test(
                        sample(rng, space, scenario.original, k),
                        sample(rng, space, scenario.perturbed, k),
                        omega=OMEGA,
                        n_permutations=20_000,
                        rng=rng,
                    ).p_value
                    for _ in range(audits)
                ]
            )
            for j, b in enumerate(budgets):
                below = np.floor(LEVEL * (b + 1) + 1e-9) - 1  # reject when count <= below
                power[i, j] = np.mean(binom.cdf(below, b, p)) if below >= 0 else 0.0
            power[i, -1] = np.mean(p <= LEVEL)
        result_file.table(
            f"{scenario.name}: power of one test at alpha/8 = {LEVEL} by B "
            "(step 1/(B+1) over the level)",
            ["k", *(f"B={b} ({1 / (b + 1) / LEVEL:.2f})" for b in budgets), "B=20,000"],
            [[k, *(f"{v:.3f}" for v in row)] for k, row in zip(ks, power, strict=True)],
        )


def main(quick: bool = False) -> None:
    result_file = ResultFile("plan", quick)
    resolution(quick, result_file)
    stability(quick, result_file)
    result_file.write()


if __name__ == "__main__":
    main()
