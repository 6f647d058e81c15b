"""The exact group-sequential permutation test: the statistic, the paths, the spending
boundary, the stage-wise p-value, and error rates under stopping."""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks._synthetic import answer_space, sample
from dbpa.stats import permutation_test, sequential_design
from dbpa.stats._group_sequential import (
    GroupSequentialPaths,
    block_splits,
    group_sequential_crossings,
    group_sequential_paths,
    group_sequential_stop,
    path_plan,
    sequential_family,
    stagewise_p_value,
)
from tests.stats.simulations import (
    sequential_family_errors,
    sequential_null_rejections,
    shift_arms,
)
from tests.stats.synthetic_effects import SCENARIOS
from tests.support.rates import Rate, assert_rates

ALPHA = 0.05
ORIGINAL, SHIFTED = SCENARIOS["shift"]
LOOKS = (8, 12, 16, 20)


def _arms(seed: int, arm=ORIGINAL, k: int = 20) -> tuple[np.ndarray, np.ndarray]:
    return shift_arms(seed, arm, k)


def test_the_statistic_is_the_engines_at_every_look():
    a, b = _arms(1, SHIFTED)
    paths = group_sequential_paths(a, b, LOOKS, n_paths=50, seed=3, omega="energy_cosine")
    for j, k in enumerate(LOOKS):
        engine = permutation_test(a[:k], b[:k], omega="energy_cosine", n_permutations=9, rng=0)
        assert paths.statistics[0, j] == pytest.approx(engine.statistic, rel=1e-12, abs=1e-12)


def test_a_path_is_the_engines_statistic_on_its_relabelled_split():
    """Path r at look j is energy_cosine with the labels its block splits give."""
    a, b = _arms(2)
    paths = group_sequential_paths(a, b, LOOKS, n_paths=5, seed=(4, 1), omega="energy_cosine")
    splits = [block_splits(LOOKS, j, 5, (4, 1)) for j in range(4)]
    r, j, k = 3, 2, LOOKS[2]
    starts = (0, *LOOKS[:-1])
    x = np.concatenate([s[r - 1, : LOOKS[i] - starts[i]] for i, s in enumerate(splits[: j + 1])])
    y = np.concatenate([s[r - 1, LOOKS[i] - starts[i] :] for i, s in enumerate(splits[: j + 1])])
    pooled = np.vstack([a[:k], b[:k]])
    label = np.concatenate([x, y])  # True: labelled original
    engine = permutation_test(
        pooled[label], pooled[~label], omega="energy_cosine", n_permutations=9, rng=0
    )
    assert paths.statistics[r, j] == pytest.approx(engine.statistic, rel=1e-12, abs=1e-12)


def test_the_paths_of_a_look_do_not_change_when_computed_later():
    a, b = _arms(3, SHIFTED)
    full = group_sequential_paths(a, b, LOOKS, n_paths=400, seed=(9, 2))
    for j in range(1, 4):
        early = group_sequential_paths(a[: LOOKS[j - 1]], b[: LOOKS[j - 1]], LOOKS[:j],
                                       n_paths=400, seed=(9, 2))  # fmt: skip
        np.testing.assert_array_equal(early.statistics, full.statistics[:, :j])
    splits = block_splits(LOOKS, 1, 400, 7)
    assert splits.shape == (399, 8)
    assert (splits.sum(axis=1) == 4).all()  # balanced: n_j of the 2 n_j labelled original
    np.testing.assert_array_equal(splits, block_splits(LOOKS[:2], 1, 400, 7))
    assert not np.array_equal(splits, block_splits(LOOKS, 1, 400, 8))


def _paths(statistics: np.ndarray) -> GroupSequentialPaths:
    return GroupSequentialPaths(
        looks=LOOKS[: statistics.shape[1]],
        statistics=statistics,
        tolerances=np.full(statistics.shape, 1e-12),
    )


@pytest.mark.parametrize("ties", [False, True])
def test_no_look_lets_more_paths_cross_than_its_level(ties):
    """At most floor(alpha_j (R + 1)) paths cross at look j, ties or not; without ties the
    budget is used exactly."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        size = int(rng.integers(50, 400))
        z = rng.normal(size=(size, 4)).cumsum(axis=1)  # correlated looks, as real ones
        if ties:
            z = np.round(z)
        levels = rng.uniform(0, 0.1, size=4)
        crossings = group_sequential_crossings(_paths(z), levels)
        counts = np.bincount(crossings, minlength=5)[:4]
        budgets = np.floor(levels * size + 1e-9)
        assert (counts <= budgets).all()
        if not ties:
            assert (counts == budgets).all()


def test_the_stagewise_p_value_is_valid_at_every_level():
    """Each path's stage-wise p-value, computed as if it were the observed one (row 0):
    at most u (R + 1) paths have p <= u, for every u (the counting behind P(p <= u) <= u);
    a path that crossed has p <= t."""
    rng = np.random.default_rng(6)
    for ties in (False, True):
        size = 300
        z = rng.normal(size=(size, 4)).cumsum(axis=1)
        if ties:
            z = np.round(z * 2)
        levels = np.array([0.05, 0.05, 0.05, 0.85]) * 0.1
        p = np.empty(size)
        crossed = np.empty(size, dtype=bool)
        for r in range(size):
            order = np.r_[r, np.delete(np.arange(size), r)]
            paths = _paths(z[order])
            crossings = group_sequential_crossings(paths, levels)
            p[r] = stagewise_p_value(paths, crossings, last=3)
            crossed[r] = crossings[0] < 4
        for u in np.unique(p):
            assert np.count_nonzero(p <= u) <= u * size + 1e-9
        assert (p[crossed] <= 0.1 + 1e-12).all()
        assert crossed.sum() > 0


def test_the_stopping_rule_look_by_look():
    design = sequential_design(20)
    a, b = _arms(7)
    paths = group_sequential_paths(a, b, LOOKS, n_paths=400, seed=1)
    look_p = paths.look_p_values()
    for j in range(4):
        prefix = GroupSequentialPaths(
            LOOKS[: j + 1], paths.statistics[:, : j + 1], paths.tolerances[:, : j + 1]
        )
        stop = group_sequential_stop(prefix, design, 0.05)
        if stop is not None:
            break
    assert stop is not None
    if stop.reason == "futile":
        assert stop.p_value == 1.0
        assert look_p[j] > 0.2
    assert stop.p_values == pytest.approx(tuple(look_p[: j + 1]))


def test_a_large_effect_stops_at_the_first_look_and_is_rejected():
    rng = np.random.default_rng(3)
    space = answer_space(rng)
    design = sequential_design(20)
    original = sample(rng, space, ORIGINAL, 20)
    big = sample(rng, space, SHIFTED.__class__(**{**SHIFTED.__dict__, "drift": 1.0}), 20)
    null = sample(rng, space, ORIGINAL, 20)
    family = sequential_family(
        original, [big, null], design, omega="energy_cosine", n_paths=4000, rng=rng
    )
    first, second = family.tests
    assert (first.reason, first.stopped_at) == ("changed", 8)
    assert first.p_value <= ALPHA / 2 * design.weights[0]
    assert second.reason in {"futile", "k_max"}
    assert family.reject.tolist() == [True, False]
    assert family.calls == max(first.stopped_at, second.stopped_at) + 8 + second.stopped_at
    assert family.fixed_calls == 60


def test_validation_names_the_argument():
    design = sequential_design(10, first=6)
    ok = np.ones((10, 4))
    with pytest.raises(ValueError, match=r"^design: expected a SequentialDesign"):
        sequential_family(ok, [ok], "design")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^omega: unknown"):
        sequential_family(ok, [ok], design, omega="cosine")
    with pytest.raises(ValueError, match=r"^original: needs k_max = 10 rows"):
        sequential_family(ok[:5], [ok], design)
    with pytest.raises(ValueError, match=r"^perturbed: arm 0 needs k_max = 10 rows of 4 columns"):
        sequential_family(ok, [np.ones((10, 3))], design)
    with pytest.raises(ValueError, match=r"^perturbed: needs at least one perturbed arm"):
        sequential_family(ok, [], design)
    with pytest.raises(ValueError, match=r"^method: unknown"):
        sequential_family(ok, [ok], design, method="sidak")
    with pytest.raises(ValueError, match=r"^looks: must be increasing"):
        group_sequential_paths(ok, ok, (8, 6), n_paths=10, seed=0)
    with pytest.raises(ValueError, match=r"^b: needs 10 rows"):
        group_sequential_paths(ok, ok[:4], (6, 10), n_paths=10, seed=0)
    with pytest.raises(ValueError, match=r"^seed: expected a non-negative int"):
        block_splits((6, 10), 0, 10, -1)
    with pytest.raises(ValueError, match=r"^j: a block of the 2 looks"):
        block_splits((6, 10), 2, 10, 0)
    with pytest.raises(ValueError, match=r"^n_paths: must be >= 2"):
        block_splits((6, 10), 0, 1, 0)
    paths = _paths(np.zeros((10, 2)))
    with pytest.raises(ValueError, match=re.escape("levels: one per look taken (2)")):
        group_sequential_crossings(paths, [0.1])
    with pytest.raises(ValueError, match=r"^threshold"):
        group_sequential_stop(paths, sequential_design(20), 0.0)
    with pytest.raises(ValueError, match=r"^paths: looks \(8, 12\) are not a prefix"):
        group_sequential_stop(paths, sequential_design(20, first=6), 0.05)
    with pytest.raises(ValueError, match=r"^paths: expected GroupSequentialPaths"):
        group_sequential_stop("paths", sequential_design(20), 0.05)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^paths: expected GroupSequentialPaths"):
        group_sequential_crossings("paths", [0.1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^levels: must be in \[0, 1\]"):
        group_sequential_crossings(paths, [0.1, 1.5])
    with pytest.raises(ValueError, match=re.escape("crossings: one per path (10)")):
        stagewise_p_value(paths, [0, 1], last=1)
    with pytest.raises(ValueError, match=r"^last: the observed path stops at look 3"):
        stagewise_p_value(paths, [5] * 10, last=3)
    with pytest.raises(ValueError, match=r"^looks: expected a sequence of integers"):
        group_sequential_paths(ok, ok, 10, n_paths=10, seed=0)  # type: ignore[arg-type]


def test_split_statistics_validation_names_the_argument():
    from dbpa.stats._permutation import split_statistics

    a = np.ones((4, 3))
    with pytest.raises(ValueError, match=re.escape("splits: expected (S, 8) boolean masks")):
        split_statistics(a, a, np.ones((2, 7), dtype=bool))
    with pytest.raises(ValueError, match=re.escape("splits: expected (S, 8) boolean masks")):
        split_statistics(a, a, np.ones((2, 8)))
    with pytest.raises(ValueError, match=r"^splits: every mask must put k_a = 4 rows"):
        split_statistics(a, a, np.ones((2, 8), dtype=bool))
    with pytest.raises(ValueError, match=r"^omega: unknown"):
        split_statistics(a, a, np.ones((2, 8), dtype=bool), omega="cosine")


@pytest.mark.parametrize(("futility", "seed"), [(None, 11), (0.2, 21)])
def test_type_one_error_of_single_tests(futility, seed):
    """Null single tests (threshold alpha, R = 399: the first look's level 0.0025 needs R + 1
    >= 400), without futility stops (the worst case: the boundary spends alpha exactly) and
    with them: P(reject) <= alpha, checked sequentially (``tests/support/rates.py``: failed
    at 1.5 alpha with probability 0.9). The README's rates (1000 tests each) are ``python
    -m benchmarks.bench_rates --study stopping``."""
    tests = sequential_null_rejections(seed, sequential_design(20, futility=futility))
    assert_rates(tests, Rate(ALPHA, f"single null tests, futility {futility}"))


def test_type_one_error_of_single_tests_under_auto():
    """omega auto ranks each path by the combination of its components among the look's
    paths: null single tests at alpha, checked sequentially. (Holm families of 4 under auto,
    0.070 of 200 in the README, are in the benchmark.)"""
    tests = sequential_null_rejections(24, sequential_design(20), omega="auto")
    assert_rates(tests, Rate(ALPHA, "single null tests, auto"))


@pytest.mark.parametrize("method", ["holm", "bh", "by"])
def test_error_rate_of_null_families(method):
    """Null families of 4 per correction (under the global null the FWER and FDR are one
    and the same): at most alpha, checked sequentially. Bonferroni's null families are
    Holm's, audit for audit: the tests stop at the same lone threshold alpha/m on the same
    paths, and either correction rejects some test exactly when the smallest p-value is at
    most alpha/m."""
    families = (any_false for any_false, _ in sequential_family_errors(12, method))
    assert_rates(families, Rate(ALPHA, f"{method}: null families"))


@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh", "by"])
def test_error_rate_of_families_with_two_changes(method):
    """Families of 4 with 2 shifted: the FWER for Holm and Bonferroni, the FDR for BH and BY
    (each false discovery proportion enters as a Bernoulli draw of that probability), at most
    alpha, checked sequentially."""
    errors = sequential_family_errors(23, method, effects=2)
    if method in {"holm", "bonferroni"}:
        outcomes = (float(any_false) for any_false, _ in errors)
    else:
        outcomes = (fdp for _, fdp in errors)
    assert_rates(outcomes, Rate(ALPHA, f"{method}: 2 of 4 shifted"))


@pytest.mark.parametrize(
    ("final_weight", "omega", "seed"),
    [(0.5, "energy_cosine", 31), (0.2, "auto", 33)],
    ids=["last-0.5", "last-0.2-auto"],
)
def test_error_rate_of_families_without_futility(final_weight, omega, seed):
    """The designs ``python -m benchmarks cost`` measures for the persona study (no futility
    stops, ``final_weight`` of the level kept for the last look, the interim looks sharing the
    rest; the second under the product's default omega): Holm families of 4 with 2 shifted,
    FWER at most alpha, checked sequentially. Without futility the boundary spends the level
    exactly (the worst case for the error rate)."""
    design = sequential_design(20, final_weight=final_weight, futility=None)
    errors = sequential_family_errors(seed, "holm", effects=2, omega=omega, design=design)
    outcomes = (any_false for any_false, _ in errors)
    assert_rates(outcomes, Rate(ALPHA, f"holm: no futility, last {final_weight}, {omega}"))


def test_an_exhaustive_first_block_runs_through_every_split_equally_often():
    looks = (4, 6, 8)  # C(8, 4) = 70 splits of the first block
    splits = block_splits(looks, 0, 140, 0, first_block="all")
    assert splits.shape == (139, 8)
    assert (splits.sum(axis=1) == 4).all()
    rows, counts = np.unique(np.vstack([np.r_[[True] * 4, [False] * 4], splits]), axis=0,
                             return_counts=True)  # fmt: skip
    assert len(rows) == 70
    assert (counts == 2).all()  # with path 0 (the identity), every split twice
    # the later blocks are the random ones, drawn from (seed, j) as before
    np.testing.assert_array_equal(
        block_splits(looks, 1, 140, 0, first_block="all"), block_splits(looks, 1, 140, 0)
    )
    with pytest.raises(ValueError, match=r"^n_paths: with first_block='all', a multiple of"):
        block_splits(looks, 0, 100, 0, first_block="all")
    with pytest.raises(ValueError, match=r"^first_block: unknown"):
        block_splits(looks, 0, 140, 0, first_block="some")


def test_an_obvious_change_crosses_the_first_look_with_an_exhaustive_first_block():
    """At k = 8 the observed split and its mirror are the largest of the 12870; random paths
    copy them about 2 R / 12870 times, an enumeration exactly twice per 12870 paths."""
    rng = np.random.default_rng(3)
    space = answer_space(rng)
    original = sample(rng, space, ORIGINAL, 20)
    big = sample(rng, space, SHIFTED.__class__(**{**SHIFTED.__dict__, "drift": 1.0}), 20)
    paths = group_sequential_paths(original, big, (8,), n_paths=12870, seed=1, first_block="all")
    assert np.count_nonzero(paths.statistics[:, 0] >= paths.statistics[0, 0] - 1e-12) == 2


def test_type_one_error_with_an_exhaustive_first_block():
    """Null single tests, looks at 4, 6, 8 (the first block's 70 splits enumerated 6 times,
    R + 1 = 420), no futility: P(reject) <= alpha, checked sequentially."""
    design = sequential_design(8, first=4, n_looks=3, futility=None)
    tests = sequential_null_rejections(13, design, n_paths=420, first_block="all")
    assert_rates(tests, Rate(ALPHA, "single null tests, exhaustive first block"))


def test_the_path_plan_gives_every_look_its_headroom():
    """Holm over 10 at 0.05: t = 0.005; interim weight 0.1 needs 4 / 0.0005 = 8000 paths, the
    first block's C(16, 8) = 12870 splits enumerated once; with a first look of 10 there are
    C(20, 10) = 184756 of them, too many: random paths, and with 3 looks the interim weight is
    0.15, so 4 / 0.00075 = 5333.3 -> 5334."""
    design = sequential_design(20, final_weight=0.7)
    plan = path_plan(design, 10, ALPHA, "holm")
    assert (plan.n_paths, plan.first_block) == (12870, "all")
    assert path_plan(design, 50, ALPHA, "holm").n_paths == 4 * 12870  # 40000 needed
    wide = sequential_design(20, first=10, n_looks=3, final_weight=0.7)
    assert path_plan(wide, 10, ALPHA, "holm") == type(plan)(n_paths=5334, first_block="random")
    with pytest.raises(ValueError, match=r"^design: expected a SequentialDesign"):
        path_plan("design", 10, ALPHA, "holm")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^m: must be >= 1"):
        path_plan(design, 0, ALPHA, "holm")


def test_auto_paths_rank_by_the_engines_combination():
    """With omega auto a path's value is its rank by Tippett's combination of the component
    values among the look's paths: the observed path's share of paths at least as extreme is
    the combination's p-value of those same component values (``_combined.combine``)."""
    from dbpa.stats._combined import combine
    from dbpa.stats._omega import OMEGAS
    from dbpa.stats._permutation import TIE_RTOL, split_statistics

    a, b = _arms(4, SHIFTED)
    paths = group_sequential_paths(a, b, (8, 12), n_paths=300, seed=5)
    splits = np.zeros((300, 24), dtype=bool)
    splits[:, :12] = True
    # the paths' labels at the second look, rebuilt from the block splits
    first, second = block_splits((8, 12), 0, 300, 5), block_splits((8, 12), 1, 300, 5)
    splits[1:, 0:8], splits[1:, 12:20] = first[:, :8], first[:, 8:]
    splits[1:, 8:12], splits[1:, 20:24] = second[:, :4], second[:, 4:]
    components = OMEGAS["auto"].components
    singles = [split_statistics(a[:12], b[:12], splits, omega=name) for name in components]
    values = np.column_stack([s.values for s in singles])
    scales = [float(np.median(s.tolerances / TIE_RTOL - np.abs(s.values))) for s in singles]
    expected = combine(values, scales, TIE_RTOL).p_value
    ranks = paths.statistics[:, 1]
    assert np.count_nonzero(ranks >= ranks[0]) / 300 == pytest.approx(expected)
    assert paths.look_p_values()[1] == pytest.approx(expected)
