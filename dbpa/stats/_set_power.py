"""How many prompts, and outputs per prompt, the pooled test over a set of prompts needs: its
power simulated from a pilot set.

A pilot set is, per prompt, the original arm's and the perturbed arm's embeddings (a few
outputs each). A simulated audit of n prompts at k outputs per arm draws n of the pilot's
prompts and, for each, k rows of each of its two arms, all *without* replacement, runs
``prompt_set_test`` on them at the audit's B, omega and combination, and counts a rejection
where p <= the level a lone change must pass in the family of m perturbations
(``lone_threshold``: alpha/m under Bonferroni, Holm and BH, as single-prompt planning with
``plan_k`` does; Holm and BH reject more easily when several perturbations change, so the
sizes are conservative for them).

Why prompts are drawn without replacement too: a prompt drawn twice would enter the pooled
test as two strata built from one finite pilot, and its pilot's chance imbalance between the
arms would count once per copy; the test then sees a change where there is none. Measured
(2026-11-27) on no-change pilots of 5 prompts x 8 outputs per arm (a new pilot for each
audit; B = 199, ``auto``, alpha 0.05), 600 audits of 20 prompts drawn with replacement, each
copy's rows drawn anew: the rejection rate was 0.33 at k = 8 (every copy its whole pilot)
and 0.12 at k = 4. Without replacement every simulated set is a subset of the pilot's
prompts, each arm a subsample of its i.i.d. pilot (so an i.i.d. sample of its population),
and each simulated rejection has the right probability; n is therefore at most the pilot's
prompts and k at most its smallest arm. What lies beyond the pilot is not extrapolated: a
larger pilot answers it. At the pilot's own size every simulated audit is the whole pilot,
so the power there is the pilot's own outcome (0 or 1 up to the permutations' noise), not
an estimate.

Every simulated audit keeps its order of the pilot's prompts, of each arm's rows and its test
seed at every (n, k) (its set at (n, k) is the first n prompts of its order, each arm the
first k rows: common random numbers), so a curve in n or in k does not step with Monte Carlo
noise; ``plan_set_power`` makes each curve non-decreasing (isotonic regression) and reads
where its interpolation reaches the target.

Cost: one ``prompt_set_test`` per simulated audit and point, e.g. 0.08 s at 20 prompts x
k = 8 with ``auto`` at B = 2000 (0.03 s with ``energy_l2``; measured 2026-11-27, load 2.6 on
two cores), so 50 simulations of 10 points cost about 40 s at that size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._family_plan import _crossing, _isotonic, fine_permutations
from ._multiplicity import CORRECTIONS, lone_threshold, min_permutations
from ._omega import OMEGAS
from ._prompt_sets import COMBINATIONS, _arms_iv, prompt_set_test
from ._similarity import SIMILARITIES, _unit_rows
from ._validation import (
    RngLike,
    as_positive_int,
    as_probability,
    as_rng,
    choose,
)

Matrix = NDArray[np.float64]

GRID_POINTS = 5
"""Points of each curve's default grid: geometric from 2 outputs (1 prompt) to the pilot's."""


@dataclass(frozen=True)
class SetPowerPoint:
    """The simulated power of the pooled test at n prompts and k outputs per arm."""

    n_prompts: int
    k: int
    """Outputs per arm of every prompt."""
    power: float
    """Share of simulated audits whose pooled p-value was at most ``SetPower.level``."""
    ci_low: float
    """Lower end of the Clopper-Pearson interval for the power (at ``SetPower.confidence``)."""
    ci_high: float
    rejections: int
    n_simulations: int


@dataclass(frozen=True)
class SetPower:
    """The pooled test's simulated power at every (n prompts, k) asked."""

    points: tuple[SetPowerPoint, ...]
    """One per point asked, in the order asked."""
    level: float
    """The raw p-value a lone change must pass among the m perturbations (``lone_threshold``):
    a simulated audit rejects where the pooled p-value is at most this."""
    alpha: float
    m: int
    correction: str
    omega: str
    combination: str | None
    """How the prompts were combined; None: ``prompt_set_test``'s default."""
    n_permutations: int
    """B of every simulated pooled test (use the audit's)."""
    n_simulations: int
    """Simulated audits per point (the same audits at every point: common random numbers)."""
    confidence: float
    pilot_prompts: int
    """Prompts of the pilot: the largest n that can be simulated (drawn without replacement)."""
    pilot_k: int
    """The pilot's smallest arm: the largest k that can be simulated."""
    resolution_permutations: int | None
    """When 1/(B+1) > level / 10: the smallest B whose p-values resolve the level finely
    (``fine_permutations``); None when B does."""

    def at(self, n_prompts: int, k: int) -> SetPowerPoint:
        """The point simulated at (n_prompts, k) (KeyError if it was not asked)."""
        for point in self.points:
            if (point.n_prompts, point.k) == (n_prompts, k):
                return point
        raise KeyError((n_prompts, k))


@dataclass(frozen=True)
class _Args:
    originals: list[Matrix]
    perturbed: list[Matrix]
    points: list[tuple[int, int]]
    level: float
    alpha: float
    m: int
    correction: str
    n_simulations: int
    n_permutations: int
    confidence: float
    test_options: dict[str, Any]


def _simulate_set_power_iv(
    originals: Any,
    perturbed: Any,
    points: Any,
    *,
    alpha: Any,
    m: Any,
    correction: Any,
    n_simulations: Any,
    n_permutations: Any,
    omega: Any,
    similarity: Any,
    combination: Any,
    confidence: Any,
    omega_options: dict[str, Any],
) -> _Args:
    """Check and normalize every argument, naming the bad one."""
    a_arms, b_arms = _pilot_iv(originals, perturbed)
    spec = OMEGAS[choose(omega, "omega", OMEGAS)]
    spec.resolve_options(omega_options)
    choose(similarity, "similarity", SIMILARITIES)
    if similarity != "cosine" and spec.level == "embedding":
        raise ValueError(
            f"similarity: omega {spec.name!r} is computed on the embeddings with its own "
            f"distance ({spec.matrix}); similarity {similarity!r} does not apply"
        )
    parts = spec.components or (spec.name,)
    if (similarity == "cosine" and spec.level != "embedding") or "energy_cosine" in parts:
        for name, items in (("originals", a_arms), ("perturbed", b_arms)):
            for i, x in enumerate(items):
                _unit_rows(x, f"{name}[{i}]")
    if combination is not None:
        choose(combination, "combination", COMBINATIONS)
    alpha = as_probability(alpha, "alpha")
    m = as_positive_int(m, "m")
    correction = choose(correction, "correction", CORRECTIONS)
    n_sims = as_positive_int(n_simulations, "n_simulations")
    b = as_positive_int(n_permutations, "n_permutations")
    confidence = as_probability(confidence, "confidence")
    level = lone_threshold(m, alpha, correction)
    if 1.0 / (b + 1) > level:
        raise ValueError(
            f"n_permutations: the smallest p-value 1/(B+1) = {1 / (b + 1):.3g} cannot reach the "
            f"per-test level {level:.3g} ({correction}, m={m}, alpha={alpha}); "
            f"use B >= {min_permutations(m, alpha, correction)}"
        )
    pilot_prompts = len(a_arms)
    pilot_k = min(x.shape[0] for x in (*a_arms, *b_arms))
    grid = _points_iv(points, pilot_prompts, pilot_k)
    options: dict[str, Any] = {"omega": omega, "similarity": similarity, **omega_options}
    if combination is not None:
        options["combination"] = combination
    return _Args(a_arms, b_arms, grid, level, alpha, m, correction, n_sims, b, confidence, options)


def _pilot_iv(originals: Any, perturbed: Any) -> tuple[list[Matrix], list[Matrix]]:
    """The pilot set: two equally long, non-empty sequences of (k, d) arms, one d throughout."""
    return _arms_iv(originals, perturbed, "pilot prompt")


def _points_iv(points: Any, pilot_prompts: int, pilot_k: int) -> list[tuple[int, int]]:
    """Distinct (n_prompts, k) pairs within the pilot, in the order given."""
    if isinstance(points, (str, bytes, np.ndarray)) or not isinstance(points, Sequence):
        raise ValueError(f"points: expected a sequence of (n_prompts, k) pairs, got {points!r}")
    if not points:
        raise ValueError("points: needs at least one (n_prompts, k) pair")
    grid: list[tuple[int, int]] = []
    for i, point in enumerate(points):
        if isinstance(point, (str, bytes)) or not isinstance(point, Sequence) or len(point) != 2:
            raise ValueError(f"points[{i}]: expected an (n_prompts, k) pair, got {point!r}")
        n = as_positive_int(point[0], f"points[{i}] n_prompts")
        k = as_positive_int(point[1], f"points[{i}] k", minimum=2)
        if n > pilot_prompts:
            raise ValueError(
                f"points[{i}]: {n} prompts exceed the pilot's {pilot_prompts}; prompts are "
                "drawn without replacement (a prompt drawn twice counts its pilot's chance "
                "imbalance twice)"
            )
        if k > pilot_k:
            raise ValueError(
                f"points[{i}]: k = {k} exceeds the pilot's smallest arm ({pilot_k} outputs); "
                "outputs are drawn without replacement"
            )
        if (n, k) not in grid:
            grid.append((n, k))
    return grid


def simulate_set_power(
    originals: Sequence[ArrayLike],
    perturbed: Sequence[ArrayLike],
    points: Sequence[tuple[int, int]],
    *,
    alpha: float = 0.05,
    m: int = 1,
    correction: str = "holm",
    n_simulations: int = 50,
    n_permutations: int = 2000,
    omega: str = "auto",
    similarity: str = "cosine",
    combination: str | None = None,
    confidence: float = 0.95,
    rng: RngLike = None,
    **omega_options: Any,
) -> SetPower:
    """Power of the pooled test over a set of prompts at every (n prompts, k) of ``points``.

    ``originals`` and ``perturbed`` are the pilot set: one (k_i, d) array per prompt for each
    arm, as ``prompt_set_test`` takes them. Every simulated audit draws n of the pilot's
    prompts and k rows of each of their arms without replacement (module docstring: why),
    runs ``prompt_set_test`` (``omega``, ``similarity``, ``combination``, B =
    ``n_permutations``, ``omega_options``: the audit's) and rejects where p <= the level a
    lone change must pass among ``m`` perturbations under ``correction`` at ``alpha``. The
    same ``n_simulations`` audits (their orders and test seeds) serve every point. Each
    point's power carries a Clopper-Pearson interval at ``confidence``.
    """
    from scipy.stats import binomtest

    args = _simulate_set_power_iv(
        originals,
        perturbed,
        points,
        alpha=alpha,
        m=m,
        correction=correction,
        n_simulations=n_simulations,
        n_permutations=n_permutations,
        omega=omega,
        similarity=similarity,
        combination=combination,
        confidence=confidence,
        omega_options=omega_options,
    )
    gen = as_rng(rng)
    n_sims = args.n_simulations
    pilot = len(args.originals)
    prompt_orders = [gen.permutation(pilot) for _ in range(n_sims)]
    rows_a = [[gen.permutation(x.shape[0]) for x in args.originals] for _ in range(n_sims)]
    rows_b = [[gen.permutation(y.shape[0]) for y in args.perturbed] for _ in range(n_sims)]
    seeds = gen.integers(0, 2**63, size=n_sims)
    found = []
    for n, k in args.points:
        rejections = 0
        for s in range(n_sims):
            chosen = prompt_orders[s][:n]
            result = prompt_set_test(
                [args.originals[i][rows_a[s][i][:k]] for i in chosen],
                [args.perturbed[i][rows_b[s][i][:k]] for i in chosen],
                n_permutations=args.n_permutations,
                rng=int(seeds[s]),
                **args.test_options,
            )
            rejections += result.p_value <= args.level
        ci = binomtest(rejections, n_sims).proportion_ci(confidence_level=args.confidence)
        found.append(
            SetPowerPoint(
                n, k, rejections / n_sims, float(ci.low), float(ci.high), rejections, n_sims
            )
        )
    fine = fine_permutations(args.level)
    return SetPower(
        points=tuple(found),
        level=args.level,
        alpha=args.alpha,
        m=args.m,
        correction=args.correction,
        omega=omega,
        combination=combination,
        n_permutations=args.n_permutations,
        n_simulations=n_sims,
        confidence=args.confidence,
        pilot_prompts=pilot,
        pilot_k=min(x.shape[0] for x in (*args.originals, *args.perturbed)),
        resolution_permutations=fine if args.n_permutations < fine else None,
    )


SizeStatus = Literal["estimated", "not_reached", "beyond_pilot"]
"""How a size came out: estimated; not_reached (the target is not reached within the pilot);
beyond_pilot (the fixed size it is read at, the audit's prompts or k, exceeds the pilot's)."""


@dataclass(frozen=True)
class SetSizePlan:
    """What a perturbation's pooled test needs: k per prompt at the audit's prompts, and
    prompts at the audit's k."""

    k: int | None
    """Smallest k per arm at which the pooled test over ``n_prompts`` prompts reaches the
    target power (interpolated on ``k_curve`` made non-decreasing); None unless estimated."""
    k_status: SizeStatus
    prompts: int | None
    """Smallest number of prompts at which the pooled test at ``audit_k`` reaches the target
    power (interpolated on ``prompt_curve``); None unless estimated."""
    prompts_status: SizeStatus
    n_prompts: int
    """The audit's prompts (where ``k`` is read)."""
    audit_k: int
    """The audit's k (where ``prompts`` is read)."""
    power: float
    """Target power."""
    k_curve: tuple[SetPowerPoint, ...]
    """Simulated power at ``n_prompts`` prompts, increasing k (empty when beyond the pilot)."""
    k_fitted: tuple[float, ...]
    """``k_curve``'s powers made non-decreasing (isotonic regression)."""
    prompt_curve: tuple[SetPowerPoint, ...]
    """Simulated power at ``audit_k``, increasing n (empty when beyond the pilot)."""
    prompt_fitted: tuple[float, ...]
    simulation: SetPower
    """Every point simulated, with the level, B and pilot sizes."""


def plan_set_power(
    originals: Sequence[ArrayLike],
    perturbed: Sequence[ArrayLike],
    *,
    n_prompts: int,
    k: int,
    power: float = 0.8,
    alpha: float = 0.05,
    m: int = 1,
    correction: str = "holm",
    n_simulations: int = 50,
    n_permutations: int = 2000,
    omega: str = "auto",
    similarity: str = "cosine",
    combination: str | None = None,
    rng: RngLike = None,
    **omega_options: Any,
) -> SetSizePlan:
    """The k per arm the pooled test needs at the audit's ``n_prompts``, and the prompts it
    needs at the audit's ``k``, for one perturbation of a pilot set.

    Simulates (``simulate_set_power``, one set of audits for both curves) ``GRID_POINTS``
    sizes k from 2 to the pilot's smallest arm at ``n_prompts`` prompts (when the pilot has
    that many), and ``GRID_POINTS`` sizes n from 1 to the pilot's prompts at ``k`` (when the
    pilot's arms have that many outputs), each geometric, with the audit's own point; each
    curve is made non-decreasing and the size read where its interpolation reaches ``power``.
    """
    n_prompts = as_positive_int(n_prompts, "n_prompts")
    k = as_positive_int(k, "k", minimum=2)
    power = as_probability(power, "power")
    a_arms, b_arms = _pilot_iv(originals, perturbed)
    pilot_prompts = len(a_arms)
    pilot_k = min(x.shape[0] for x in (*a_arms, *b_arms))
    ks = _grid(2, pilot_k, k) if n_prompts <= pilot_prompts else []
    ns = _grid(1, pilot_prompts, n_prompts) if k <= pilot_k else []
    points = [(n_prompts, kk) for kk in ks] + [(n, k) for n in ns]
    if not points:
        raise ValueError(
            f"n_prompts: the audit's {n_prompts} prompts exceed the pilot's {pilot_prompts} and "
            f"its k = {k} exceeds the pilot's smallest arm ({pilot_k}); nothing can be simulated"
        )
    simulation = simulate_set_power(
        a_arms,
        b_arms,
        points,
        alpha=alpha,
        m=m,
        correction=correction,
        n_simulations=n_simulations,
        n_permutations=n_permutations,
        omega=omega,
        similarity=similarity,
        combination=combination,
        rng=rng,
        **omega_options,
    )
    k_curve = tuple(simulation.at(n_prompts, kk) for kk in ks)
    prompt_curve = tuple(simulation.at(n, k) for n in ns)
    k_found, k_status, k_fitted = _read(k_curve, ks, power)
    n_found, n_status, n_fitted = _read(prompt_curve, ns, power)
    return SetSizePlan(
        k=k_found,
        k_status=k_status,
        prompts=n_found,
        prompts_status=n_status,
        n_prompts=n_prompts,
        audit_k=k,
        power=power,
        k_curve=k_curve,
        k_fitted=k_fitted,
        prompt_curve=prompt_curve,
        prompt_fitted=n_fitted,
        simulation=simulation,
    )


def _grid(low: int, high: int, audit: int) -> list[int]:
    """``GRID_POINTS`` sizes from ``low`` to ``high``, geometric, with ``audit`` if within."""
    sizes = {round(x) for x in np.geomspace(low, high, GRID_POINTS)} if high > low else {high}
    if audit <= high:
        sizes.add(audit)
    return sorted(sizes)


def _read(
    curve: tuple[SetPowerPoint, ...], sizes: list[int], power: float
) -> tuple[int | None, SizeStatus, tuple[float, ...]]:
    """The smallest size reaching ``power`` on the curve made non-decreasing."""
    if not curve:
        return None, "beyond_pilot", ()
    fitted = _isotonic(np.array([p.power for p in curve]))
    found = _crossing(sizes, fitted, power)
    status: SizeStatus = "not_reached" if found is None else "estimated"
    return found, status, tuple(float(f) for f in fitted)
