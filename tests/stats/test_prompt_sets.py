"""The pooled test over a set of prompts (stratified permutations), its drill-down and the
set-level equivalence test."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

import numpy as np
import pytest

from dbpa.stats import (
    COMBINATIONS,
    calibrate_margin,
    calibrate_set_margin,
    effect_interval,
    equivalence_p_value,
    permutation_test,
    prompt_drilldown,
    prompt_set_test,
    set_equivalence,
    set_equivalence_p_value,
)
from dbpa.stats._boundary import NO_GUARD, boundary_p_value
from dbpa.stats._omega import OMEGAS
from dbpa.stats._set_tilted import SetArms, _split
from dbpa.stats._similarity import SIMILARITIES
from dbpa.stats._stacked import StackedKernels
from dbpa.stats._tilted import _Arms
from tests.stats import reference
from tests.stats.batched import prompt_set_tests
from tests.stats.conftest import clustered
from tests.stats.simulations import (
    boundary_only_interval,
    calibrated_set_equivalences,
    carrier_set_equivalences,
    drilldown_errors,
    null_prompt_set,
    pooled_null_rejections,
    same_text,
    set_equivalences,
)
from tests.stats.synthetic_effects import scenario, true_effect
from tests.stats.test_combined import _tippett_combination, _tolerances
from tests.support.rates import Rate, assert_rates, check_rates

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


def _spread_values(a, b):
    """(splits,) each split's mean cosine distance between two distinct outputs of its first
    group minus the same in its second, the textbook way."""
    z = np.vstack([a, b])
    unit = z / np.linalg.norm(z, axis=1, keepdims=True)

    def mean_distance(rows):
        return np.mean([1.0 - unit[i] @ unit[j] for i, j in itertools.permutations(rows, 2)])

    return np.array(
        [mean_distance(first) - mean_distance(second) for first, second in _splits(len(z), len(a))]
    )


def _combine_by_hand(values, combination, extra=()):
    """(rows,) the set statistic of every row from the (rows, prompts) statistics (``extra``:
    further set statistics joining ``sum_z+tippett``)."""
    rows = values.shape[0]
    tol = _tolerances(values)
    counts = np.column_stack([_at_least(values[:, i], tol[:, i]) for i in range(values.shape[1])])
    if combination in ("sum_z+tippett", "sum_z+tippett+spread"):
        parts = np.column_stack(
            [_combine_by_hand(values, "sum_z"), _combine_by_hand(values, "tippett"), *extra]
        )
        tol = 1e-9 * (np.abs(parts) + np.maximum(1.0, np.abs(parts).max(axis=0)))
        counts = np.sort(
            np.column_stack([_at_least(parts[:, c], tol[:, c]) for c in range(parts.shape[1])]),
            axis=1,
        )
        # sorted counts compared lexicographically (a smaller key is more extreme): a row's
        # value is how many rows have a key at least its own, so larger is more extreme
        keys = np.zeros(rows)
        for column in counts.T:
            keys = keys * (rows + 1) + column
        return np.sum(keys[None, :] >= keys[:, None], axis=1).astype(float)
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
    """(p-value, per-prompt p-values) enumerating every stratified relabelling by hand;
    ``sum_z+tippett+spread`` adds |sum over prompts of the standardised spread differences|
    to the first component's combination (the prompts' own p-values do not read it)."""
    components = ("jsd", "energy_cosine") if omega == "auto" else (omega,)
    per_prompt = {
        c: [_prompt_values(c, a, b) for a, b in zip(originals, perturbed, strict=True)]
        for c in components
    }
    sizes = [len(v) for v in per_prompt[components[0]]]
    grid = list(itertools.product(*(range(s) for s in sizes)))  # row 0: the observed labels
    extra = []
    if combination == "sum_z+tippett+spread":
        spreads = [_spread_values(a, b) for a, b in zip(originals, perturbed, strict=True)]
        values = np.column_stack([v[[g[i] for g in grid]] for i, v in enumerate(spreads)])
        extra = [np.abs(_combine_by_hand(values, "sum_z"))]
    set_values, prompt_p = [], []
    for c in components:
        values = np.column_stack([v[[g[i] for g in grid], 0] for i, v in enumerate(per_prompt[c])])
        set_values.append(
            _combine_by_hand(values, combination, extra if c == components[0] else ())
        )
        prompt_p.append(
            [np.mean(v[:, 0] >= v[0, 0] - 1e-9 * (abs(v[0, 0]) + 1)) for v in per_prompt[c]]
        )
    if len(set_values) == 1:
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


@pytest.mark.parametrize("rows", [3, 400])
def test_stacked_jsd_is_the_per_prompt_kernels_to_the_last_bit(rows, rng):
    """Prompts of unequal sizes padded into one stack: with 3 rows the mixture terms are
    computed directly, with 400 read from the per-prompt tables (``_stacked``)."""
    sizes = [(3, 4), (5, 5), (4, 6), (12, 12)]
    pooled = [rng.normal(size=(k_a + k_b, 6)) + 1.0 for k_a, k_b in sizes]
    k_a = np.array([k for k, _ in sizes])
    options = dict(OMEGAS["jsd"].defaults)
    kernels = StackedKernels(pooled, k_a, ("jsd",), options, spread=False)
    masks = np.zeros((len(sizes), rows, kernels.n), dtype=bool)
    for p, z in enumerate(pooled):
        for r in range(rows):
            masks[p, r, rng.permutation(len(z))[: k_a[p]]] = True
    stacked = kernels(masks, slice(0, len(sizes)))[:, :, 0]
    for p, z in enumerate(pooled):
        kernel = OMEGAS["jsd"].build(SIMILARITIES["cosine"](z, "z"), int(k_a[p]), options)
        np.testing.assert_array_equal(stacked[p], kernel(masks[p, :, : len(z)]))


def test_unequal_k_between_prompts_and_arms_is_enumerated_exactly(rng):
    originals, perturbed = zip(
        *[_prompt_arms(rng, 3, 2, shift=0.5), _prompt_arms(rng, 2, 4, shift=0.5)], strict=True
    )
    p_value, prompt_p = brute_force(originals, perturbed, "energy_cosine", "sum_z+tippett+spread")
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


@pytest.mark.parametrize("omega", ["auto", "jsd", "energy_cosine", "energy_l2"])
def test_each_prompts_random_p_value_is_its_own_permutation_test(omega, rng):
    """Under random relabellings each prompt's p-value and statistic are the single
    permutation test's on the relabellings the set drew for it: prompt i's follow the
    B x n_j uniforms of the prompts before it (one stream of doubles), whatever the sizes
    (prompts of one pooled size are evaluated together, the others alone)."""
    sizes = [(6, 7), (5, 8), (6, 7), (5, 5), (7, 6), (6, 7)]  # more than B splits each
    originals, perturbed = zip(
        *[_prompt_arms(rng, k_a, k_b, shift=0.2 * i) for i, (k_a, k_b) in enumerate(sizes)],
        strict=True,
    )
    b = 199
    r = prompt_set_test(originals, perturbed, omega=omega, n_permutations=b, rng=11)
    assert not r.exact
    stream = np.random.default_rng(11)
    for i, (a, x) in enumerate(zip(originals, perturbed, strict=True)):
        alone = permutation_test(a, x, omega=omega, n_permutations=b, rng=stream)
        assert r.prompt_p_values[i] == alone.p_value
        assert r.prompt_statistics[i] == pytest.approx(alone.statistic, abs=1e-12)


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
        "sum_z+tippett+spread",
        "cosine",
    )
    assert prompt_set_test(originals, perturbed, omega="centroid", rng=0).similarity is None
    with pytest.raises(ValueError, match="read-only"):
        one.prompt_p_values[0] = 0.0
    assert "PromptSetResult(omega='auto'" in repr(one)


# --------------------------------------------------------------------------- degenerate prompts


@pytest.mark.parametrize("omega", ["auto", "jsd", "energy_cosine", "energy_l2"])
@pytest.mark.parametrize("combination", list(COMBINATIONS))
def test_prompts_whose_every_answer_is_the_same_text_add_nothing(omega, combination, rng):
    originals, perturbed = zip(*[_prompt_arms(rng, 6, 6, shift=0.4) for _ in range(3)], strict=True)
    base = prompt_set_test(
        originals, perturbed, omega=omega, combination=combination, n_permutations=300, rng=2
    )
    # appended last, the degenerate prompts draw after the others: the same relabellings
    with_same = prompt_set_test(
        [*originals, same_text(6), same_text(4, value=0.5)],
        [*perturbed, same_text(6), same_text(5, value=0.5)],
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


# --------------------------------------------------------------------------- the spread


def _dispersion_set(rng, n_prompts, ratio, k=10, d=16):
    """Every prompt's perturbed answers as its originals, around the same centre, with their
    spread scaled by ``ratio`` (a pure change of diversity, as a lower temperature)."""
    originals, perturbed = [], []
    for _ in range(n_prompts):
        centre, spread = rng.normal(size=d) * 2.0, rng.uniform(0.5, 1.0)
        originals.append(_unit(centre + rng.normal(size=(k, d)) * spread))
        perturbed.append(_unit(centre + rng.normal(size=(k, d)) * spread * ratio))
    return originals, perturbed


def test_the_spread_component_detects_a_pure_change_of_diversity_the_old_default_misses():
    """20 prompts whose answers become 8% less spread out (k = 10): measured 0.07 for
    ``sum_z+tippett`` (jsd and energy_cosine barely see it) and 0.83 with the spread, at B =
    99 over 30 sets; here 20 sets, both on the same relabellings."""
    rng = np.random.default_rng(3)
    rejected = {"sum_z+tippett": 0, "sum_z+tippett+spread": 0}
    drivers = []
    for s in range(20):
        originals, perturbed = _dispersion_set(rng, 20, 0.92)
        for combination in rejected:
            r = prompt_set_test(
                originals, perturbed, combination=combination, n_permutations=99, rng=s
            )
            rejected[combination] += r.p_value <= ALPHA
            if combination.endswith("spread") and r.p_value <= ALPHA:
                drivers.append(r.driver)
    assert rejected["sum_z+tippett"] <= 6
    assert rejected["sum_z+tippett+spread"] >= 12
    assert set(drivers) == {"jsd"}  # the spread joins jsd's combination: its aspect


def test_the_spread_does_not_enter_the_prompts_own_p_values(rng):
    originals, perturbed = _dispersion_set(rng, 4, 0.7)
    with_spread = prompt_set_test(originals, perturbed, n_permutations=199, rng=1)
    without = prompt_set_test(
        originals, perturbed, combination="sum_z+tippett", n_permutations=199, rng=1
    )
    np.testing.assert_array_equal(with_spread.prompt_p_values, without.prompt_p_values)
    np.testing.assert_array_equal(with_spread.prompt_statistics, without.prompt_statistics)
    assert list(with_spread.components) == list(without.components) == ["jsd", "energy_cosine"]
    # the location component's set-level test does not read the spread
    location = with_spread.components["energy_cosine"], without.components["energy_cosine"]
    assert location[0].p_value == location[1].p_value


def test_a_set_of_only_degenerate_prompts_has_p_value_one():
    r = prompt_set_test([same_text(5)] * 3, [same_text(5)] * 3, n_permutations=99, rng=0)
    assert r.p_value == 1.0
    assert r.degenerate.all()
    assert r.driver is None
    assert np.isnan(r.prompt_z).all()
    assert (r.prompt_effects == 0).all()


# --------------------------------------------------------------------------- type-I error


@pytest.mark.parametrize(
    ("n_prompts", "shape"),
    [
        (1, {}),
        (5, {}),
        (5, {"unequal": True}),
        (5, {"same_text_prompts": 2}),
        (20, {"unequal": True, "same_text_prompts": 4}),
        (50, {"unequal": True, "same_text_prompts": 10}),
        (500, {"unequal": True, "same_text_prompts": 50, "k_range": (2, 4)}),
    ],
)
def test_type_one_error_of_the_pooled_test(n_prompts, shape):
    """The defaults (auto, sum_z+tippett+spread) at B = 99: P(p <= alpha) under H0 at most
    alpha, for prompts with different answer distributions, unequal k and prompts whose every
    answer is one text, checked sequentially (``tests/support/rates.py``: failed at 1.5 alpha
    with probability 0.9). The set of 500 prompts, the size the README quotes, has 2-4
    outputs per arm (4-14 in ``python -m benchmarks.bench_rates --study prompt_sets``) so
    that a draw costs about 0.1 CPU-s: what is checked there is the combination over 500
    prompts (their standardised sum, Tippett's minimum over 500 per-prompt p-values with
    its ties, the spread over 500 prompts, 50 of them constant), which the outputs per arm
    do not change; B = 99 as at the other sizes."""
    seed = n_prompts + 7 * len(shape)
    audits = pooled_null_rejections(n_prompts, seed, **shape)
    assert_rates(audits, Rate(ALPHA, f"{n_prompts} prompts {shape}"))


def _assert_same_result(batched, single):
    """Every field equal, exactly (NaN where the other has NaN)."""
    for name, value in vars(single).items():
        other = getattr(batched, name)
        if name == "components":
            assert list(other) == list(value)
            for component in value:
                np.testing.assert_equal(vars(other[component]), vars(value[component]))
        else:
            np.testing.assert_array_equal(other, value, err_msg=name)


@pytest.mark.parametrize("combination", ["sum_z+tippett+spread", "fisher"])
def test_batched_simulated_audits_are_prompt_set_test_to_the_last_bit(combination):
    """The error-rate checks test many audits together (``tests/stats/batched.py``): each
    result is ``prompt_set_test``'s for its set and seed, field by field, whether its prompts
    were stacked with other audits', enumerated or tested alone."""
    rng = np.random.default_rng(44)
    sets = [null_prompt_set(rng, 20, unequal=True, same_text_prompts=3) for _ in range(6)]
    sets += [null_prompt_set(rng, 7, k_range=(2, 9), unequal=True) for _ in range(6)]
    moved = null_prompt_set(rng, 9, unequal=True)
    sets.append((moved[0], [y + 1.5 * (i % 2) for i, y in enumerate(moved[1])]))
    sets.append(([same_text(2, 16)], [same_text(2, 16, 0.5)]))  # 6 relabellings: enumerated
    large = clustered(rng, 260, 16), clustered(rng, 260, 16)  # 520 rows: BLAS threads, alone
    sets.append(([large[0], sets[0][0][3]], [large[1], sets[0][1][3]]))
    seeds = [3 * j + 1 for j in range(len(sets))]
    batched = prompt_set_tests(sets, seeds, combination=combination)
    assert len({r.n_prompts for r in batched}) > 3
    assert any(r.exact for r in batched)
    assert min(r.p_value for r in batched) < 0.05 < max(r.p_value for r in batched)
    for result, (originals, perturbed), seed in zip(batched, sets, seeds, strict=True):
        single = prompt_set_test(
            originals, perturbed, combination=combination, n_permutations=99, rng=seed
        )
        _assert_same_result(result, single)


@pytest.mark.parametrize("combination", ["sum_z+tippett", "sum_z", "fisher", "tippett", "sum"])
def test_type_one_error_of_the_other_combinations(combination):
    audits = pooled_null_rejections(
        5, 31, combination=combination, unequal=True, same_text_prompts=1
    )
    assert_rates(audits, Rate(ALPHA, combination))


def test_per_prompt_p_values_are_valid_under_the_null():
    """Each prompt's own p-value from the shared relabellings: P(p_i <= alpha) <= alpha, each
    prompt test one draw of the sequential check."""
    rng = np.random.default_rng(41)

    def prompt_tests():
        for s in itertools.count():
            originals, perturbed = null_prompt_set(rng, 5, unequal=True)
            r = prompt_set_test(originals, perturbed, n_permutations=99, rng=s)
            yield from r.prompt_p_values <= ALPHA

    assert_rates(prompt_tests(), Rate(ALPHA, "per-prompt p-values"))


# --------------------------------------------------------------------------- drill-down


def test_drilldown_tests_prompts_only_in_selected_perturbations_at_r_alpha_over_m():
    set_p = [0.001, 0.004, 0.3, 0.8]  # Holm at 0.05 selects the first two: R = 2 of m = 4
    prompt_p = [
        [0.001, 0.02, 0.5],
        [0.012, 0.5, 0.9, 0.9],
        [0.0001, 0.5],  # not selected: never called moved, however small
        [0.5],
    ]
    d = prompt_drilldown(set_p, prompt_p, alpha=0.05)
    assert d.selected.tolist() == [True, True, False, False]
    assert d.n_selected == 2
    assert d.level == pytest.approx(2 * 0.05 / 4)
    # Holm at 0.025 inside: 0.001 <= 0.025/3, 0.02 > 0.025/2; 0.012 <= 0.025/4? no (0.00625)
    assert d.moved[0].tolist() == [True, False, False]
    assert d.moved[1].tolist() == [False, False, False, False]
    assert d.moved[2].tolist() == [False, False]
    assert np.isnan(d.prompt_adjusted[2]).all()
    # adjusted on the alpha scale: Holm's adjusted p times m / R
    assert d.prompt_adjusted[0].tolist() == pytest.approx([0.003 * 2, 0.04 * 2, 1.0])
    assert d.prompt_adjusted[1][0] == pytest.approx(min(1.0, 0.048 * 2))
    assert (d.prompt_adjusted[0] <= 0.05).tolist() == d.moved[0].tolist()


def test_drilldown_with_nothing_selected_calls_nothing_moved():
    d = prompt_drilldown([0.2, 0.9], [[0.001, 0.001], [0.001]], within="bh")
    assert d.n_selected == 0
    assert d.level == 0.0
    assert not any(m.any() for m in d.moved)


def test_drilldown_with_bh_inside():
    d = prompt_drilldown([0.001], [[0.01, 0.02, 0.03, 0.5]], within="bh", selection="bh")
    # R = m = 1: BH at 0.05 rejects 0.01 <= 0.0125, 0.02 <= 0.025, 0.03 <= 0.0375
    assert d.moved[0].tolist() == [True, True, True, False]


@pytest.mark.parametrize(
    ("within", "moved"),
    [("holm", (2, 2, 0, 0, 0)), ("bh", (2, 2, 0, 0, 0)), ("holm", (1, 0, 0, 0, 0))],
)
def test_drilldown_error_over_selected_perturbations_is_at_most_alpha(within, moved):
    """Benjamini & Bogomolov's error (the average over selected perturbations of the
    within-perturbation error) with shared original arms, which their independence does not
    cover: at most alpha, checked sequentially (each family's error enters as a Bernoulli
    draw of that probability; failed at 1.5 alpha with probability 0.9)."""
    errors = drilldown_errors(within, seed=len(moved) + sum(moved), moved=moved)
    assert_rates(errors, Rate(ALPHA, f"drill-down {within} {moved}"))


# --------------------------------------------------------------------------- set equivalence


def test_set_equivalence_of_one_prompt_is_the_one_prompt_test(rng):
    a, b = _prompt_arms(rng, 20, 20, d=8, shift=0.1)
    iv = effect_interval(a, b, n_bootstrap=500, rng=1)
    for margin in (0.01, 0.05, 0.2):
        s = set_equivalence([iv], margin, rng=0)
        assert s.p_value == equivalence_p_value(iv, margin)
        assert s.estimate == iv.estimate
        assert s.n_prompts == 1


def test_set_equivalence_reads_the_mean_not_every_prompt(rng):
    """Three unchanged prompts and one that moved: at a margin of the moved prompt's own
    estimate that prompt is not shown equivalent, but the mean effect over the four is."""
    arms = [_prompt_arms(rng, 60, 60, d=8) for _ in range(3)]
    moved = _prompt_arms(rng, 60, 60, d=8, shift=0.35)
    intervals = [effect_interval(a, b, n_bootstrap=500, rng=i) for i, (a, b) in enumerate(arms)]
    intervals.append(effect_interval(*moved, n_bootstrap=500, rng=9))
    theta_moved = intervals[-1].estimate
    margin = theta_moved
    assert equivalence_p_value(intervals[-1], margin) > ALPHA  # that prompt alone: not shown
    s = set_equivalence(intervals, margin, rng=0)
    assert s.estimate == pytest.approx(np.mean([iv.estimate for iv in intervals]))
    assert s.equivalent
    assert s.upper < margin
    assert not set_equivalence(intervals, 0.5 * s.estimate, rng=0).equivalent


def test_the_boundary_only_interval_is_what_the_set_test_reads_of_the_interval(rng):
    """The simulations' cheaper interval has the full interval's estimate, bootstrap
    replicates and boundary draws (drawn first from the same stream), so the set's test of
    either, and the difference of two runs' effects, are the same."""
    for k_a, k_b, shift in ((20, 20, 0.3), (12, 30, 0.0)):
        a, b = _prompt_arms(rng, k_a, k_b, d=8, shift=shift)
        full = effect_interval(a, b, n_bootstrap=500, rng=5)
        cheap = boundary_only_interval(a, b, 500, np.random.default_rng(5))
        assert cheap.estimate == full.estimate
        np.testing.assert_array_equal(cheap.bootstrap, full.bootstrap)
        assert cheap.boundary.plug_in == full.boundary.plug_in
        np.testing.assert_array_equal(cheap.boundary.noise, full.boundary.noise)
        np.testing.assert_array_equal(cheap.boundary.directions, full.boundary.directions)
        for margin in (0.01, 0.05, 0.2):  # two prompts: a set of one adds its guard
            assert set_equivalence([cheap] * 2, margin, rng=0) == set_equivalence(
                [full] * 2, margin, rng=0
            )


def test_a_set_of_one_prompt_is_decided_as_that_prompt_alone():
    """With its tilted guard: the set's test alone showed a set of one whose perturbed arm
    collapses onto one answer "equivalent" in 0.09 of 1000 audits at the margin (k = 10),
    where the one-prompt test, guard included, stays within alpha (test_boundary.py)."""
    rng = np.random.default_rng(3)
    s, margin = scenario("collapse_hard"), true_effect("collapse_hard")
    guarded = 0
    for _ in range(12):
        interval = effect_interval(*s.draw(rng, 10), confidence=0.9, n_bootstrap=500, rng=rng)
        one = set_equivalence([interval], margin, alpha=0.05)
        assert one.p_value == equivalence_p_value(interval, margin)
        assert one.upper == interval.high  # its upper tail, (1 - 0.9) / 2, is alpha
        unguarded = replace(interval.boundary, guard=NO_GUARD)
        guarded += one.p_value > boundary_p_value(unguarded, margin)
    assert guarded  # the guard decided some of them


@pytest.mark.parametrize("shape", ["all", "one", "half"])
def test_set_equivalence_level_at_the_margin(shape):
    """4 prompts, k = 20: P(equivalent | mean effect = margin) <= alpha, checked sequentially
    (failed at 1.5 alpha with probability 0.9)."""
    audits = set_equivalences(shape, 4, 20, seed=11)
    assert_rates(audits, Rate(ALPHA, f"set equivalence at the margin, {shape}"))


def test_a_set_whose_other_prompts_never_vary_is_decided_by_its_carriers_guard(rng):
    """The joint guard puts the whole total on the one prompt that can move, and the
    prompts that never vary add nothing to its resamples: its p-value is that prompt's own
    guard at the set's total margin, draw for draw."""
    s = scenario("collapse_hard")
    for _ in range(4):
        a, b = s.draw(rng, 10)
        same = np.tile(a[:1], (10, 1))
        carrier = effect_interval(a, b, n_bootstrap=500, rng=rng)
        constant = effect_interval(same, same.copy(), n_bootstrap=500, rng=rng)
        joint = SetArms([(iv.distances, 10) for iv in (carrier, constant, constant)])
        for total in (0.5, 1.0, 2.0):
            total *= true_effect("collapse_hard")
            alone = _Arms(carrier.distances, 10).p_value(total, 500, np.random.default_rng(7))
            assert joint.p_value(total, 500, seed=7) == alone


def test_the_joint_guard_splits_the_total_where_it_is_likeliest(rng):
    """Two prompts that moved alike and one that did not: the split sums to the total, and
    the prompts that moved take more of it than the one that did not."""
    moved = [_prompt_arms(rng, 20, 20, d=4, shift=0.4) for _ in range(2)]
    still = _prompt_arms(rng, 20, 20, d=4)
    intervals = [effect_interval(a, b, n_bootstrap=200, rng=i) for i, (a, b) in enumerate(moved)]
    intervals.append(effect_interval(*still, n_bootstrap=200, rng=5))
    arms = SetArms([(iv.distances, 20) for iv in intervals]).arms
    total = 3.0 * sum(a.base[0] for a in arms)
    split = _split(arms, total)
    assert sum(split) == pytest.approx(total)
    rises = [t - a.base[0] for t, a in zip(split, arms, strict=True)]
    assert min(rises) >= 0.0
    assert min(rises[:2]) > rises[2]


def test_set_equivalence_is_reproducible_from_its_rng(rng):
    intervals = [
        effect_interval(*_prompt_arms(rng, 12, 12, d=4, shift=0.1), n_bootstrap=300, rng=i)
        for i in range(3)
    ]
    margin = float(np.mean([iv.high for iv in intervals]))  # near the set's bound
    first = set_equivalence(intervals, margin, rng=3)
    assert set_equivalence(intervals, margin, rng=3) == first
    assert set_equivalence_p_value(intervals, margin, rng=3) == first.p_value


@pytest.mark.parametrize("k", [10, 20])
def test_set_equivalence_level_where_one_collapsing_prompt_carries_the_noise(k):
    """One prompt whose perturbed arm collapses onto one answer, two that never vary, the
    mean effect at the margin: P(equivalent) <= alpha, checked sequentially (failed at 1.5
    alpha with probability 0.9). 0.08 of 2,800 audits without the joint guard (k = 10);
    with it 0 of 200 (measured 2026-11-27)."""
    assert_rates(carrier_set_equivalences(k, seed=31), Rate(ALPHA, f"carrier set, k = {k}"))


def test_the_carrier_simulation_fails_the_pooled_test_without_the_joint_guard():
    """The same audits decided by the pooled least-favourable test alone: the check fails."""
    audits = carrier_set_equivalences(10, seed=31, joint_guard=False)
    (check,) = check_rates(audits, [Rate(ALPHA, "pooled test without the joint guard")])
    assert not check.passed


# --------------------------------------------------------------------------- set margin


def _points(*values):
    """Arms of one-dimensional outputs (Euclidean distance |x - y|)."""
    return np.array(values, dtype=float)[:, None]


# prompt x pair: the plug-in distance 2 mean|a - b| - mean|a - a'| - mean|b - b'| (self-pairs in)
HAND = [
    [
        (_points(0, 0), _points(1, 1)),  # 2 * 1 - 0 - 0 = 2
        (_points(0, 2), _points(0, 2)),  # 2 * 1 - 1 - 1 = 0
        (_points(0, 0), _points(0, 3)),  # 2 * 1.5 - 0 - 1.5 = 1.5
    ],
    [
        (_points(0, 0), _points(0, 0)),  # 0
        (_points(1, 1), _points(0, 0)),  # 2 * 1 = 2
        (_points(0, 0), _points(4, 4)),  # 2 * 4 = 8
    ],
]


def test_a_set_margin_is_a_quantile_of_the_pairs_mean_distances_by_hand():
    cal = calibrate_set_margin(HAND, quantile=0.75)
    np.testing.assert_allclose(cal.prompt_distances, [[2, 0, 1.5], [0, 2, 8]])
    np.testing.assert_allclose(cal.distances, [1, 1, 4.75])  # each pair's mean over prompts
    # sorted 1, 1, 4.75: the 0.75 quantile lies half way from the second to the third
    assert cal.margin == pytest.approx(1 + 0.5 * 3.75)
    # not the mean of the prompts' own 0.75 quantiles (1.75 and 5)
    assert cal.margin != pytest.approx((1.75 + 5) / 2)
    # the unbiased effects leave the self-pairs out: |0 - 2| = 2 within both arms of pair 1
    # of the first prompt (2 - 2 - 2), 3 within the second arm of its pair 2 (3 - 0 - 3)
    np.testing.assert_allclose(cal.effects, [(2 + 0) / 2, (-2 + 2) / 2, (0 + 8) / 2])
    assert (cal.k, cal.n_prompts, cal.quantile, cal.omega) == ((2,), 2, 0.75, "energy_l2")
    assert calibrate_set_margin(HAND, quantile=0.5).margin == pytest.approx(1.0)


def test_a_set_margin_of_one_prompt_is_the_one_prompt_margin(rng):
    pairs = [(rng.normal(size=(8, 3)), rng.normal(size=(6, 3))) for _ in range(4)]
    one = calibrate_margin(pairs, quantile=0.9)
    cal = calibrate_set_margin([pairs], quantile=0.9)
    assert cal.margin == one.margin
    np.testing.assert_array_equal(cal.distances, one.distances)
    assert cal.k == (6, 8)


def test_outputs_that_never_vary_calibrate_a_set_margin_of_0():
    same = _points(1, 1, 1)
    assert calibrate_set_margin([[(same, same)] * 3] * 4).margin == 0.0


@pytest.mark.parametrize(
    ("prompts", "kwargs", "message"),
    [
        ("ab", {}, "prompts: expected a sequence with one sequence of pairs"),
        ([], {}, "prompts: needs at least one prompt"),
        ([[]], {}, "prompts: item 0 has no pair"),
        ([HAND[0], 5], {}, "prompts: item 1 is not a sequence of pairs (got int)"),
        ([HAND[0], HAND[1][:2]], {}, "prompts: item 1 has 2 pairs, item 0 3"),
        ([HAND[0], [(1, 2, 3)] * 3], {}, "prompts: item 1: replicates: item 0 is not a pair"),
        (HAND, {"omega": "auto"}, "omega: unknown 'auto'"),
        (HAND, {"quantile": 0.0}, "quantile: must be in (0, 1)"),
    ],
)
def test_set_margin_validation_names_the_argument(prompts, kwargs, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        calibrate_set_margin(prompts, **kwargs)


def test_a_calibrated_set_margin_is_not_anti_conservative():
    """4 prompts, k = 20, every prompt's perturbed arm carrying the two_texts effect (the
    least favourable one-prompt shape), the margin calibrated on each prompt's original and
    3 replicate arms as the flow does, with the multiple that puts what it estimates at the
    effect: P(equivalent) <= alpha, checked sequentially (failed at 1.5 alpha with
    probability 0.9). The 6 pairs' 0.95 quantile mostly lies below what it estimates (the
    margin's median 0.7 of it), so this is conservative: 0.020 of 400 audits of this stream,
    0.005 of 200 with 10 replicate arms (45 pairs), measured 2026-11-27."""
    audits = calibrated_set_equivalences("two_texts", 4, 20, seed=21)
    assert_rates(audits, Rate(ALPHA, "calibrated set margin at the effect"))


def test_the_calibrated_set_margin_simulation_fails_a_margin_too_wide():
    """The same audits with the margin estimating five times the effect: equivalence is
    falsely shown in 19 of 42, and the check fails there. (Three times: 0.10, 42 of 422
    audits, 32 CPU-s instead of 3; measured 2026-11-28.)"""
    audits = calibrated_set_equivalences("two_texts", 4, 20, seed=12, scale=5.0)
    (check,) = check_rates(audits, [Rate(ALPHA, "a margin five times the effect")])
    assert not check.passed
