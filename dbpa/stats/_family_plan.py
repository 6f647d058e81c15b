"""How many outputs per arm a family needs: its power simulated the way the audit runs it.

Each simulated audit draws the shared original arm once from the original's pilot and
every perturbed arm from its own pilot (all without replacement), runs every test of the
family at the audit's B, applies the family's correction to the m p-values (tests the
pilot does not have count as p = 1) and records which were rejected. A perturbation's power
at k is its rejection rate under the correction with the whole family at k: Holm's steps
and BH's shared threshold enter as they will in the audit, where a lone change must pass
alpha/m but one among several changes passes more easily.

The estimate of the curve is kept smooth in k: every simulated audit keeps its random order
of each pilot and its test seeds at every k (its arm at k is the first k rows of that
order: common random numbers, so the curve's steps are not noise), the rejection rates are
made non-decreasing in k (isotonic regression), and k is read where the interpolated curve
reaches the target. Bisection on independent noisy points, as ``plan_k`` does, moves k by
the Monte Carlo noise of the points it happens to land on. What no number of simulations
removes is the pilot's own noise: near the pilot's size every simulated arm is nearly the
whole pilot, so the rates there say whether this pilot's arms differ, and two pilots of the
same populations can give k far apart (``benchmarks/README.md``, "plan", has the numbers).

The cost is that of the audit's B in every simulated test. Only decisions matter, so each
test stops drawing splits once its p-value is certain to exceed what the correction could
reject (``capped_p_value``, ``decisive_cap``), and Holm's tests first run only to Holm's
first step, alpha/m: a simulated audit in which no test reaches it rejects nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._multiplicity import CORRECTIONS, lone_threshold
from ._omega import OMEGAS
from ._permutation import capped_p_value
from ._planning import SHARE_STEPS
from ._power import PowerResult
from ._similarity import pool_arms
from ._validation import RngLike, as_arm_sizes, as_positive_int, as_probability, as_rng, choose

Detectable = Literal["estimated", "not_detected", "pilot_too_small", "not_asked"]

GRID_POINTS = 6
"""Arm sizes of the default grid: geometric from 5 (or the pilot, if smaller) to the pilot."""
REFINE_ROUNDS = 3
"""Rounds that add the midpoint of every crossing bracket wider than ``REFINE_WIDTH``."""
REFINE_WIDTH = 0.25
"""A bracket (k_lo, k_hi) around a crossing is refined while k_hi - k_lo > max(1, 0.25 k_hi).
On 180 simulated curves with every integer k simulated (``benchmarks/README.md``, "plan")
this grid's k was within 1 output of theirs (0.1 above on average) with about 7 arm sizes
instead of 16-26; the sizes near the pilot's, the costliest, are the ones it skips."""
RESOLUTION = 10
"""p-values resolve a level finely when their step 1/(B+1) is at most level / 10 (at coarser B
the power of a test at that level falls measurably: ``FamilyPlan.resolution_permutations``)."""


def fine_permutations(level: float) -> int:
    """Smallest B whose p-value step 1/(B+1) is at most ``level`` / ``RESOLUTION``."""
    level = as_probability(level, "level")
    return max(1, math.ceil(RESOLUTION / level - 1.0 - 1e-9))


@dataclass(frozen=True)
class PerturbationPower:
    """One perturbation's power curve within its family, and what it says."""

    k: int | None
    """Smallest k per arm at which the smoothed power reaches the target with the whole family
    at k; None when it does not within the pilot."""
    curve: tuple[PowerResult, ...]
    """Simulated rejection rate under the family's correction at every k simulated up to
    ``pilot_limit``, in increasing k (``PowerResult.alpha`` is the family's alpha)."""
    fitted: tuple[float, ...]
    """The rates made non-decreasing in k (isotonic regression), one per ``curve`` entry;
    ``k`` is where their linear interpolation reaches the target."""
    pilot_limit: int
    """Largest k simulated: the smaller of its pilot and the original's (without replacement)."""
    detectable: Detectable
    """How the minimum detectable share at ``FamilyPlan.detectable_at`` came out: estimated;
    not_detected (even every output changed as the pilot's falls short of the target there);
    pilot_too_small (the share search at k draws up to 2k rows of the original's pilot and k of
    this one, more than they hold); not_asked (no ``detectable_at``)."""
    detectable_share: float | None
    """The smallest share s of perturbed outputs changed as the pilot's (each drawn from this
    pilot with probability s, else from the original's) detected with the target power, the
    rest of the family as the pilot has it; to within 1/32 above. None unless estimated."""
    share_curve: tuple[PowerResult, ...]
    """Simulated power at ``detectable_at`` for every share tried, in increasing share."""


@dataclass(frozen=True)
class FamilyPlan:
    """The power of every perturbation of a family at the k simulated, and the k it needs."""

    perturbations: tuple[PerturbationPower, ...]
    """One per perturbed pilot, in the order given."""
    power: float
    """Target power."""
    alpha: float
    m: int
    """Tests in the family's correction (at least the perturbations given; the others count
    as p = 1 in every simulated audit)."""
    correction: str
    omega: str
    n_permutations: int
    """B of every simulated test (the audit's)."""
    n_simulations: int
    """Simulated audits at every k (the same audits at every k: common random numbers)."""
    ks: tuple[int, ...]
    """Every k simulated, increasing: the grid, then the midpoints around the crossings."""
    level: float
    """The raw p-value a lone change must pass in the family (``lone_threshold``)."""
    resolution_permutations: int | None
    """When 1/(B+1) > level / 10: the smallest B with 1/(B+1) <= level / 10. At coarser B
    whether a test passes the level depends on how far its p-value's few steps fall below it,
    and the power at a given k is lower (``benchmarks/README.md``, "plan"). None when B is
    fine."""
    detectable_at: int | None
    """Arm size of the minimum detectable shares (None: not asked)."""


def plan_family(
    original: ArrayLike,
    perturbed: Sequence[ArrayLike],
    *,
    m: int | None = None,
    omega: str = "auto",
    alpha: float = 0.05,
    correction: str = "holm",
    power: float = 0.8,
    ks: Sequence[int] | None = None,
    n_simulations: int = 100,
    n_permutations: int = 1999,
    detectable_at: int | None = None,
    similarity: str = "cosine",
    rng: RngLike = None,
    **omega_options: Any,
) -> FamilyPlan:
    """Smallest k per arm with power >= ``power`` for every perturbation of one family.

    ``original`` is the pilot of the original prompt, ``perturbed`` one pilot per perturbation
    (each (k_j, d), sharing ``original``'s dimension); ``m`` the tests of the audit's family
    (default: the perturbations given). The family is simulated ``n_simulations`` times at
    every k of ``ks`` (default: ``GRID_POINTS`` sizes from 5 to the pilot, geometric), then at
    the midpoints of the brackets where some perturbation's power crosses the target
    (``REFINE_ROUNDS`` rounds, down to ``REFINE_WIDTH``); at ``detectable_at`` (e.g. the
    configured k) each perturbation's minimum detectable share is bisected, the others' tests
    kept as simulated. See the module docstring for the estimate of the curve.
    """
    a, pilots, args = _plan_family_iv(
        original,
        perturbed,
        m=m,
        omega=omega,
        alpha=alpha,
        correction=correction,
        power=power,
        ks=ks,
        n_simulations=n_simulations,
        n_permutations=n_permutations,
        detectable_at=detectable_at,
        omega_options=omega_options,
    )
    sim = _Simulation(a, pilots, args, omega, similarity, omega_options, as_rng(rng))
    limits = [min(len(a), len(p)) for p in pilots]
    grid = args.grid
    for k in grid:
        sim.run(k)
        done = all(sim.rate(k, j) >= args.power for j in range(len(pilots)) if k <= limits[j])
        if done:
            break
    if args.detectable_at is not None and args.detectable_at <= max(limits):
        sim.run(args.detectable_at)
    for _ in range(REFINE_ROUNDS):
        midpoints = {
            mid
            for j in range(len(pilots))
            if (mid := _midpoint(sim.ks(limits[j]), sim.rates(j, limits[j]), args.power))
        }
        if not midpoints:
            break
        for k in sorted(midpoints):
            sim.run(k)

    results = []
    for j, limit in enumerate(limits):
        ks_j = sim.ks(limit)
        fitted = _isotonic(np.array(sim.rates(j, limit)))
        detectable, share, share_curve = _detectable(sim, j, limit, ks_j, fitted, args)
        results.append(
            PerturbationPower(
                k=_crossing(ks_j, fitted, args.power),
                curve=tuple(sim.result(k, j) for k in ks_j),
                fitted=tuple(float(f) for f in fitted),
                pilot_limit=limit,
                detectable=detectable,
                detectable_share=share,
                share_curve=share_curve,
            )
        )
    level = lone_threshold(args.m, args.alpha, args.correction)
    fine = fine_permutations(level)
    return FamilyPlan(
        perturbations=tuple(results),
        power=args.power,
        alpha=args.alpha,
        m=args.m,
        correction=args.correction,
        omega=omega,
        n_permutations=args.n_permutations,
        n_simulations=args.n_simulations,
        ks=tuple(sorted(sim.rejections)),
        level=level,
        resolution_permutations=fine if args.n_permutations < fine else None,
        detectable_at=args.detectable_at,
    )


@dataclass(frozen=True)
class _Args:
    m: int
    alpha: float
    correction: str
    power: float
    grid: list[int]
    n_simulations: int
    n_permutations: int
    detectable_at: int | None


def _plan_family_iv(
    original: ArrayLike,
    perturbed: Sequence[ArrayLike],
    *,
    m: int | None,
    omega: str,
    alpha: float,
    correction: str,
    power: float,
    ks: Sequence[int] | None,
    n_simulations: int,
    n_permutations: int,
    detectable_at: int | None,
    omega_options: dict[str, Any],
) -> tuple[NDArray[np.float64], list[NDArray[np.float64]], _Args]:
    """Check and normalize every argument, naming the bad one."""
    if isinstance(perturbed, np.ndarray) or not isinstance(perturbed, Sequence):
        raise ValueError(
            "perturbed: expected a sequence of pilot arrays (one per perturbation), got "
            f"{type(perturbed).__name__}"
        )
    if not perturbed:
        raise ValueError("perturbed: needs at least one perturbed pilot")
    pilots = []
    for j, p in enumerate(perturbed):
        try:
            pool_arms(original, p)
        except ValueError as exc:
            raise ValueError(f"perturbed[{j}] (with original): {exc}") from None
        pilots.append(np.asarray(p, dtype=np.float64))
    a = np.asarray(original, dtype=np.float64)
    spec = OMEGAS[choose(omega, "omega", OMEGAS)]
    spec.resolve_options(omega_options)
    family = len(pilots) if m is None else as_positive_int(m, "m")
    if family < len(pilots):
        raise ValueError(
            f"m: the family has at least the {len(pilots)} perturbations given, got m={family}"
        )
    alpha = as_probability(alpha, "alpha")
    correction = choose(correction, "correction", CORRECTIONS)
    power = as_probability(power, "power")
    n_sims = as_positive_int(n_simulations, "n_simulations")
    n_perm = as_positive_int(n_permutations, "n_permutations")
    if detectable_at is not None:
        detectable_at = as_positive_int(detectable_at, "detectable_at", minimum=2)
    limit = max(min(len(a), len(p)) for p in pilots)
    if ks is None:
        low = min(5, limit)
        grid = sorted({round(x) for x in np.geomspace(low, limit, GRID_POINTS)})
    else:
        grid = [k for k in as_arm_sizes(ks, "ks") if k <= limit]
        if not grid:
            raise ValueError(
                f"ks: none is at most the pilots ({limit} outputs per arm at most); arms are "
                "drawn without replacement, so a pilot must be at least as large as the k it tests"
            )
    args = _Args(family, alpha, correction, power, grid, n_sims, n_perm, detectable_at)
    return a, pilots, args


class _Simulation:
    """The family's simulated audits, each with its fixed pilot orders and test seeds."""

    def __init__(
        self,
        original: NDArray[np.float64],
        pilots: list[NDArray[np.float64]],
        args: _Args,
        omega: str,
        similarity: str,
        omega_options: dict[str, Any],
        gen: np.random.Generator,
    ) -> None:
        self.a, self.pilots, self.args = original, pilots, args
        self.omega, self.similarity, self.options = omega, similarity, omega_options
        self.cap = decisive_cap(len(pilots), args.m, args.alpha, args.correction)
        sims = args.n_simulations
        self.order_a = np.array([gen.permutation(len(original)) for _ in range(sims)])
        self.orders = [np.array([gen.permutation(len(p)) for _ in range(sims)]) for p in pilots]
        self.seeds = gen.integers(0, 2**63, size=(sims, len(pilots)))
        self.changed = gen.random((sims, args.detectable_at or 0))
        """Per audit, the uniforms behind which perturbed outputs change at share s (u < s)."""
        self.rejections: dict[int, NDArray[np.int64]] = {}
        self.p_at: NDArray[np.float64] | None = None
        """(audits, perturbations) raw p-values at ``detectable_at``."""

    def test(
        self, s: int, j: int, a: NDArray[np.float64], b: NDArray[np.float64], cap: float
    ) -> float:
        """The test's p-value where it is at most ``cap``, else 1."""
        return capped_p_value(
            a,
            b,
            cap=cap,
            similarity=self.similarity,
            omega=self.omega,
            n_permutations=self.args.n_permutations,
            rng=int(self.seeds[s, j]),
            **self.options,
        )

    def rejected(self, p: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Decisions of the correction over m tests, the ones not given at p = 1."""
        full = np.ones(self.args.m)
        full[: p.size] = p
        return CORRECTIONS[self.args.correction](full)[: p.size] <= self.args.alpha

    def run(self, k: int) -> None:
        """Simulate every audit at k (tests whose pilot is smaller than k enter as p = 1)."""
        if k in self.rejections:
            return
        n = len(self.pilots)
        p = np.ones((self.args.n_simulations, n))
        counts = np.zeros(n, dtype=np.int64)
        active = [j for j, pilot in enumerate(self.pilots) if k <= min(len(self.a), len(pilot))]
        for s in range(self.args.n_simulations):
            p[s] = self.audit(s, k, active)
            counts += self.rejected(p[s])
        self.rejections[k] = counts
        if k == self.args.detectable_at:
            self.p_at = p

    def audit(self, s: int, k: int, active: list[int]) -> NDArray[np.float64]:
        """One simulated audit's p-values at k: exact where they can decide, else 1.

        Holm is stepped: every test is first run up to alpha/m, where Holm's first step
        needs it (a family with none below rejects nothing), then the tests still above the
        cap again up to alpha/(m - r) while the r below it grow: all below it are rejected.
        The other corrections run each test once, up to ``decisive_cap``.
        """
        a = self.a[self.order_a[s, :k]]
        p = np.ones(len(self.pilots))
        args = self.args
        cap = args.alpha / args.m if args.correction == "holm" else self.cap
        pending = active
        while pending:
            for j in pending:
                p[j] = self.test(s, j, a, self.pilots[j][self.orders[j][s, :k]], cap)
            below = int(np.count_nonzero(p <= cap))
            if args.correction != "holm" or below == args.m:
                break
            wider = args.alpha / (args.m - below)
            pending = [j for j in pending if p[j] > cap] if wider > cap else []
            cap = wider
        return p

    def ks(self, limit: int) -> list[int]:
        return sorted(k for k in self.rejections if k <= limit)

    def rate(self, k: int, j: int) -> float:
        return float(self.rejections[k][j]) / self.args.n_simulations

    def rates(self, j: int, limit: int) -> list[float]:
        return [self.rate(k, j) for k in self.ks(limit)]

    def result(self, k: int, j: int, share: float = 1.0, count: int | None = None) -> PowerResult:
        from scipy.stats import binomtest

        rejections = int(self.rejections[k][j]) if count is None else count
        sims = self.args.n_simulations
        ci = binomtest(rejections, sims).proportion_ci(confidence_level=0.95)
        return PowerResult(
            power=rejections / sims,
            ci_low=float(ci.low),
            ci_high=float(ci.high),
            confidence=0.95,
            rejections=rejections,
            n_simulations=sims,
            k=k,
            alpha=self.args.alpha,
            omega=self.omega,
            replace=False,
            share=share,
        )

    def share_rejections(self, j: int, k: int, share: float) -> int:
        """Audits that reject perturbation j at ``k`` (``detectable_at``, simulated) when only
        ``share`` of its outputs change: the rest come from the original's pilot, the rows after
        the original arm in the audit's order (so no row is in both arms)."""
        if self.p_at is None:
            raise RuntimeError("the family is not simulated at detectable_at yet")
        count = 0
        for s in range(self.args.n_simulations):
            order = self.order_a[s]
            unchanged = self.changed[s] >= share
            b = self.pilots[j][self.orders[j][s, :k]].copy()
            b[unchanged] = self.a[order[k : k + int(unchanged.sum())]]
            p = self.p_at[s].copy()
            p[j] = self.test(s, j, self.a[order[:k]], b, self.cap)
            count += bool(self.rejected(p)[j])
        return count


def decisive_cap(n: int, m: int, alpha: float, correction: str) -> float:
    """The largest raw p-value at which one of ``n`` tests can be rejected by the correction
    over ``m`` (the other m - n at p = 1): alpha/m for Bonferroni, alpha/(m - n + 1) for Holm
    (a test ranked n-th at best), n alpha/m for BH and n alpha/(m H_m) for BY. Above it a
    p-value is rejected by none of them and, put at 1, changes no other decision (it ranks
    after every p-value that can be rejected). Arguments are assumed validated."""
    if correction == "bonferroni":
        return alpha / m
    if correction == "holm":
        return alpha / (m - n + 1)
    return min(1.0, n * lone_threshold(m, alpha, correction))


def _isotonic(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Non-decreasing least-squares fit of equally weighted points (pool adjacent violators)."""
    values: list[float] = []
    weights: list[int] = []
    for v in y:
        values.append(float(v))
        weights.append(1)
        while len(values) > 1 and values[-2] > values[-1]:
            w = weights[-2] + weights[-1]
            values[-2:] = [(values[-2] * weights[-2] + values[-1] * weights[-1]) / w]
            weights[-2:] = [w]
    return np.repeat(values, weights)


def _crossing(ks: Sequence[int], fitted: NDArray[np.float64], target: float) -> int | None:
    """Smallest integer k at which the linear interpolation of ``fitted`` reaches ``target``."""
    above = np.flatnonzero(fitted >= target)
    if above.size == 0:
        return None
    i = int(above[0])
    if i == 0:
        return ks[0]
    k0, k1, v0, v1 = ks[i - 1], ks[i], float(fitted[i - 1]), float(fitted[i])
    return min(k1, math.ceil(k0 + (target - v0) / (v1 - v0) * (k1 - k0) - 1e-9))


def _midpoint(ks: list[int], rates: list[float], target: float) -> int | None:
    """The midpoint of the bracket around the crossing when it is wider than REFINE_WIDTH."""
    fitted = _isotonic(np.array(rates))
    above = np.flatnonzero(fitted >= target)
    if above.size == 0 or above[0] == 0:
        return None
    low, high = ks[int(above[0]) - 1], ks[int(above[0])]
    if high - low <= max(1.0, REFINE_WIDTH * high):
        return None
    return (low + high) // 2


def _detectable(
    sim: _Simulation,
    j: int,
    limit: int,
    ks: list[int],
    fitted: NDArray[np.float64],
    args: _Args,
) -> tuple[Detectable, float | None, tuple[PowerResult, ...]]:
    k = args.detectable_at
    if k is None:
        return "not_asked", None, ()
    if k > limit:
        return "pilot_too_small", None, ()
    full = sim.result(k, j)
    if fitted[ks.index(k)] < args.power:
        return "not_detected", None, (full,)
    if 2 * k > len(sim.a):
        return "pilot_too_small", None, (full,)
    curve = {1.0: full}
    low, high = 0.0, 1.0
    for _ in range(SHARE_STEPS):
        share = (low + high) / 2
        curve[share] = sim.result(k, j, share, sim.share_rejections(j, k, share))
        low, high = (low, share) if curve[share].power >= args.power else (share, high)
    return "estimated", high, tuple(curve[s] for s in sorted(curve))
