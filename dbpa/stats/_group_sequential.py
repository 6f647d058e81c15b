"""Exact group-sequential permutation tests: the level spent look by look on permutation
*paths*, so that overlapping crossings are not paid for twice.

A weighted Bonferroni (union) bound over the looks, ``P(reject) <= sum_j P(p_j <= w_j t)``,
is valid too (``_sequential.sequential_p_value``), but the looks share their data, so a null
test that crosses at an interim look would mostly have crossed at the last one too, and the
union bound pays for those crossings twice. Here the boundary is computed on the joint permutation
distribution of the statistic at every look (Mehta, Patel, Senchaudhuri & Tsiatis 1994,
permutational group-sequential tests; a Monte Carlo version), so the level ``t`` is spent
exactly: at most ``w_j t`` of it at look ``j``, whatever the overlap.

**Paths.** A test's looks are at ``k_1 < ... < k_J`` outputs per arm; *block* ``j`` holds
rows ``[k_{j-1}, k_j)`` of both arms (``k_0 = 0``; ``n_j = k_j - k_{j-1}`` rows of each).
Let ``G`` be the group of permutations of the outputs that map each block onto itself
(within-block permutations). Under H0 (the arms' outputs iid, or merely exchangeable within
each block) the data ``Z`` and ``gZ`` have the same law for every ``g`` in ``G``. The
statistic at look ``j``, ``T_j``, depends on blocks ``1..j`` only, and on ``g`` only through
the labels it puts on the block's outputs (``n_j`` "original" among the block's ``2 n_j``),
so a path is drawn as one uniformly random balanced split per block. Path ``r``'s split of
block ``j`` comes from a generator seeded by ``(seed..., j)`` alone: the paths of look ``j``
are the same whether computed at look ``j`` or later (e.g. after a resume), and never depend
on outputs not yet sampled. Path 0 is the identity (the observed labels); paths ``1..R``
are iid uniform on ``G``. The statistic at a look is the engine's omega on the pooled look
(``split_statistics``): a single omega's value on the path's split, or, for a combined omega
(``auto``), the path's rank among the look's R + 1 paths by the combination's ordering (a
symmetric function of the paths, which is all the argument below needs).

**Exchangeability.** Let ``H`` be uniform on ``G`` and independent of everything. Under H0
``Z ~ HZ``, so the tuple of paths ``(T(Z), T(g_1 Z), ..., T(g_R Z))`` has the law of
``(T(h_0 Z), T(h_1 Z), ..., T(h_R Z))`` with ``h_0 = H`` and ``h_r = g_r H``; these are iid
uniform on ``G`` and independent of ``Z``, so the R + 1 paths (each a vector over the looks)
are exchangeable, the observed one included. Any rule that is a symmetric function of the
R + 1 paths (a path's fate depends on itself and on the multiset of all paths) therefore
gives the observed path probability ``E[#paths with that fate] / (R + 1)``.

**Boundary (spending).** With ``t`` the family's *lone* threshold (alpha/m for Holm;
``lone_threshold``) and ``alpha_j = w_j t``, ``c_j = floor(alpha_j (R + 1))``: ``S_1`` is
every path; at look ``j`` a path ``x`` in ``S_j`` crosses when ``1 + #{y in S_j, y != x:
T_j(y) >= T_j(x)} <= c_j``; ``S_{j+1}`` is ``S_j`` without the crossers. At most ``c_j``
paths cross at look ``j`` (were there ``c_j + 1``, the one with the smallest ``T_j`` would
count the other ``c_j`` above it), so the observed path crosses at look ``j`` with
probability at most ``c_j / (R + 1) <= alpha_j`` and at some look with probability at most
``t``: exact for any finite R, whatever the dependence between looks. Paths are only ever
removed by crossing, never by futility, so the boundary is the same whether or not anyone
stops for futility (futility is non-binding; stopping only removes rejections). A
correction's step thresholds (alpha/(m - r) for Holm once r tests changed) are *not* used
for stopping: they depend on the other tests, which share the original arm, so the boundary
would no longer be a symmetric function of this test's paths (stopping at them through
repeated p-values was valid but measured less powerful: ``benchmarks/README.md``).

**p-value.** The family's correction needs a p-value valid at every level, not only at
``t``. The stage-wise ordering (Fairbanks & Madsen 1982; Tsiatis, Rosner & Mehta 1984)
ranks a path by the look where it stops, ``s(x)`` (its crossing look, or the last look ``J``
if it never crosses), earlier being more extreme, then by ``T_{s(x)}(x)``, larger being more
extreme; the observed test's p-value is

    p = (1 + #{y != 0: s(y) < s(0), or s(y) = s(0) and T_{s(0)}(y) >= T_{s(0)}(0)}) / (R + 1).

The key of each path is a symmetric function of the paths, so for any ``u`` the paths with
``p(x) <= u`` number at most ``u (R + 1)`` (the least extreme of them counts all the others),
and ``P(p <= u) <= u`` by exchangeability. A test that crossed at look ``j`` has
``p <= (c_1 + ... + c_j) / (R + 1) <= t``, so the final correction (Holm, Bonferroni, BH,
BY: each rejects a p-value at most its lone threshold) rejects every test stopped as
changed. A test stopped for futility gets p = 1 (conservative: its stage-wise p is not
defined, as the test stopped before its stop look). Only the looks up to ``s(0)`` are
needed, so the p-value is known when the test stops. Ties: ``>=`` counts values within
``TIE_RTOL (|T| + scale)`` as the engine does; this only adds to the counts, so the bounds
above still hold. ``c_j`` is computed as ``floor(alpha_j (R + 1) + 1e-9)`` so that a level
such as 0.05 x 0.005 x 16000 = 4 is not lost to rounding (an excess of at most 1e-9 / (R+1)).

**Futility.** At an interim look a test stops as futile when the look's own Monte Carlo
permutation p-value (the observed ``T_j`` ranked among all R + 1 paths' ``T_j``) exceeds
``design.futility`` (``SequentialDesign.futility``).

**Exhaustive first block** (``first_block="all"``). At k_1 = 8 there are only C(16, 8) =
12870 splits of the first block, and the statistic is symmetric in the labels, so random
paths copy the observed value about 2 R / 12870 times, which keeps an obvious change from
crossing a first-look level of a few paths. The first block's components can instead run
through every split equally often (R + 1 a multiple of C(2 k_1, k_1), the identity's first
copy being path 0), the other blocks' components iid uniform as before. The argument still
holds: with ``Z ~ HZ``, right-multiplying an equal-count enumeration of the first block's
splits by ``H_1`` gives the same enumeration, and every element's other blocks,
``u_r H_{2..}`` and ``H_{2..}`` for path 0, are iid uniform; so given the multiset of paths
the observed one is uniformly placed among them, which is all the symmetric rule needs.

The restricted group ``G`` (within blocks) is smaller than the full permutation group of a
look, so the last look's test is slightly coarser than the ordinary permutation test of the
first ``k_J`` outputs; at 8 + 4 + 4 + 4 outputs per arm it still has 12870 x 70^3 / 2
distinct values of the statistic.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._multiplicity import CORRECTIONS, correct, lone_threshold
from ._permutation import split_statistics
from ._sequential import (
    SequentialDesign,
    SequentialFamily,
    SequentialTest,
    StopReason,
    _arms_iv,
)
from ._validation import RngLike, as_positive_int, as_probability, as_rng, choose

__all__ = [
    "GroupSequentialPaths",
    "PathPlan",
    "block_splits",
    "first_block_splits",
    "group_sequential_crossings",
    "group_sequential_paths",
    "group_sequential_stop",
    "path_labels",
    "path_plan",
    "sequential_family",
    "stagewise_p_value",
]

FirstBlock = Literal["random", "all"]
FIRST_BLOCKS = ("random", "all")
"""How paths label the first block: iid uniform splits, or every split equally often."""

LEVEL_SLACK = 1e-9
"""Added to alpha_j (R + 1) before the floor: 4.0 computed as 3.9999999999 stays 4."""


@dataclass(frozen=True)
class GroupSequentialPaths:
    """The statistic of a test on R + 1 permutation paths at the looks taken so far."""

    looks: tuple[int, ...]
    """Outputs per arm at each look taken (a prefix of the design's looks)."""
    statistics: NDArray[np.float64]
    """(R + 1, looks taken): ``statistics[r, j]`` is T at look j on path r; row 0 is observed."""
    tolerances: NDArray[np.float64]
    """Same shape: the tie tolerance of each value, ``TIE_RTOL (|T| + scale_j)``."""

    @property
    def n_paths(self) -> int:
        """R + 1 (the observed path included)."""
        return int(self.statistics.shape[0])

    def look_p_values(self) -> NDArray[np.float64]:
        """Each look's own Monte Carlo permutation p-value of the observed statistic among
        all paths, ``(1 + #{r >= 1: T_j(r) >= T_j(0)}) / (R + 1)`` (for futility)."""
        t, tol = self.statistics, self.tolerances
        count = np.count_nonzero(t[1:] >= t[0] - tol[0], axis=0)
        p: NDArray[np.float64] = (1.0 + count) / self.n_paths
        return p


def _looks_iv(looks: Sequence[int]) -> tuple[int, ...]:
    try:
        values = tuple(as_positive_int(k, "looks", minimum=2) for k in looks)
    except TypeError:
        raise ValueError(f"looks: expected a sequence of integers, got {looks!r}") from None
    if not values or any(b <= a for a, b in itertools.pairwise(values)):
        raise ValueError(f"looks: must be increasing and non-empty, got {looks!r}")
    return values


def _seed_iv(seed: int | Sequence[int]) -> tuple[int, ...]:
    key = (seed,) if isinstance(seed, (int, np.integer)) else tuple(seed)
    if not key or any(
        not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0 for s in key
    ):
        raise ValueError(f"seed: expected a non-negative int or a sequence of them, got {seed!r}")
    return tuple(int(s) for s in key)


def first_block_splits(looks: Sequence[int]) -> int:
    """Distinct balanced splits of the first block, ``C(2 k_1, k_1)``: with
    ``first_block="all"``, ``n_paths`` must be a multiple of it."""
    k = _looks_iv(looks)[0]
    return math.comb(2 * k, k)


@functools.cache
def _every_split(n: int) -> NDArray[np.bool_]:
    """Every balanced split of 2 n outputs (n labelled original), the identity first."""
    combos = np.array(list(itertools.combinations(range(2 * n), n)))
    every = np.zeros((len(combos), 2 * n), dtype=bool)
    np.put_along_axis(every, combos, True, axis=1)
    every.setflags(write=False)
    return every


def block_splits(
    looks: Sequence[int],
    j: int,
    n_paths: int,
    seed: int | Sequence[int],
    *,
    first_block: FirstBlock = "random",
) -> NDArray[np.bool_]:
    """Labels of block ``j`` (0-based) on paths ``1..R`` (``n_paths = R + 1``): an (R, 2 n_j)
    boolean array, the block's rows of the original arm then of the perturbed arm, True for
    "labelled original", exactly ``n_j`` per row. Drawn from ``(seed..., j)`` alone, so a
    look computed later sees the same splits; each row takes the ``n_j`` smallest of
    ``2 n_j`` uniforms (a uniform balanced split). With ``first_block="all"`` block 0 is
    every balanced split ``n_paths / C(2 k_1, k_1)`` times over, the observed split's first
    copy left out (it is path 0)."""
    values = _looks_iv(looks)
    if not 0 <= j < len(values):
        raise ValueError(f"j: a block of the {len(values)} looks (0-based), got {j!r}")
    count = as_positive_int(n_paths, "n_paths", minimum=2) - 1
    key = _seed_iv(seed)
    n = values[j] - (values[j - 1] if j else 0)
    mode = choose(first_block, "first_block", FIRST_BLOCKS)
    if j == 0 and mode == "all":
        distinct = math.comb(2 * n, n)
        if (count + 1) % distinct:
            raise ValueError(
                f"n_paths: with first_block='all', a multiple of C({2 * n}, {n}) = {distinct}, "
                f"got {count + 1}"
            )
        return np.tile(_every_split(n), ((count + 1) // distinct, 1))[1:]
    uniforms = np.random.default_rng([*key, j]).random((count, 2 * n))
    order = np.argsort(uniforms, axis=1)[:, :n]  # float64 uniforms: no ties in practice
    labels = np.zeros((count, 2 * n), dtype=bool)
    np.put_along_axis(labels, order, True, axis=1)
    return labels


def path_labels(
    looks: Sequence[int], n_paths: int, seed: int | Sequence[int], *, first_block: FirstBlock
) -> NDArray[np.bool_]:
    """(n_paths, 2 k_max) labels of every path over the rows ``a[:k_max]`` then
    ``b[:k_max]``, True for "labelled original": row 0 the observed labels, rows 1..R each
    block split by ``block_splits``."""
    values = _looks_iv(looks)
    k_max = values[-1]
    labels = np.zeros((n_paths, 2 * k_max), dtype=bool)
    labels[0, :k_max] = True
    start = 0
    for j, block in enumerate(values):
        n = block - start
        split = block_splits(values, j, n_paths, seed, first_block=first_block)
        labels[1:, start:block] = split[:, :n]
        labels[1:, k_max + start : k_max + block] = split[:, n:]
        start = block
    return labels


def group_sequential_paths(
    a: ArrayLike,
    b: ArrayLike,
    looks: Sequence[int],
    *,
    n_paths: int,
    seed: int | Sequence[int],
    first_block: FirstBlock = "random",
    omega: str = "auto",
    similarity: str = "cosine",
    **omega_options: Any,
) -> GroupSequentialPaths:
    """Omega at each of ``looks`` (the first ``k`` outputs of each arm) on the observed labels
    and on ``n_paths - 1`` within-block permutation paths. ``a`` and ``b`` need at least the
    last look's rows; only the looks given are computed."""
    values = _looks_iv(looks)
    k_max = values[-1]
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    for name, arm in (("a", x), ("b", y)):
        if arm.ndim != 2 or arm.shape[0] < k_max:
            raise ValueError(f"{name}: needs {k_max} rows of embeddings, got shape {arm.shape}")
    size = as_positive_int(n_paths, "n_paths", minimum=2)
    labels = path_labels(values, size, seed, first_block=first_block)
    statistics = np.empty((size, len(values)))
    tolerances = np.empty((size, len(values)))
    for j, k in enumerate(values):
        found = split_statistics(
            x[:k],
            y[:k],
            labels[:, np.r_[0:k, k_max : k_max + k]],
            omega=omega,
            similarity=similarity,
            **omega_options,
        )
        statistics[:, j] = found.values
        tolerances[:, j] = found.tolerances
    return GroupSequentialPaths(looks=values, statistics=statistics, tolerances=tolerances)


def _levels_iv(levels: ArrayLike, looks: int) -> NDArray[np.float64]:
    arr = np.asarray(levels, dtype=np.float64)
    if arr.shape != (looks,):
        raise ValueError(f"levels: one per look taken ({looks}), got shape {arr.shape}")
    if not ((arr >= 0) & (arr <= 1)).all():
        raise ValueError("levels: must be in [0, 1]")
    return arr


def group_sequential_crossings(paths: GroupSequentialPaths, levels: ArrayLike) -> NDArray[np.int64]:
    """The look (0-based) at which each path crosses the spending boundary with level
    ``levels[j]`` (``w_j t``) at look j; ``len(paths.looks)`` for a path that has not crossed
    at any look taken. Path r crosses at look j when it has not crossed before and
    ``1 + #{other such paths with T_j >= its T_j} <= floor(levels[j] (R + 1))``."""
    if not isinstance(paths, GroupSequentialPaths):
        raise ValueError(f"paths: expected GroupSequentialPaths, got {type(paths).__name__}")
    taken = len(paths.looks)
    alpha = _levels_iv(levels, taken)
    size = paths.n_paths
    stop = np.full(size, taken, dtype=np.int64)
    for j in range(taken):
        budget = math.floor(alpha[j] * size + LEVEL_SLACK)
        if budget < 1:
            continue
        alive = np.flatnonzero(stop == taken)
        t = paths.statistics[alive, j]
        low = t - paths.tolerances[alive, j]
        ordered = np.sort(t)
        at_least = alive.size - np.searchsorted(ordered, low, side="left")  # itself included
        stop[alive[at_least <= budget]] = j
    return stop


def stagewise_p_value(paths: GroupSequentialPaths, crossings: ArrayLike, last: int) -> float:
    """The stage-wise ordering p-value of the observed path (row 0): paths are ranked by
    their stop look ``min(crossing, last)`` (earlier is more extreme), then by the statistic
    there (larger is more extreme). ``last`` is the design's final look (0-based); the looks
    up to the observed path's stop look must have been taken."""
    stop = np.minimum(np.asarray(crossings, dtype=np.int64), last)
    if stop.shape != (paths.n_paths,):
        raise ValueError(f"crossings: one per path ({paths.n_paths}), got shape {stop.shape}")
    s = int(stop[0])
    if s >= len(paths.looks):
        raise ValueError(
            f"last: the observed path stops at look {s} (0-based), not taken yet "
            f"({len(paths.looks)} taken)"
        )
    t = paths.statistics[:, s]
    earlier = np.count_nonzero(stop[1:] < s)
    same = np.count_nonzero((stop[1:] == s) & (t[1:] >= t[0] - paths.tolerances[0, s]))
    return float((1 + earlier + same) / paths.n_paths)


def group_sequential_stop(
    paths: GroupSequentialPaths, design: SequentialDesign, threshold: float
) -> SequentialTest | None:
    """The stopping rule after the looks in ``paths`` (a prefix of ``design.looks``): stop as
    ``changed`` when the observed path crosses the boundary at ``threshold`` (the family's
    lone threshold), as ``futile`` at an interim look whose own p-value exceeds
    ``design.futility`` (p-value 1), at ``k_max`` in any case; None while open. The stopped
    test's ``p_value`` is the stage-wise p-value; ``p_values`` holds each look's own."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    if not isinstance(paths, GroupSequentialPaths):
        raise ValueError(f"paths: expected GroupSequentialPaths, got {type(paths).__name__}")
    taken = len(paths.looks)
    if paths.looks != design.looks[:taken]:
        raise ValueError(f"paths: looks {paths.looks} are not a prefix of {design.looks}")
    t = as_probability(threshold, "threshold")
    levels = np.asarray(design.weights[:taken]) * t
    crossings = group_sequential_crossings(paths, levels)
    look_p = tuple(float(p) for p in paths.look_p_values())
    j, last = taken - 1, len(design.looks) - 1
    reason: StopReason | None = None
    if crossings[0] < taken:  # can only be j: the earlier looks left it open
        reason = "changed"
    elif j < last and design.futility is not None and look_p[j] > design.futility:
        reason = "futile"
    elif j == last:
        reason = "k_max"
    if reason is None:
        return None
    p = 1.0 if reason == "futile" else stagewise_p_value(paths, crossings, last)
    return SequentialTest(look_p, p, design.looks[int(min(crossings[0], j))], reason)


PATH_HEADROOM = 4
"""Paths per unit of the smallest look level: ``c_j >= 4`` paths may cross at every look, so
an obvious change is not held at a look by a few paths that tie with it."""

MAX_ENUMERATED_SPLITS = 20_000
"""The first block's splits are enumerated (``first_block="all"``) when there are at most
this many, C(16, 8) = 12870 at the default first look of 8."""


@dataclass(frozen=True)
class PathPlan:
    """How many permutation paths a family's group-sequential tests take, and how."""

    n_paths: int
    """R + 1, the observed path included."""
    first_block: FirstBlock


def path_plan(design: SequentialDesign, m: int, alpha: float, method: str) -> PathPlan:
    """Paths with which every look of ``design`` can stop a test of a family of ``m`` as
    changed, ``PATH_HEADROOM`` paths over at its level ``w_j t`` (``t`` the lone threshold),
    the first block enumerated when it has at most ``MAX_ENUMERATED_SPLITS`` splits (then
    R + 1 is the smallest multiple of their count that is large enough)."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    t = lone_threshold(as_positive_int(m, "m"), alpha, method)
    need = math.ceil(PATH_HEADROOM / (min(design.weights) * t) - LEVEL_SLACK)
    distinct = first_block_splits(design.looks)
    if distinct <= MAX_ENUMERATED_SPLITS:
        return PathPlan(-(-need // distinct) * distinct, "all")
    return PathPlan(max(need, 2), "random")


def sequential_family(
    original: ArrayLike,
    perturbed: Sequence[ArrayLike],
    design: SequentialDesign,
    *,
    alpha: float = 0.05,
    method: str = "holm",
    omega: str = "auto",
    n_paths: int | None = None,
    first_block: FirstBlock | None = None,
    rng: RngLike = None,
) -> SequentialFamily:
    """A sequential family with the exact group-sequential boundary: every perturbed arm
    against the original, look by look, each test stopped by ``group_sequential_stop`` at
    the family's lone threshold, the stage-wise p-values corrected by ``method``. Paths as
    ``path_plan`` says unless ``n_paths`` is given (then random unless ``first_block``). One
    seed is drawn from ``rng``; test ``i``'s block ``j`` comes from ``(seed, i, j)``."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    a, arms = _arms_iv(original, perturbed, design.k_max)
    level = as_probability(alpha, "alpha")
    method = choose(method, "method", CORRECTIONS)
    plan = path_plan(design, len(arms), level, method)
    size = plan.n_paths if n_paths is None else as_positive_int(n_paths, "n_paths", minimum=2)
    if first_block is not None:
        mode = first_block
    else:
        mode = plan.first_block if n_paths is None else "random"
    root = int(as_rng(rng).integers(2**63))
    paths = [
        group_sequential_paths(
            a, b, design.looks, n_paths=size, seed=(root, i), first_block=mode, omega=omega
        )
        for i, b in enumerate(arms)
    ]
    return _family_from_paths(paths, design, level, method)


def _family_from_paths(
    paths: Sequence[GroupSequentialPaths], design: SequentialDesign, alpha: float, method: str
) -> SequentialFamily:
    """The family's stops and correction from each test's paths at every look (computed at
    once: look j's columns depend on blocks 1..j only, so they equal what look j alone
    computes; each decision below uses the looks up to its own only)."""
    threshold = lone_threshold(len(paths), alpha, method)
    tests: list[SequentialTest] = []
    for full in paths:
        for j in range(len(design.looks)):
            prefix = GroupSequentialPaths(
                looks=full.looks[: j + 1],
                statistics=full.statistics[:, : j + 1],
                tolerances=full.tolerances[:, : j + 1],
            )
            stop = group_sequential_stop(prefix, design, threshold)
            if stop is not None:
                tests.append(stop)
                break
    final = correct([t.p_value for t in tests], method=method, alpha=alpha)
    stops = [t.stopped_at for t in tests]
    return SequentialFamily(
        tests=tuple(tests),
        adjusted=final.adjusted,
        reject=final.reject,
        calls=max(stops) + sum(stops),
        fixed_calls=(len(paths) + 1) * design.k_max,
    )
