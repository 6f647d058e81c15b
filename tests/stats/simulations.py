"""Streams of simulated audits, one outcome per audit, for the error-rate and coverage studies.

The tests check each rate sequentially on a prefix of a stream (``tests/support/rates.py``:
a clearly valid method stops after tens of audits); ``benchmarks/bench_rates.py`` takes a
fixed number of audits of the same streams and reports the rates the README quotes. Each
stream draws from one seeded generator in the order the fixed-size simulations it replaced
did, so its first n outcomes are theirs.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
from collections.abc import Callable, Iterator

import numpy as np

from benchmarks._synthetic import Arm, answer_space, sample
from dbpa.analysis import MIN_BOOTSTRAP, AnalysisSpec, SequentialSpec
from dbpa.stats import (
    EffectInterval,
    SequentialDesign,
    calibrate_set_margin,
    correct,
    decide_family,
    effect_interval,
    equivalence_p_value,
    permutation_test,
    prompt_drilldown,
    prompt_set_test,
    sequential_design,
    sequential_family,
    sequential_p_value,
    set_equivalence,
    set_sequential_family,
)
from dbpa.stats._boundary import boundary_lower, boundary_p_value
from dbpa.stats._interval import _bootstrap, _relabelled, energy_u_statistic
from dbpa.stats._omega import merged_ties
from dbpa.stats._set_equivalence import pooled_draws
from dbpa.stats._similarity import l2_distance, pool_arms
from dbpa.stats._threads import blas_for
from tests.stats.batched import prompt_set_tests
from tests.stats.conftest import clustered
from tests.stats.synthetic_effects import SCENARIOS, scenario, true_effect

ALPHA = 0.05
ORIGINAL, SHIFTED = SCENARIOS["shift"]


def intervals_at_margin(
    name: str, k: int, seed: int, *, k_b: int | None = None, n_bootstrap: int = 500
) -> Iterator[EffectInterval]:
    """Effect intervals of audits of scenario ``name`` (``k`` outputs per arm, or ``k`` and
    ``k_b``), whose margin is to be put at the true effect."""
    rng = np.random.default_rng(seed)
    s = scenario(name)
    while True:
        a, b = s.draw(rng, k)
        if k_b is not None:
            b = s.draw(rng, k_b)[1]
        yield effect_interval(a, b, n_bootstrap=n_bootstrap, rng=rng)


def equivalent_at_margin(name: str, k: int, seed: int, **kwargs: int | None) -> Iterator[bool]:
    """Whether each audit of ``intervals_at_margin`` shows "equivalent" at alpha with the
    margin at the true effect (a false claim: the effect is not below the margin)."""
    margin = true_effect(name)
    for interval in intervals_at_margin(name, k, seed, **kwargs):
        yield equivalence_p_value(interval, margin) <= ALPHA


def equivalence_families(
    name: str, k: int, margin: float, seed: int, m: int = 1, method: str = "holm"
) -> Iterator[bool]:
    """Whether each audit (a family of ``m`` perturbations of scenario ``name``, B = 500)
    declares any equivalence at ``margin`` under ``method``."""
    rng = np.random.default_rng(seed)
    s = scenario(name)
    while True:
        intervals = [effect_interval(*s.draw(rng, k), n_bootstrap=500, rng=rng) for _ in range(m)]
        family = decide_family([1.0] * m, intervals, margin, alpha=ALPHA, method=method)
        yield "equivalent" in family.decisions


def sequential_equivalences(name: str, m: int, seed: int) -> Iterator[bool]:
    """Whether each family of ``m`` perturbations whose true effect equals the margin
    declares any equivalence, with every look's equivalence p-value combined as the flow
    does (``min_j p_eq,j / w_j``, then the family's Holm correction). Every look is taken:
    the stopped test's looks are a prefix, so this is the worst case of any stopping rule."""
    rng = np.random.default_rng(seed)
    s, margin = scenario(name), true_effect(name)
    design = SequentialSpec().design(20, equivalence=True)
    # the bootstrap of a look's interval, as the flow sizes it (dbpa.analysis.interval_of_test)
    n_bootstrap = max(AnalysisSpec().n_permutations, MIN_BOOTSTRAP)
    while True:
        p = []
        for _ in range(m):
            a, b = s.draw(rng, design.k_max)
            p_eq = [
                equivalence_p_value(
                    effect_interval(a[:k], b[:k], n_bootstrap=n_bootstrap, rng=rng), margin
                )
                for k in design.looks
            ]
            p.append(sequential_p_value(p_eq, design.weights))
        yield bool(correct(p, method="holm", alpha=ALPHA).reject.any())


def shift_arms(seed: int, arm: Arm = ORIGINAL, k: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """The shift scenario's original arm and ``arm``, ``k`` outputs each, in a fresh answer
    space drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    space = answer_space(rng)
    return sample(rng, space, ORIGINAL, k), sample(rng, space, arm, k)


def sequential_null_rejections(
    seed: int,
    design: SequentialDesign,
    *,
    n_paths: int = 400,
    first_block: str = "random",
    omega: str = "energy_cosine",
) -> Iterator[bool]:
    """Whether each null single group-sequential test (threshold alpha, ``design.k_max``
    outputs per arm) rejects."""
    rng = np.random.default_rng(seed)
    while True:
        a, b = shift_arms(int(rng.integers(2**31)), k=design.k_max)
        family = sequential_family(
            a,
            [b],
            design,
            omega=omega,
            n_paths=n_paths,
            first_block=first_block,
            rng=rng,
        )
        yield bool(family.reject[0])


def sequential_family_errors(
    seed: int,
    method: str = "holm",
    effects: int = 0,
    omega: str = "energy_cosine",
    design: SequentialDesign | None = None,
) -> Iterator[tuple[bool, float]]:
    """Per family of 4 group-sequential tests (k_max = 20, the default design unless
    ``design``, R + 1 = 800 random paths: Holm's first look, 0.1 x 0.05/4 x 800 = 1 path, may
    cross; BY's cannot, which only costs power), the first ``effects`` shifted: whether any
    unshifted one is rejected, and the false discovery proportion."""
    rng = np.random.default_rng(seed)
    design = sequential_design(20) if design is None else design
    while True:
        space = answer_space(rng)
        original = sample(rng, space, ORIGINAL, 20)
        arms = [sample(rng, space, SHIFTED if i < effects else ORIGINAL, 20) for i in range(4)]
        family = sequential_family(
            original, arms, design, method=method, omega=omega, n_paths=800, rng=rng
        )
        false = int(family.reject[effects:].sum())
        yield false > 0, false / max(1, int(family.reject.sum()))


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def answers(
    rng: np.random.Generator,
    k: int,
    *,
    drift: float = 0.0,
    detail: float = 0.5,
    d: int = 40,
    n_types: int = 8,
) -> np.ndarray:
    """Unit vectors: a shared component, one of n_types answer directions, detail, a drift."""
    basis = np.eye(d)
    kinds = rng.integers(n_types, size=k)
    x = (
        0.6 * basis[0]
        + 0.7 * basis[1 + kinds]
        + detail * rng.normal(size=(k, 8)) @ basis[20:28] / math.sqrt(8)
        + 0.1 * rng.normal(size=(k, d)) / math.sqrt(d)
        + drift * basis[-1]
    )
    return _unit(x)


def _isotropic(rng: np.random.Generator, k: int) -> np.ndarray:
    return rng.normal(size=(k, 16))


def _diffuse_clusters(rng: np.random.Generator, k: int) -> np.ndarray:
    centres = np.random.default_rng(0).normal(size=(8, 16)) * 2.0
    return clustered(rng, k, 16, weights=(1,) * 8, spread=0.5, centres=centres)


def _heavy_tailed(rng: np.random.Generator, k: int) -> np.ndarray:
    return rng.standard_t(2.0, size=(k, 16)) + 1.0


def _unit_answers(rng: np.random.Generator, k: int) -> np.ndarray:
    return answers(rng, k, n_types=4)


NULL_SHAPES: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "isotropic": _isotropic,
    "diffuse clusters": _diffuse_clusters,
    "heavy tailed": _heavy_tailed,
    "unit answers": _unit_answers,
}
"""Null shapes of omega auto's type-I simulation: both arms from one of these."""
NULL_K = (6, 10, 20, 50)
B_NULL = 99
"""Permutations of the type-I simulation: alpha (B + 1) is an integer."""


def auto_null_rejections(shape: str, k: int, seed: int) -> Iterator[bool]:
    """Whether each null audit of omega auto (both arms of ``k`` from ``shape``) rejects."""
    draw = NULL_SHAPES[shape]
    rng = np.random.default_rng([seed, k, list(NULL_SHAPES).index(shape)])
    while True:
        a, b = draw(rng, k), draw(rng, k)
        yield permutation_test(a, b, omega="auto", n_permutations=B_NULL, rng=rng).p_value <= ALPHA


def same_text(k: int, d: int = 5, value: float = 1.0) -> np.ndarray:
    """``k`` outputs that are all the same text: one embedding repeated."""
    return np.tile(np.linspace(value, 2.0, d), (k, 1))


def null_prompt_set(
    rng: np.random.Generator,
    n_prompts: int,
    *,
    k: tuple[int, int] = (10, 10),
    unequal: bool = False,
    same_text_prompts: int = 0,
    k_range: tuple[int, int] = (4, 14),
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A set where nothing changed: every prompt its own answer distribution (its own
    answer-type weights and spread), ``k`` per arm or drawn in ``k_range`` (``unequal``;
    4-14 unless given), and ``same_text_prompts`` prompts whose every answer is one text."""
    originals, perturbed = [], []
    low, high = k_range
    for i in range(n_prompts):
        k_a, k_b = (int(x) for x in rng.integers(low, high + 1, size=2)) if unequal else k
        if i < same_text_prompts:
            text = same_text(1, d=16, value=float(rng.uniform(0.1, 0.9)))
            originals.append(np.repeat(text, k_a, axis=0))
            perturbed.append(np.repeat(text, k_b, axis=0))
            continue
        weights = rng.dirichlet(np.ones(3))
        centres = rng.normal(size=(3, 16)) * 2.0 + 1.0
        spread = float(rng.uniform(0.2, 1.0))
        originals.append(clustered(rng, k_a, 16, weights, spread, centres))
        perturbed.append(clustered(rng, k_b, 16, weights, spread, centres))
    return originals, perturbed


def pooled_null_rejections(
    n_prompts: int,
    seed: int,
    *,
    combination: str = "sum_z+tippett+spread",
    unequal: bool = False,
    same_text_prompts: int = 0,
    k_range: tuple[int, int] = (4, 14),
) -> Iterator[bool]:
    """Whether each null pooled test over a set of ``n_prompts`` (``null_prompt_set``, auto,
    B = 99, the s-th audit's relabellings seeded ``s``) rejects at alpha; the audits are
    tested ``max(1, 1600 // n_prompts)`` at a time (at most 64), each as ``prompt_set_test``
    tests it (``batched``)."""
    rng = np.random.default_rng(seed)
    shape = {"unequal": unequal, "same_text_prompts": same_text_prompts, "k_range": k_range}
    size = min(64, max(1, 1600 // n_prompts))
    for first in itertools.count(0, size):
        sets = [null_prompt_set(rng, n_prompts, **shape) for _ in range(size)]
        seeds = range(first, first + size)
        for r in prompt_set_tests(sets, seeds, combination=combination, n_permutations=99):
            yield r.p_value <= ALPHA


def drilldown_errors(
    within: str, seed: int, *, moved: tuple[int, ...] = (2, 2, 0, 0, 0)
) -> Iterator[float]:
    """Simulated families of 5 perturbations over 8 prompts sharing their original arms:
    perturbation j moves ``moved[j]`` prompts (a new answer type). Per family the error is
    the average over the selected perturbations of the within-error (any unchanged prompt
    called moved: holm; the false share of those called moved: bh); 0 when none is selected."""
    rng = np.random.default_rng(seed)
    n_prompts, k = 8, 8
    for f in itertools.count():
        centres = [rng.normal(size=(3, 16)) * 2.0 for _ in range(n_prompts)]
        weights = [rng.dirichlet(np.ones(2)) for _ in range(n_prompts)]
        originals = [
            clustered(rng, k, 16, (*w, 0.0), 0.5, c) for w, c in zip(weights, centres, strict=True)
        ]
        set_p, prompt_p = [], []
        for j, n_moved in enumerate(moved):
            perturbed = [
                clustered(rng, k, 16, (0.0, 0.0, 1.0) if i < n_moved else (*w, 0.0), 0.5, c)
                for i, (w, c) in enumerate(zip(weights, centres, strict=True))
            ]
            r = prompt_set_test(
                originals, perturbed, omega="energy_cosine", n_permutations=199, rng=f * 10 + j
            )
            set_p.append(r.p_value)
            prompt_p.append(r.prompt_p_values)
        d = prompt_drilldown(set_p, prompt_p, alpha=ALPHA, within=within)
        per_selected = []
        for j in np.flatnonzero(d.selected):
            false = d.moved[j][moved[j] :]
            if within == "holm":
                per_selected.append(float(false.any()))
            else:
                per_selected.append(false.sum() / max(1, d.moved[j].sum()))
        yield float(np.mean(per_selected)) if per_selected else 0.0


def boundary_only_interval(
    a: np.ndarray, b: np.ndarray, n_bootstrap: int, rng: np.random.Generator
) -> EffectInterval:
    """What ``set_equivalence`` reads of ``effect_interval(a, b, n_bootstrap=...)``
    (energy_l2): the estimate and the bootstrap's boundary draws, which the interval draws
    first from ``rng``. Its bounds, the relabellings of the lower one and the tilted guard
    (nine tenths of the interval's time at k = 20), are not computed: NaN."""
    distances = merged_ties(l2_distance(np.vstack([a, b])))
    replicates, draws = _bootstrap(distances, len(a), n_bootstrap, rng)
    replicates.setflags(write=False)
    return EffectInterval(
        estimate=energy_u_statistic(distances, len(a)),
        low=math.nan,
        high=math.nan,
        confidence=0.95,
        omega="energy_l2",
        method="boundary draws only (tests)",
        n_bootstrap=int(replicates.size),
        bootstrap=replicates,
        boundary=draws,
        k_a=len(a),
        k_b=len(b),
        distances=distances,
    )


def relabelling_lower(
    a: np.ndarray, b: np.ndarray, confidence: float, n_bootstrap: int, rng: np.random.Generator
) -> float:
    """The lower bound of ``effect_interval(a, b, confidence=..., n_bootstrap=..., rng=rng)``
    (energy_l2) from the relabellings alone, before it is capped by the upper bound
    (``low = min(this, high)``): ``rng`` is drawn from as the interval draws it, up to the
    relabellings (its bootstrap first); the tilted guard of the upper bound, which follows,
    is not computed."""
    z = pool_arms(a, b)
    k_a = len(a)
    with blas_for(z.shape[0]):
        distances = merged_ties(l2_distance(z))
        _bootstrap(distances, k_a, n_bootstrap, rng)
        relabelled = _relabelled(distances, k_a, n_bootstrap, rng)
    return boundary_lower(relabelled, (1.0 - confidence) / 2.0)


def lower_misses(
    name: str, k: int, seed: int, confidence: float, n_bootstrap: int
) -> Iterator[bool]:
    """Whether each audit's ``effect_interval`` (energy_l2) misses the true effect from
    below (``low > truth``), as ``effect_interval(a, b, ..., rng=rng)`` on the audits' own
    stream decides it. Its ``low`` is at most the relabellings' bound
    (``relabelling_lower``, drawn first on a copy of the stream): where that is at most
    the truth the audit is no miss without the tilted guard (nine tenths of the interval's
    time), and the stream goes on from the copy; elsewhere the interval is computed whole
    on the stream."""
    truth = max(true_effect(name), 0.0)  # theta >= 0; the null's estimate is ~ -1e-4
    rng = np.random.default_rng(seed)
    s = scenario(name)
    while True:
        a, b = s.draw(rng, k)
        ahead = copy.deepcopy(rng)
        if relabelling_lower(a, b, confidence, n_bootstrap, ahead) <= truth:
            rng = ahead
            yield False
        else:
            r = effect_interval(a, b, confidence=confidence, n_bootstrap=n_bootstrap, rng=rng)
            yield r.low > truth


def set_equivalences(shape: str, n_prompts: int, k: int, seed: int) -> Iterator[bool]:
    """Whether each audit shows the set equivalent when the mean effect is exactly the
    margin: ``all`` prompts carry the two_texts effect (the least favourable one-prompt
    shape), ``one`` carries it alone (the margin is its effect over P), ``half`` of them
    carry it. Each prompt's interval is ``boundary_only_interval`` (B = 500): the set's
    test is the one on full intervals, on the same law of draws (the stream no longer
    passes through the bounds' relabellings and resamples, so its audits are other ones
    than those before 2026-11-27)."""
    rng = np.random.default_rng(seed)
    carrier, null = scenario("two_texts"), scenario("null")
    carriers = {"all": n_prompts, "one": 1, "half": n_prompts // 2}[shape]
    margin = true_effect("two_texts") * carriers / n_prompts
    while True:
        intervals = [
            boundary_only_interval(*(carrier if i < carriers else null).draw(rng, k), 500, rng)
            for i in range(n_prompts)
        ]
        yield bool(set_equivalence(intervals, margin, rng=rng).equivalent)


def carrier_set_equivalences(k: int, seed: int, *, joint_guard: bool = True) -> Iterator[bool]:
    """Whether each audit shows the set equivalent at the margin when one prompt carries the
    set's whole effect and noise, its perturbed arm collapsing onto one answer
    (``collapse_hard``), and two prompts' answers never vary; the margin is the mean effect
    over the three. ``joint_guard`` False: decided by the pooled least-favourable test
    alone, as before 2026-11-27 (0.08 of 2,800 audits at k = 10)."""
    rng = np.random.default_rng(seed)
    carrier = scenario("collapse_hard")
    margin = true_effect("collapse_hard") / 3
    while True:
        a, b = carrier.draw(rng, k)
        same = np.tile(a[:1], (k, 1))
        intervals = [boundary_only_interval(a, b, 500, rng)] + [
            boundary_only_interval(same, same.copy(), 500, rng) for _ in range(2)
        ]
        if joint_guard:
            yield bool(set_equivalence(intervals, margin, rng=rng).equivalent)
        else:
            yield bool(boundary_p_value(pooled_draws(intervals), 3 * margin) <= ALPHA)


def _mean_distances(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per set n, the mean Euclidean distance between the unit rows of ``u[n]`` and ``v[n]``."""
    cosines = u @ v.transpose(0, 2, 1)
    return np.sqrt(np.clip(2.0 - 2.0 * cosines, 0.0, None)).mean(axis=(1, 2))


@functools.cache
def set_noise_quantile(name: str, n_prompts: int, k: int, quantile: float = 0.95) -> float:
    """What a calibrated set margin estimates, from the definition: the ``quantile`` of the
    mean over ``n_prompts`` prompts of the plug-in energy distance (Euclidean, self-pairs
    included) between two independent samples of ``k`` outputs of scenario ``name``'s
    original arm, from 2000 draws of the set."""
    rng = np.random.default_rng(0)
    s = scenario(name)
    plug_in = []
    for _ in range(2000 * n_prompts // 500):
        x, y = (sample(rng, s.space, s.original, 500 * k).reshape(500, k, -1) for _ in range(2))
        v_stat = 2 * _mean_distances(x, y) - _mean_distances(x, x) - _mean_distances(y, y)
        plug_in.append(np.maximum(v_stat, 0.0))
    per_set = np.concatenate(plug_in).reshape(-1, n_prompts).mean(axis=1)
    return float(np.quantile(per_set, quantile))


def calibrated_set_equivalences(
    name: str, n_prompts: int, k: int, seed: int, *, replicates: int = 3, scale: float = 1.0
) -> Iterator[bool]:
    """Whether each audit shows the set equivalent with its margin calibrated as the flow
    does: every prompt's perturbed arm carries scenario ``name``'s effect, and its original
    arm and ``replicates`` replicate arms (drawn from the original's law) give the pairs of
    ``calibrate_set_margin`` (every two of them, the original shared with the test, at
    quantile 0.95), times the multiple that puts what that margin estimates
    (``set_noise_quantile``) at ``scale`` times the true effect."""
    s = scenario(name)
    multiple = scale * true_effect(name) / set_noise_quantile(name, n_prompts, k)
    rng = np.random.default_rng(seed)
    while True:
        pairs, intervals = [], []
        for _ in range(n_prompts):
            a, b = s.draw(rng, k)
            copies = [sample(rng, s.space, s.original, k) for _ in range(replicates)]
            pairs.append(list(itertools.combinations([a, *copies], 2)))
            intervals.append(boundary_only_interval(a, b, 500, rng))
        margin = multiple * calibrate_set_margin(pairs).margin
        yield bool(set_equivalence(intervals, margin, rng=rng).equivalent)


def moved_prompt_set(
    rng: np.random.Generator, n_prompts: int, k: int, perturbations: int, moved: int
) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """A set's original arms and ``perturbations`` perturbed arms of every prompt, ``k``
    outputs each. Every prompt has its own answer distribution (answer-type weights, centres
    and spread, as ``null_prompt_set``), shared by its original and the perturbed arms that
    changed nothing; the first ``moved`` perturbations shift every answer type of every
    prompt (by 3, each along an axis of its own)."""
    shapes = [
        (rng.dirichlet(np.ones(3)), rng.normal(size=(3, 16)) * 2.0 + 1.0, rng.uniform(0.2, 1.0))
        for _ in range(n_prompts)
    ]
    originals = [clustered(rng, k, 16, w, float(s), c) for w, c, s in shapes]
    arms = [
        [
            clustered(rng, k, 16, w, float(s), c + np.eye(3, 16, 8) * 3.0 if p < moved else c)
            for w, c, s in shapes
        ]
        for p in range(perturbations)
    ]
    return originals, arms


def set_sequential_rejections(
    n_prompts: int, seed: int, design: SequentialDesign, *, n_paths: int = 400
) -> Iterator[bool]:
    """Whether each null sequential pooled test over a set of ``n_prompts`` (``moved_prompt_set``
    with nothing moved, ``design.k_max`` outputs per arm; threshold alpha, auto,
    sum_z+tippett, R + 1 = ``n_paths`` random paths) rejects."""
    rng = np.random.default_rng(seed)
    while True:
        originals, arms = moved_prompt_set(rng, n_prompts, design.k_max, 1, 0)
        family = set_sequential_family(originals, arms, design, n_paths=n_paths, rng=rng)
        yield bool(family.reject[0])
