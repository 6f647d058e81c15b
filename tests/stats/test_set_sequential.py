"""The group-sequential pooled test over a set of prompts: its paths, their statistic, the
path plan, and its error rate and early stops under the group-sequential rule."""

from __future__ import annotations

import numpy as np
import pytest

from dbpa.stats import (
    sequential_design,
    set_path_plan,
    set_sequential_family,
    set_sequential_paths,
)
from dbpa.stats._group_sequential import path_labels, path_plan
from dbpa.stats._permutation import split_statistics
from tests.stats.simulations import moved_prompt_set, set_sequential_rejections
from tests.support.rates import Rate, assert_rates

ALPHA = 0.05
LOOKS = (8, 12, 16, 20)


def _set(seed: int, n_prompts: int = 3, moved: int = 0, k: int = 20):
    originals, arms = moved_prompt_set(np.random.default_rng(seed), n_prompts, k, 1, moved)
    return originals, arms[0]


def test_a_path_is_the_sum_of_each_prompts_statistic_on_its_own_split():
    """With one omega and the plain sum, path r's value at look j is the sum over prompts of
    omega on that prompt's split of its first k_j outputs per arm, the split drawn from
    (seed, prompt, block): computed here by the single-test engine, prompt by prompt."""
    originals, perturbed = _set(1)
    paths = set_sequential_paths(
        originals, perturbed, LOOKS, n_paths=50, seed=(7, 3), omega="energy_l2", combination="sum"
    )
    assert paths.statistics.shape == (50, 4)
    for j, k in enumerate(LOOKS):
        total = np.zeros(50)
        for i, (a, b) in enumerate(zip(originals, perturbed, strict=True)):
            labels = path_labels(LOOKS, 50, (7, 3, i), first_block="random")
            masks = labels[:, np.r_[0:k, 20 : 20 + k]]
            total += split_statistics(a[:k], b[:k], masks, omega="energy_l2").values
        np.testing.assert_allclose(paths.statistics[:, j], total, rtol=1e-10)
    # the prompts' splits differ: each prompt is relabelled on its own
    first, second = (path_labels(LOOKS, 50, (7, 3, i), first_block="random") for i in (0, 1))
    assert not np.array_equal(first, second)


def test_sum_z_standardises_each_prompt_over_the_looks_paths():
    originals, perturbed = _set(2)
    common = {"n_paths": 60, "seed": 4, "omega": "energy_l2"}
    raw = set_sequential_paths(originals, perturbed, (8,), **common, combination="sum")
    z = set_sequential_paths(originals, perturbed, (8,), **common, combination="sum_z")
    per_prompt = []
    for i, (a, b) in enumerate(zip(originals, perturbed, strict=True)):
        masks = path_labels((8,), 60, (4, i), first_block="random")
        per_prompt.append(split_statistics(a[:8], b[:8], masks, omega="energy_l2").values)
    values = np.column_stack(per_prompt)
    expected = ((values - values.mean(axis=0)) / values.std(axis=0)).sum(axis=1)
    np.testing.assert_allclose(z.statistics[:, 0], expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(raw.statistics[:, 0], values.sum(axis=1), rtol=1e-10)


def test_the_paths_of_a_look_do_not_change_when_computed_later():
    """A look recomputed after later looks (or after a resume) sees the same paths: the
    first looks' columns of the full computation are the shorter computation's."""
    originals, perturbed = _set(3)
    early = set_sequential_paths(originals, perturbed, LOOKS[:2], n_paths=80, seed=(5, 1))
    full = set_sequential_paths(originals, perturbed, LOOKS, n_paths=80, seed=(5, 1))
    np.testing.assert_array_equal(full.statistics[:, :2], early.statistics)
    again = set_sequential_paths(originals, perturbed, LOOKS, n_paths=80, seed=(5, 1))
    np.testing.assert_array_equal(again.statistics, full.statistics)
    other = set_sequential_paths(originals, perturbed, LOOKS, n_paths=80, seed=(5, 2))
    assert not np.array_equal(other.statistics[1:], full.statistics[1:])


def test_auto_paths_rank_by_the_set_tests_ordering():
    """auto: a path's value is its rank among the look's paths, so the look's p-value is the
    share of paths ranked at least as high as the observed one (at least 1 / (R + 1))."""
    originals, perturbed = _set(4)
    paths = set_sequential_paths(originals, perturbed, LOOKS, n_paths=100, seed=9)
    assert (paths.tolerances == 0).all()
    for j in range(4):
        ranks = paths.statistics[:, j]
        assert ranks.min() == 0
        assert np.allclose(ranks, np.round(ranks))
        share = np.count_nonzero(ranks >= ranks[0]) / 100
        assert paths.look_p_values()[j] == pytest.approx(share)


def test_an_exhaustive_first_block_enumerates_the_first_prompts_splits_only():
    """With first_block='all' the first prompt's first block runs through its C(8, 4) = 70
    splits equally often; the other prompts' blocks stay random."""
    looks = (4, 6)
    labels = path_labels(looks, 140, (0, 0), first_block="all")
    _, counts = np.unique(labels[:, np.r_[0:4, 6:10]], axis=0, return_counts=True)
    assert len(counts) == 70
    assert (counts == 2).all()
    originals, perturbed = _set(5, k=6)
    paths = set_sequential_paths(
        originals,
        perturbed,
        looks,
        n_paths=140,
        seed=0,
        first_block="all",
        omega="energy_l2",
        combination="sum",
    )
    every = [labels] + [path_labels(looks, 140, (0, i), first_block="random") for i in (1, 2)]
    expected = sum(
        split_statistics(a[:4], b[:4], lab[:, np.r_[0:4, 6:10]], omega="energy_l2").values
        for a, b, lab in zip(originals, perturbed, every, strict=True)
    )
    np.testing.assert_allclose(paths.statistics[:, 0], expected, rtol=1e-10)


def test_the_path_plan_of_a_set():
    """One prompt: the single test's plan (the first block enumerated). Several: random paths,
    4 over the smallest look level (Holm over 10: 4 / (0.1 x 0.005) = 8000)."""
    design = sequential_design(20)
    assert set_path_plan(design, 10, ALPHA, "holm", 1) == path_plan(design, 10, ALPHA, "holm")
    plan = set_path_plan(design, 10, ALPHA, "holm", 5)
    assert (plan.n_paths, plan.first_block) == (8000, "random")
    with pytest.raises(ValueError, match=r"^n_prompts: must be >= 1"):
        set_path_plan(design, 10, ALPHA, "holm", 0)


def test_validation_names_the_argument():
    originals, perturbed = _set(6, n_prompts=2)
    short = [x[:12] for x in perturbed]
    cases = [
        ({"looks": (8, 8)}, r"^looks: must be increasing"),
        ({"n_paths": 1}, r"^n_paths: must be >= 2"),
        ({"perturbed": short}, r"^perturbed\[0\]: needs 20 rows, got 12"),
        ({"perturbed": perturbed[:1]}, r"^perturbed: 1 arms for 2 originals"),
        ({"first_block": "some"}, r"^first_block: unknown"),
        ({"seed": -1}, r"^seed: expected a non-negative int"),
        ({"combination": "mean"}, r"^combination: unknown"),
        ({"omega": "cosine"}, r"^omega: unknown"),
    ]
    for change, message in cases:
        kwargs = {"looks": LOOKS, "n_paths": 10, "seed": 0, "perturbed": perturbed, **change}
        looks, given = kwargs.pop("looks"), kwargs.pop("perturbed")
        with pytest.raises(ValueError, match=message):
            set_sequential_paths(originals, given, looks, **kwargs)
    design = sequential_design(20)
    with pytest.raises(ValueError, match=r"^design: expected a SequentialDesign"):
        set_sequential_family(originals, [perturbed], "design")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^perturbed: expected a non-empty sequence"):
        set_sequential_family(originals, [], design)
    with pytest.raises(ValueError, match=r"^alpha: "):
        set_sequential_family(originals, [perturbed], design, alpha=2.0)
    with pytest.raises(ValueError, match=r"^method: unknown"):
        set_sequential_family(originals, [perturbed], design, method="sidak")


@pytest.mark.parametrize(
    ("n_prompts", "futility", "seed"), [(5, None, 31), (20, 0.2, 37)], ids=["5-none", "20-0.2"]
)
def test_type_one_error_of_sequential_pooled_tests(n_prompts, futility, seed):
    """Null pooled tests (threshold alpha, the default looks at 8, 12, 16, 20, R + 1 = 400
    random stratified paths), every prompt with its own answer distribution: P(reject) <=
    alpha, checked sequentially (``tests/support/rates.py``: failed at 1.5 alpha with
    probability 0.9). Without futility stops (5 prompts) the boundary spends alpha exactly,
    the worst case; 20 prompts with the default futility."""
    design = sequential_design(20, futility=futility)
    tests = set_sequential_rejections(n_prompts, seed, design)
    assert_rates(tests, Rate(ALPHA, f"{n_prompts} prompts, futility {futility}"))


@pytest.mark.parametrize(
    ("first", "n_looks", "final_weight", "looks", "seed"),
    [(4, 3, 0.7, (4, 6, 8), 43), (5, 4, 0.5, (5, 6, 7, 8), 47)],
    ids=["looks-4-6-8", "looks-5-to-8"],
)
def test_type_one_error_of_the_prompt_set_cost_designs(first, n_looks, final_weight, looks, seed):
    """The designs ``python -m benchmarks cost`` measures for ``examples/prompt_set.yaml``
    (k = 8), without futility stops (the boundary is the same with them, futility being
    non-binding; without them it spends alpha exactly, the worst case): null pooled tests
    over 5 prompts at threshold alpha, R + 1 = 400 random paths, checked sequentially."""
    design = sequential_design(
        8, first=first, n_looks=n_looks, final_weight=final_weight, futility=None
    )
    assert design.looks == looks
    tests = set_sequential_rejections(5, seed, design)
    assert_rates(tests, Rate(ALPHA, f"5 prompts, looks {looks}"))


def test_a_real_change_stops_early():
    """Holm over 2 perturbations of 5 prompts, one moving every prompt's answers: it stops as
    changed before k max (fewer outputs than the fixed design), is rejected, and the one
    that changed nothing is not."""
    rng = np.random.default_rng(8)
    originals, arms = moved_prompt_set(rng, 5, 20, 2, 1)
    family = set_sequential_family(originals, arms, sequential_design(20), rng=3)
    moved, unchanged = family.tests
    assert moved.reason == "changed"
    assert moved.stopped_at < 20
    assert moved.p_value <= ALPHA / 2
    assert family.reject.tolist() == [True, False]
    assert unchanged.reason in {"futile", "k_max"}
    assert family.calls < family.fixed_calls
