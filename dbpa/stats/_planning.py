"""How many outputs per arm a perturbation needs: the target power, simulated from a pilot pair.

The pilot arms (a few outputs of the original and of the perturbed prompt) are
resampled at candidate arm sizes k by ``simulate_power``; the family's correction
enters through the per-test level a lone change must reach.

Draws are always *without* replacement, so only k up to the smaller pilot can be
simulated: drawn with replacement, each arm repeats rows of its own pilot, and the test
then tells the two finite pilots apart even when their populations are equal (with a
pilot of 10 per arm and no effect at all, "power" reached 0.8 at k=19). Without
replacement every simulated arm is an i.i.d. sample of its population, so each simulated
rejection has the right probability; the simulations share one pilot, so estimates near
the pilot's size are noisy. A target not reached within the pilot is reported as such
(a larger pilot is the honest answer), not extrapolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._multiplicity import CORRECTIONS, lone_threshold, min_permutations
from ._omega import OMEGAS
from ._power import PowerResult, simulate_power
from ._similarity import pool_arms
from ._validation import RngLike, as_arm_sizes, as_positive_int, as_probability, as_rng, choose

SHARE_STEPS = 5
"""Halvings of the share interval (0, 1] when searching the detectable share: +-1/32."""


@dataclass(frozen=True)
class SamplePlan:
    """The smallest k per arm that reaches a target power, and what a given k can detect."""

    k: int | None
    """Recommended outputs per arm: the smallest k found with simulated power >= ``power``
    (a bisection between the last candidate below and the first at or above it); None when
    even the largest candidate falls short."""
    power: float
    """Target power."""
    level: float
    """Per-test level of the simulations: the raw p-value a lone change must reach in the
    family, alpha/m for Bonferroni, Holm and BH, alpha/(m H_m) for BY. Holm and BH reject
    more easily when several perturbations change, so k is conservative for them
    (``plan_family`` simulates the whole family under its correction)."""
    alpha: float
    m: int
    """Number of tests in the family."""
    correction: str
    omega: str
    n_permutations: int
    """B of every simulated test (use the audit's)."""
    curve: tuple[PowerResult, ...]
    """Simulated power at every k tried (candidates up to the first hit, then the
    bisection), in increasing k."""
    pilot_limit: int
    """Largest k that can be simulated: the smaller pilot (draws are without replacement);
    candidates above it are not tried."""
    detectable_at: int | None
    """Arm size at which the detectable share was estimated (None: not asked, or more
    than the pilot allows: the share search draws up to 2k rows of pilot a)."""
    detectable_share: float | None
    """Minimum detectable effect at ``detectable_at``: the smallest share s of perturbed
    outputs that change as the pilot's perturbed outputs differ from its originals (each
    perturbed output drawn from pilot b with probability s, else from pilot a) that the
    test detects with the target power, to within 1/32 above; None when not asked or when
    even s = 1 (the pilot's full effect) falls short."""
    share_curve: tuple[PowerResult, ...]
    """Simulated power at ``detectable_at`` for every share tried, in increasing share."""


def plan_k(
    pilot_a: ArrayLike,
    pilot_b: ArrayLike,
    *,
    omega: str = "auto",
    alpha: float = 0.05,
    m: int = 1,
    correction: str = "holm",
    power: float = 0.8,
    candidates: Sequence[int] = (5, 10, 20, 40, 80),
    n_simulations: int = 200,
    n_permutations: int = 1999,
    detectable_at: int | None = None,
    similarity: str = "cosine",
    rng: RngLike = None,
    **omega_options: Any,
) -> SamplePlan:
    """Smallest k per arm with simulated power >= ``power`` for one pilot pair, as a lone
    change of its family (``plan_family`` plans a whole family, as the audit runs it).

    The candidates are simulated in increasing order until one reaches the target
    (larger arms cost more to simulate); k is then bisected between it and the
    candidate before it, each step ``n_simulations`` audits of ``simulate_power`` at the
    family's per-test level (see ``SamplePlan.level``). With ``detectable_at`` (e.g. the
    configured k) the minimum detectable share of changed outputs at that k is bisected
    too. Each estimate has ``simulate_power``'s Clopper-Pearson interval in ``curve``.
    """
    pool_arms(pilot_a, pilot_b)
    spec = OMEGAS[choose(omega, "omega", OMEGAS)]
    spec.resolve_options(omega_options)
    alpha = as_probability(alpha, "alpha")
    m = as_positive_int(m, "m")
    correction = choose(correction, "correction", CORRECTIONS)
    power = as_probability(power, "power")
    candidate_ks = as_arm_sizes(candidates, "candidates")
    n_sims = as_positive_int(n_simulations, "n_simulations")
    n_perm = as_positive_int(n_permutations, "n_permutations")
    if detectable_at is not None:
        detectable_at = as_positive_int(detectable_at, "detectable_at", minimum=2)
    level = lone_threshold(m, alpha, correction)
    if 1.0 / (n_perm + 1) > level:
        raise ValueError(
            f"n_permutations: the smallest p-value 1/(B+1) = {1 / (n_perm + 1):.3g} cannot reach "
            f"the per-test level {level:.3g} ({correction}, m={m}, alpha={alpha}); "
            f"use B >= {min_permutations(m, alpha, correction)}"
        )
    pilot_limit = min(len(np.asarray(pilot_a)), len(np.asarray(pilot_b)))
    grid = [c for c in candidate_ks if c <= pilot_limit]
    if not grid:
        raise ValueError(
            f"candidates: none is at most the smaller pilot ({pilot_limit} outputs); arms are "
            "drawn without replacement, so a pilot must be at least as large as the k it tests"
        )
    if detectable_at is not None and (
        2 * detectable_at > len(np.asarray(pilot_a)) or detectable_at > pilot_limit
    ):
        detectable_at = None  # not without replacement: see SamplePlan.detectable_at
    gen = as_rng(rng)

    def simulate(k: int, share: float = 1.0) -> PowerResult:
        return simulate_power(
            pilot_a,
            pilot_b,
            k=k,
            alpha=level,
            n_simulations=n_sims,
            n_permutations=n_perm,
            similarity=similarity,
            omega=omega,
            share=share,
            replace=False,
            rng=gen,
            **omega_options,
        )

    curve: dict[int, PowerResult] = {}

    def reaches(k: int) -> bool:
        if k not in curve:
            curve[k] = simulate(k)
        return curve[k].power >= power

    k = next((c for c in grid if reaches(c)), None)
    if k is not None and k != grid[0]:
        below = grid[grid.index(k) - 1]
        while k - below > 1:
            mid = (below + k) // 2
            below, k = (below, mid) if reaches(mid) else (mid, k)

    share_curve: dict[float, PowerResult] = {}
    detectable_share: float | None = None
    if detectable_at is not None:
        share_curve[1.0] = curve.get(detectable_at) or simulate(detectable_at)
        if share_curve[1.0].power >= power:
            low, high = 0.0, 1.0
            for _ in range(SHARE_STEPS):
                share = (low + high) / 2
                share_curve[share] = simulate(detectable_at, share)
                low, high = (low, share) if share_curve[share].power >= power else (share, high)
            detectable_share = high

    return SamplePlan(
        k=k,
        power=power,
        level=level,
        alpha=alpha,
        m=m,
        correction=correction,
        omega=omega,
        n_permutations=n_perm,
        curve=tuple(curve[c] for c in sorted(curve)),
        pilot_limit=pilot_limit,
        detectable_at=detectable_at,
        detectable_share=detectable_share,
        share_curve=tuple(share_curve[s] for s in sorted(share_curve)),
    )
