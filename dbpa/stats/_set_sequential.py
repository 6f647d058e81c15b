"""Group-sequential pooled tests over a set of prompts: the pooled test of ``_prompt_sets``
plays the single test's role in ``_group_sequential``.

A sequential audit of a set looks at the first ``k_j`` outputs per arm of *every* prompt at
look ``j``; a perturbation's test at the look is the pooled stratified test of those outputs,
and the look-by-look boundary is spent on permutation *paths* exactly as for one prompt
(``_group_sequential``: the boundary needs the statistic of the same relabelling at every
look, the joint distribution over the looks, not only the looks' p-values).

**Paths.** Block ``j`` of prompt ``i`` holds rows ``[k_{j-1}, k_j)`` of that prompt's two
arms. The group ``G`` is the product, over prompts and blocks, of the permutations that map
a prompt's block onto itself: a path relabels every (prompt, block) by its own balanced
split, drawn as ``block_splits`` draws it from ``(seed..., i, j)``, so the splits of look
``j`` are the same whether computed then or later, and never depend on outputs not yet
sampled. Path 0 is the observed labelling. At each look the pooled statistic of every path
is the set's statistic of ``prompt_set_test`` on that path's labels: each prompt's omega on
its split of its first ``k_j`` outputs per arm, combined across prompts by one of
``COMBINATIONS`` (standardised or ranked among the look's R + 1 paths), and for ``auto`` the
components by their non-parametric combination, the path's value being its rank among the
look's paths by that ordering (as ``split_statistics`` ranks a single test's paths).

**Validity.** Under H0 (the perturbation changes no prompt's output distribution, so each
prompt's outputs are exchangeable between its arms within each block; prompts may differ in
every other way) ``Z ~ gZ`` for every ``g`` in ``G``, and the paths are iid uniform on ``G``
(each (prompt, block) split uniform and independent of the others and of ``Z``). The
argument of ``_group_sequential`` then holds word for word: the R + 1 paths, each a vector
over the looks, are exchangeable; the combination is a symmetric function of the look's
paths (a path's value depends on itself and on the multiset of all paths: standardisation by
the mean and spread over the paths, at-least counts among them, ranks among them), and so
are the spending boundary and the stage-wise p-value; so the observed path crosses at look
``j`` with probability at most ``w_j t`` and the stage-wise p-value is valid at every level.
Stratification is what keeps prompts with different answer distributions from mixing: no
path moves an output from one prompt to another.

**First block.** With ``first_block="all"`` the first prompt's first block runs through every
balanced split equally often (``_group_sequential``'s exhaustive first block), every other
(prompt, block) iid uniform: right-multiplying that enumeration by the first prompt's
``H_1`` gives the same enumeration, the rest stays iid uniform, so the argument holds. It
matters for a set of one prompt, whose obvious change ties only with its mirror image; over
several prompts a random path copies the observed labels of every prompt with negligible
probability, and ``set_path_plan`` takes random paths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._combined import at_least_counts
from ._group_sequential import (
    FIRST_BLOCKS,
    LEVEL_SLACK,
    PATH_HEADROOM,
    FirstBlock,
    GroupSequentialPaths,
    PathPlan,
    _family_from_paths,
    _looks_iv,
    _seed_iv,
    path_labels,
    path_plan,
)
from ._multiplicity import CORRECTIONS, lone_threshold
from ._permutation import TIE_RTOL
from ._prompt_sets import (
    COMBINATIONS,
    _component_counts,
    _evaluate_prompts,
    _prompt_set_test_iv,
    _spread_set,
    _sum_z_tippett,
    _varies,
    _with_spread,
)
from ._sequential import SequentialDesign, SequentialFamily
from ._threads import blas_for
from ._validation import RngLike, as_positive_int, as_probability, as_rng, choose

__all__ = ["set_path_plan", "set_sequential_family", "set_sequential_paths"]

Matrix = NDArray[np.float64]


def set_sequential_paths(
    originals: Sequence[ArrayLike],
    perturbed: Sequence[ArrayLike],
    looks: Sequence[int],
    *,
    n_paths: int,
    seed: int | Sequence[int],
    first_block: FirstBlock = "random",
    omega: str = "auto",
    similarity: str = "cosine",
    combination: str = "sum_z+tippett",
    **omega_options: Any,
) -> GroupSequentialPaths:
    """The pooled statistic of a set at each of ``looks`` (the first ``k`` outputs of every
    prompt's two arms) on the observed labels and on ``n_paths - 1`` stratified
    within-block paths. ``originals[i]`` and ``perturbed[i]`` are prompt i's arms (at least
    the last look's rows each); omega, similarity and combination as ``prompt_set_test``."""
    values = _looks_iv(looks)
    k_max = values[-1]
    size = as_positive_int(n_paths, "n_paths", minimum=2)
    a_arms, b_arms, spec, options, combination, _ = _prompt_set_test_iv(
        originals, perturbed, omega, similarity, combination, size, omega_options
    )
    for name, arms in (("originals", a_arms), ("perturbed", b_arms)):
        for i, x in enumerate(arms):
            if x.shape[0] < k_max:
                raise ValueError(f"{name}[{i}]: needs {k_max} rows, got {x.shape[0]}")
    key = _seed_iv(seed)
    choose(first_block, "first_block", FIRST_BLOCKS)
    labels = [
        path_labels(values, size, (*key, i), first_block=first_block if i == 0 else "random")
        for i in range(len(a_arms))
    ]
    spread = _with_spread(combination)
    statistics = np.empty((size, len(values)))
    tolerances = np.empty((size, len(values)))
    with blas_for(2 * k_max):
        for j, k in enumerate(values):
            columns = np.r_[0:k, k_max : k_max + k]
            per_prompt, scales = _evaluate_prompts(
                [x[:k] for x in a_arms],
                [y[:k] for y in b_arms],
                [lab[:, columns] for lab in labels],
                spec,
                options,
                similarity,
                spread,
            )
            found = pooled_statistics(per_prompt, scales, combination)
            statistics[:, j], tolerances[:, j] = found
    return GroupSequentialPaths(looks=values, statistics=statistics, tolerances=tolerances)


def pooled_statistics(
    values: NDArray[np.float64], scales: NDArray[np.float64], combination: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The set's statistic of every path and its tie tolerance, from the (paths, prompts,
    components) per-prompt statistics and their (prompts, components) kernel scales: each
    component combined across prompts by ``combination`` (as ``prompt_set_test``); one
    component is the statistic itself (the engine's tie tolerance), several are ranked by
    their non-parametric combination among the paths (larger more extreme, tolerance 0). With
    the spread (``sum_z+tippett+spread``), the last component is each prompt's spread
    difference, joined to the first component's combination as ``prompt_set_test`` does."""
    combine_prompts = COMBINATIONS[combination]
    spread = None
    if _with_spread(combination):  # the last component is each prompt's spread difference
        spread = _spread_set(values[:, :, -1], _varies(values[:, :, -1], scales[:, -1]))
        values, scales = values[:, :, :-1], scales[:, :-1]
    parts = []
    for c in range(values.shape[2]):
        counts, varies = _component_counts(values[:, :, c], scales[:, c])
        if c == 0 and spread is not None:
            parts.append(_sum_z_tippett(values[:, :, 0], counts, varies, spread))
        else:
            parts.append(combine_prompts(values[:, :, c], counts, varies))
    set_values = np.column_stack(parts)
    bounds = [max(1.0, float(np.max(np.abs(col)))) for col in set_values.T]
    if set_values.shape[1] == 1:
        single = set_values[:, 0]
        return single, TIE_RTOL * (np.abs(single) + bounds[0])
    ranked = np.column_stack(
        [
            at_least_counts(col, bound, TIE_RTOL)
            for col, bound in zip(set_values.T, bounds, strict=True)
        ]
    )
    # fewer paths at least as extreme, compared lexicographically on the sorted counts, is
    # more extreme (``_combined``): np.unique orders the distinct rows so, the most extreme first
    _, order = np.unique(np.sort(ranked, axis=1), axis=0, return_inverse=True)
    ranks = (order.max() - order.ravel()).astype(np.float64)
    return ranks, np.zeros_like(ranks)


def set_path_plan(
    design: SequentialDesign, m: int, alpha: float, method: str, n_prompts: int
) -> PathPlan:
    """The paths of a family of ``m`` pooled tests over ``n_prompts`` prompts: ``path_plan``'s
    for one prompt; over several, random paths (``PATH_HEADROOM`` over every look's level),
    since the first blocks of several prompts are far too many to enumerate."""
    plan = path_plan(design, m, alpha, method)
    if as_positive_int(n_prompts, "n_prompts") == 1 or plan.first_block == "random":
        return plan
    t = lone_threshold(m, alpha, method)
    need = math.ceil(PATH_HEADROOM / (min(design.weights) * t) - LEVEL_SLACK)
    return PathPlan(max(need, 2), "random")


def set_sequential_family(
    originals: Sequence[ArrayLike],
    perturbed: Sequence[Sequence[ArrayLike]],
    design: SequentialDesign,
    *,
    alpha: float = 0.05,
    method: str = "holm",
    omega: str = "auto",
    combination: str = "sum_z+tippett",
    n_paths: int | None = None,
    rng: RngLike = None,
) -> SequentialFamily:
    """A sequential family of pooled tests: ``perturbed[p]`` holds perturbation p's arm of
    every prompt (one per item of ``originals``), each tested against ``originals`` look by
    look, stopped by ``group_sequential_stop`` at the family's lone threshold, the stage-wise
    p-values corrected by ``method``. Paths as ``set_path_plan`` says unless ``n_paths`` is
    given (then random). One seed is drawn from ``rng``; test p's prompt i's block j comes
    from ``(seed, p, i, j)``. ``calls`` counts outputs per prompt (every prompt's arms stop
    together)."""
    if not isinstance(design, SequentialDesign):
        raise ValueError(f"design: expected a SequentialDesign, got {type(design).__name__}")
    if isinstance(perturbed, (str, bytes)) or not isinstance(perturbed, Sequence) or not perturbed:
        raise ValueError("perturbed: expected a non-empty sequence of sets of arms")
    level = as_probability(alpha, "alpha")
    method = choose(method, "method", CORRECTIONS)
    plan = set_path_plan(design, len(perturbed), level, method, len(originals))
    size = plan.n_paths if n_paths is None else as_positive_int(n_paths, "n_paths", minimum=2)
    mode = plan.first_block if n_paths is None else "random"
    root = int(as_rng(rng).integers(2**63))
    paths = [
        set_sequential_paths(
            originals,
            arms,
            design.looks,
            n_paths=size,
            seed=(root, p),
            first_block=mode,
            omega=omega,
            combination=combination,
        )
        for p, arms in enumerate(perturbed)
    ]
    return _family_from_paths(paths, design, level, method)
