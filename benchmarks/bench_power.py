"""Power of every omega on synthetic alternatives at equal k: which test needs the fewest outputs.

Each simulated audit draws k original and k perturbed answer embeddings (d=384, a new
random embedding geometry per audit), runs ``dbpa.permutation_test`` with every omega on
the same data and rejects when p <= alpha. B=199 makes the test exact at alpha=0.05
(and at alpha/2 for the two-test Bonferroni combination). Rejection rates come with 95%
Clopper-Pearson intervals; "samples needed" is the smallest k in the grid with power
>= 0.8. The last table sets ``auto`` against the best single omega of each cell (target:
within 0.10).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import binomtest

import dbpa
from benchmarks._results import ResultFile
from benchmarks._synthetic import Arm, answer_space, sample
from dbpa.stats import OMEGAS

ALPHA = 0.05
TARGET_POWER = 0.8
B = 199
ROOT_SEED = 20251121
TYPICAL = Arm(weights=(0.4, 0.3, 0.2, 0.1))
"""Four answer types; cosines in about [0.3, 0.9]."""
COMPACT = Arm(weights=(0.6, 0.4), detail=0.3, noise=0.15)
"""Two tight answer types; cosines in about [0.4, 0.95]."""
DIFFUSE = Arm(weights=(1,) * 8, common=0.55, type_scale=0.7, detail=0.5)
"""Eight equally likely answer types; most pairs differ in type, cosines in about [0.1, 0.85]."""


@dataclass(frozen=True)
class Scenario:
    """The two arms of one simulated audit."""

    name: str
    original: Arm
    perturbed: Arm


SCENARIOS = (
    Scenario("null (same distribution)", TYPICAL, TYPICAL),
    Scenario("mixture: types reweighted", TYPICAL, replace(TYPICAL, weights=(0.1, 0.3, 0.2, 0.4))),
    Scenario("mixture: new answer type", Arm(weights=(0.5, 0.5)), Arm(weights=(0.35, 0.35, 0.3))),
    Scenario("shift, compact original", COMPACT, replace(COMPACT, drift=0.2)),
    Scenario("shift, diffuse original", DIFFUSE, replace(DIFFUSE, drift=0.25)),
    Scenario("spread: perturbed tighter", TYPICAL, replace(TYPICAL, detail=0.3)),
)


@dataclass(frozen=True)
class Test:
    """One test: an omega with its options, under a display label."""

    label: str
    omega: str
    options: dict[str, Any]


TESTS = (
    *(Test(name, name, {}) for name in OMEGAS),
    Test("jsd range=(-1,1)", "jsd", {"range": (-1.0, 1.0)}),
)
COMBINED = ("jsd", "energy_l2")
"""Bonferroni pair: reject when either p <= alpha/2 (valid under any dependence)."""
COMBINED_LABEL = f"{COMBINED[0]} + {COMBINED[1]} (Bonferroni)"
SINGLE = tuple(name for name, o in OMEGAS.items() if o.level != "combined")
"""The single omegas auto is compared with (default options)."""
AUTO_GAP = 0.10


@dataclass(frozen=True)
class Config:
    """Sizes of one run."""

    n_audits: int
    k_grid: tuple[int, ...]


FULL = Config(n_audits=200, k_grid=(10, 20, 30, 40, 60))
QUICK = Config(n_audits=40, k_grid=(10, 20, 40))


def audit_p_values(rng: np.random.Generator, scenario: Scenario, k: int) -> NDArray[np.float64]:
    """p-value of every test on one simulated audit (all tests see the same data)."""
    space = answer_space(rng)
    a = sample(rng, space, scenario.original, k)
    b = sample(rng, space, scenario.perturbed, k)
    return np.array(
        [
            dbpa.permutation_test(
                a, b, omega=t.omega, n_permutations=B, rng=rng, **t.options
            ).p_value
            for t in TESTS
        ]
    )


def rejections(scenario_index: int, k: int, n_audits: int) -> dict[str, int]:
    """Number of audits rejected at ALPHA, per test label (and the Bonferroni pair)."""
    rng = np.random.default_rng([ROOT_SEED, scenario_index, k])
    scenario = SCENARIOS[scenario_index]
    p = np.array([audit_p_values(rng, scenario, k) for _ in range(n_audits)])
    counts = {t.label: int(np.count_nonzero(p[:, i] <= ALPHA)) for i, t in enumerate(TESTS)}
    labels = [t.label for t in TESTS]
    pair = p[:, [labels.index(name) for name in COMBINED]]
    counts[COMBINED_LABEL] = int(np.count_nonzero(pair.min(axis=1) <= ALPHA / 2))
    return counts


def geometry_row(index: int, n: int = 500) -> list[object]:
    """Mean cosines within and across the arms of a scenario, and their centroid distance."""
    rng = np.random.default_rng([ROOT_SEED, index])
    scenario = SCENARIOS[index]
    space = answer_space(rng)
    a = sample(rng, space, scenario.original, n)
    b = sample(rng, space, scenario.perturbed, n)
    off = ~np.eye(n, dtype=bool)
    gap = float(np.linalg.norm(a.mean(axis=0) - b.mean(axis=0)))
    return [
        scenario.name,
        float((a @ a.T)[off].mean()),
        float((a @ b.T).mean()),
        float((b @ b.T)[off].mean()),
        gap,
    ]


def rate_cell(count: int, n: int) -> str:
    """Rejection rate with its 95% Clopper-Pearson interval."""
    ci = binomtest(count, n).proportion_ci(confidence_level=0.95)
    return f"{count / n:.2f} [{ci.low:.2f}, {ci.high:.2f}]"


def samples_needed(counts: dict[int, int], n: int, k_grid: tuple[int, ...]) -> str:
    """Smallest k in the grid with power >= TARGET_POWER."""
    reached = [k for k in k_grid if counts[k] / n >= TARGET_POWER]
    return str(min(reached)) if reached else f"> {max(k_grid)}"


def auto_rows(by_scenario: list[dict[int, dict[str, int]]], cfg: Config) -> list[list[object]]:
    """Per alternative and k: the best single omega, its rate, auto's rate and the gap."""
    rows: list[list[object]] = []
    for scenario, by_k in zip(SCENARIOS[1:], by_scenario[1:], strict=True):
        for k in cfg.k_grid:
            counts = by_k[k]
            best = max(SINGLE, key=lambda name: counts[name])
            gap = counts[best] - counts["auto"]  # in audits: exact comparison
            rows.append(
                [
                    scenario.name,
                    k,
                    best,
                    f"{counts[best] / cfg.n_audits:.3f}",
                    f"{counts['auto'] / cfg.n_audits:.3f}",
                    f"{gap / cfg.n_audits:+.3f}",
                    "ok" if gap <= round(AUTO_GAP * cfg.n_audits) else "MISS",
                ]
            )
    return rows


def main(quick: bool = False) -> None:
    cfg = QUICK if quick else FULL
    result_file = ResultFile("power", quick)
    result_file.note(
        f"{cfg.n_audits} audits per cell, B={B}, alpha={ALPHA}, d=384; "
        f"cells: rejection rate [95% Clopper-Pearson]"
    )
    result_file.table(
        "Scenario geometry (means over 500 answers per arm): P0 = within original, P1 = across",
        ["scenario", "mean P0", "mean P1", "within perturbed", "|centroid gap|"],
        [geometry_row(i) for i in range(len(SCENARIOS))],
    )
    labels = [t.label for t in TESTS] + [COMBINED_LABEL]
    needed: dict[str, list[str]] = {label: [] for label in labels}
    start = time.perf_counter()
    by_scenario = []
    for index, scenario in enumerate(SCENARIOS):
        by_k = {k: rejections(index, k, cfg.n_audits) for k in cfg.k_grid}
        by_scenario.append(by_k)
        result_file.table(
            f"{scenario.name}: rejection rate at alpha={ALPHA}",
            ["test", *(f"k={k}" for k in cfg.k_grid)],
            [
                [label, *(rate_cell(by_k[k][label], cfg.n_audits) for k in cfg.k_grid)]
                for label in labels
            ],
        )
        if index:
            for label in labels:
                counts = {k: by_k[k][label] for k in cfg.k_grid}
                needed[label].append(samples_needed(counts, cfg.n_audits, cfg.k_grid))
    result_file.table(
        f"Samples needed: smallest k per arm in {list(cfg.k_grid)} with power >= {TARGET_POWER}",
        ["test", *(s.name for s in SCENARIOS[1:])],
        [[label, *needed[label]] for label in labels],
    )
    result_file.table(
        f"auto against the best single omega of each cell (target: gap <= {AUTO_GAP})",
        ["scenario", "k", "best single", "its rate", "auto", "gap", f"<= {AUTO_GAP}"],
        auto_rows(by_scenario, cfg),
    )
    result_file.note(f"bench_power: {time.perf_counter() - start:.0f} s")
    result_file.write()
