"""The pooled test over a set of prompts (stratified permutations), its drill-down and the
set-level equivalence test."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dbpa.stats import COMBINATIONS, permutation_test, prompt_set_test
from tests.stats import reference
from tests.stats.conftest import clustered
from tests.stats.test_combined import _tippett_combination, _tolerances

ALPHA = 0.05


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _prompt_arms(rng, k_a, k_b, d=5, shift=0.0):
    base = rng.normal(size=d) * 2.0
    return (
        _unit(base + rng.normal(size=(k_a, d))),
        _unit(base + rng.normal(size=(k_b, d)) + shift),
    )


# --------------------------------------------------------------------------- the definition


def _splits(n, k):
    """Every split of n pooled rows: (first group, second group), the observed one first."""
    return [
        (list(chosen), [i for i in range(n) if i not in chosen])
        for chosen in itertools.combinations(range(n), k)
    ]


def _prompt_values(omega, a, b):
    """(splits, 1) omega of every split of one prompt, computed the textbook way."""
    z = np.vstack([a, b])
    edges = reference.jsd_edges(z, "cosine") if omega == "jsd" else None
    return np.array(
        [
            [reference.statistic(omega, z[first], z[second], "cosine", edges)]
            for first, second in _splits(len(z), len(a))
        ]
    )


def _at_least(column, tol):
    return np.array([np.sum(column >= v - t) for v, t in zip(column, tol, strict=True)])


def _combine_by_hand(values, combination):
    """(rows,) the set statistic of every row from the (rows, prompts) statistics."""
    rows = values.shape[0]
    tol = _tolerances(values)
    counts = np.column_stack([_at_least(values[:, i], tol[:, i]) for i in range(values.shape[1])])
    if combination == "sum_z":
        out = np.zeros(rows)
        for column in values.T:
            if column.max() - column.min() > 1e-9 * (abs(column).max() + 1):
                out += (column - column.mean()) / column.std()
        return out
    if combination == "fisher":
        return -np.log(counts / rows).sum(axis=1)
    if combination == "tippett":
        return -np.log(counts.min(axis=1) / rows)
    return values.sum(axis=1)


def brute_force(originals, perturbed, omega, combination):
    """(p-value, per-prompt p-values) enumerating every stratified relabelling by hand."""
    components = ("jsd", "energy_cosine") if omega == "auto" else (omega,)
    per_prompt = {
        c: [_prompt_values(c, a, b) for a, b in zip(originals, perturbed, strict=True)]
        for c in components
    }
    sizes = [len(v) for v in per_prompt[components[0]]]
    grid = list(itertools.product(*(range(s) for s in sizes)))  # row 0: the observed labels
    set_values, prompt_p = [], []
    for c in components:
        values = np.column_stack([v[[g[i] for g in grid], 0] for i, v in enumerate(per_prompt[c])])
        set_values.append(_combine_by_hand(values, combination))
        prompt_p.append(
            [np.mean(v[:, 0] >= v[0, 0] - 1e-9 * (abs(v[0, 0]) + 1)) for v in per_prompt[c]]
        )
    if len(components) == 1:
        column = set_values[0]
        tol = 1e-9 * (abs(column[0]) + max(1.0, np.abs(column).max()))
        return float(np.mean(column >= column[0] - tol)), np.array(prompt_p[0])
    stacked = np.column_stack(set_values)
    _, _, p_value = _tippett_combination(stacked, _tolerances(stacked))
    own = []
    for i in range(len(originals)):
        values = np.column_stack([per_prompt[c][i][:, 0] for c in components])
        own.append(_tippett_combination(values, _tolerances(values))[2])
    return p_value, np.array(own)


@pytest.mark.parametrize("combination", list(COMBINATIONS))
@pytest.mark.parametrize("omega", ["energy_cosine", "jsd", "auto"])
def test_exact_enumeration_of_two_prompts_matches_the_definition(omega, combination, rng):
    originals, perturbed = zip(
        *[_prompt_arms(rng, 3, 3, shift=0.6), _prompt_arms(rng, 3, 3, shift=0.2)], strict=True
    )
    p_value, prompt_p = brute_force(originals, perturbed, omega, combination)
    r = prompt_set_test(
        originals, perturbed, omega=omega, combination=combination, n_permutations=1000, rng=0
    )
    assert r.exact
    assert r.evaluated == 20 * 20
    assert r.p_value == pytest.approx(p_value, abs=1e-12)
    np.testing.assert_allclose(r.prompt_p_values, prompt_p, atol=1e-12)


def test_unequal_k_between_prompts_and_arms_is_enumerated_exactly(rng):
    originals, perturbed = zip(
        *[_prompt_arms(rng, 3, 2, shift=0.5), _prompt_arms(rng, 2, 4, shift=0.5)], strict=True
    )
    p_value, prompt_p = brute_force(originals, perturbed, "energy_cosine", "sum_z")
    r = prompt_set_test(originals, perturbed, omega="energy_cosine", n_permutations=150, rng=0)
    assert r.exact
    assert r.evaluated == math.comb(5, 3) * math.comb(6, 2)
    assert (r.k_a, r.k_b) == ((3, 2), (2, 4))
    assert r.p_value == pytest.approx(p_value, abs=1e-12)
    np.testing.assert_allclose(r.prompt_p_values, prompt_p, atol=1e-12)


@pytest.mark.parametrize("omega", ["energy_cosine", "auto"])
def test_each_prompts_exact_p_value_is_its_own_permutation_test(omega, rng):
    originals, perturbed = zip(*[_prompt_arms(rng, 3, 4, shift=s) for s in (0.9, 0.0)], strict=True)
    r = prompt_set_test(originals, perturbed, omega=omega, n_permutations=10_000, rng=0)
    assert r.exact
    for i, (a, b) in enumerate(zip(originals, perturbed, strict=True)):
        alone = permutation_test(a, b, omega=omega, n_permutations=10_000, rng=0)
        assert alone.exact
        assert r.prompt_p_values[i] == pytest.approx(alone.p_value, abs=1e-12)


def test_random_relabellings_give_a_plus_one_p_value(rng):
    originals, perturbed = zip(*[_prompt_arms(rng, 8, 6, shift=0.3) for _ in range(4)], strict=True)
    b = 299
    r = prompt_set_test(originals, perturbed, n_permutations=b, rng=3)
    assert not r.exact
    assert r.evaluated == b == r.null_distribution.size
    count = r.p_value * (b + 1)
    assert count == pytest.approx(round(count))
    assert 1 <= round(count) <= b + 1
    for p in r.prompt_p_values:
        assert p * (b + 1) == pytest.approx(round(p * (b + 1)))
    # a single omega: the count is read off the null distribution with the engine's tie rule
    s = prompt_set_test(originals, perturbed, omega="energy_l2", n_permutations=b, rng=3)
    at_least = np.count_nonzero(s.null_distribution >= s.statistic - 1e-9 * abs(s.statistic))
    assert s.p_value == pytest.approx((1 + at_least) / (1 + b))


def test_a_clear_change_reaches_the_floor_and_names_its_driver(rng):
    originals = [clustered(rng, 10, 16, weights=(1.0, 0.0)) for _ in range(3)]
    perturbed = [clustered(rng, 10, 16, weights=(0.0, 1.0)) for _ in range(3)]
    r = prompt_set_test(originals, perturbed, n_permutations=199, rng=0)
    assert r.p_value == pytest.approx(1 / 200)
    assert np.all(r.prompt_p_values == pytest.approx(1 / 200))
    assert list(r.components) == ["jsd", "energy_cosine"]
    assert r.driver in r.components
    assert np.all(r.prompt_effects > 0)


def test_same_seed_same_result_and_result_fields(rng):
    originals, perturbed = zip(*[_prompt_arms(rng, 6, 7, shift=0.2) for _ in range(3)], strict=True)
    one = prompt_set_test(originals, perturbed, n_permutations=200, rng=5)
    two = prompt_set_test(originals, perturbed, n_permutations=200, rng=5)
    np.testing.assert_array_equal(one.null_distribution, two.null_distribution)
    np.testing.assert_array_equal(one.prompt_p_values, two.prompt_p_values)
    assert one.p_value == two.p_value
    assert (one.n_prompts, one.omega, one.combination, one.similarity) == (
        3,
        "auto",
        "sum_z",
        "cosine",
    )
    assert prompt_set_test(originals, perturbed, omega="centroid", rng=0).similarity is None
    with pytest.raises(ValueError, match="read-only"):
        one.prompt_p_values[0] = 0.0
    assert "PromptSetResult(omega='auto'" in repr(one)


# --------------------------------------------------------------------------- degenerate prompts


def _same_text(k, d=5, value=1.0):
    """k outputs that are all the same text: one embedding repeated."""
    return np.tile(np.linspace(value, 2.0, d), (k, 1))


@pytest.mark.parametrize("omega", ["auto", "jsd", "energy_cosine", "energy_l2"])
@pytest.mark.parametrize("combination", list(COMBINATIONS))
def test_prompts_whose_every_answer_is_the_same_text_add_nothing(omega, combination, rng):
    originals, perturbed = zip(*[_prompt_arms(rng, 6, 6, shift=0.4) for _ in range(3)], strict=True)
    base = prompt_set_test(
        originals, perturbed, omega=omega, combination=combination, n_permutations=300, rng=2
    )
    # appended last, the degenerate prompts draw after the others: the same relabellings
    with_same = prompt_set_test(
        [*originals, _same_text(6), _same_text(4, value=0.5)],
        [*perturbed, _same_text(6), _same_text(5, value=0.5)],
        omega=omega,
        combination=combination,
        n_permutations=300,
        rng=2,
    )
    assert list(with_same.degenerate) == [False, False, False, True, True]
    assert with_same.prompt_p_values[3:].tolist() == [1.0, 1.0]
    assert np.all(np.isfinite(with_same.prompt_statistics))
    assert np.isfinite(with_same.statistic)
    if combination != "sum":  # the raw sum adds each prompt's constant; its ranks do not move
        np.testing.assert_allclose(with_same.null_distribution, base.null_distribution, atol=1e-9)
    assert with_same.p_value == base.p_value


def test_a_set_of_only_degenerate_prompts_has_p_value_one():
    r = prompt_set_test([_same_text(5)] * 3, [_same_text(5)] * 3, n_permutations=99, rng=0)
    assert r.p_value == 1.0
    assert r.degenerate.all()
    assert r.driver is None
    assert np.isnan(r.prompt_z).all()
    assert (r.prompt_effects == 0).all()
