"""Every bad input raises ValueError naming the argument and the problem."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dbpa.stats import (
    best_model,
    correct,
    effect_interval,
    min_permutations,
    permutation_test,
    permutation_test_matrix,
    plan_k,
    prompt_drilldown,
    prompt_set_test,
    rates_at,
    roc_curve,
    sample_size,
    set_equivalence,
    simulate_power,
    tpr_at_fpr,
)

GOOD = np.arange(1.0, 13.0).reshape(4, 3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": GOOD[:1]}, r"^a: needs at least 2 rows"),
        ({"b": GOOD[:1]}, r"^b: needs at least 2 rows"),
        ({"a": GOOD[0]}, r"^a: must be a 2-D"),
        ({"b": GOOD[:, :2]}, r"^b: embedding dimension 2 does not match a's 3"),
        ({"a": np.where(GOOD == 5, np.nan, GOOD)}, r"^a: contains NaN or inf \(first in row 1\)"),
        ({"b": np.where(GOOD == 12, np.inf, GOOD)}, r"^b: contains NaN or inf"),
        ({"a": [["x", "y"], ["z", "w"]]}, r"^a: not a numeric array"),
        ({"b": np.vstack([GOOD[:1], np.zeros((1, 3))])}, r"^b: row 1 is a zero vector"),
        (
            {"a": np.vstack([np.zeros((1, 3)), GOOD[:1]]), "omega": "energy_cosine"},
            r"^a: row 0 is a zero vector",
        ),
        ({"n_permutations": 0}, r"^n_permutations: must be >= 1, got 0"),
        ({"n_permutations": 10.5}, r"^n_permutations: must be an integer"),
        ({"n_permutations": True}, r"^n_permutations: must be an integer"),
        ({"omega": "jensen"}, r"^omega: unknown 'jensen'; choose one of jsd, energy"),
        (
            {"similarity": "dot"},
            r"^similarity: unknown 'dot'; choose one of cosine, neg_l1, neg_l2",
        ),
        (
            {"omega": "centroid", "similarity": "neg_l2"},
            r"^similarity: omega 'centroid' is computed on the embeddings",
        ),
        ({"nbins": 10}, r"^nbins: not an option of omega 'jsd' \(its options: bins, range\)"),
        (
            {"omega": "auto", "bins": 10},
            r"^bins: not an option of omega 'auto' \(its options: none\)",
        ),
        ({"omega": "ks", "bins": 10}, r"^bins: not an option of omega 'ks' \(its options: none\)"),
        ({"bins": 0}, r"^bins: must be >= 1, got 0"),
        ({"range": "auto"}, r"^range: expected 'pooled' or a \(low, high\) pair"),
        ({"range": (1, -1)}, r"^range: needs finite low < high"),
        ({"rng": -3}, r"^rng: a seed must be non-negative"),
        ({"rng": "seed"}, r"^rng: expected an int seed"),
    ],
)
def test_permutation_test_rejects(kwargs, message):
    args = {"a": GOOD, "b": GOOD[::-1] + 1.0, **kwargs}
    a, b = args.pop("a"), args.pop("b")
    with pytest.raises(ValueError, match=message):
        permutation_test(a, b, **args)


def test_zero_vectors_are_fine_without_cosine():
    a = np.vstack([np.zeros((1, 3)), GOOD[:2]])
    assert permutation_test(a, GOOD, similarity="neg_l2", n_permutations=10, rng=0).p_value > 0


@pytest.mark.parametrize(
    ("matrix", "k_a", "message"),
    [
        (np.ones((4, 5)), 2, r"^matrix: must be a square"),
        (np.triu(np.ones((5, 5))), 2, r"^matrix: must be symmetric"),
        (np.full((5, 5), np.nan), 2, r"^matrix: contains NaN or inf"),
        (np.ones((5, 5)), 1, r"^k_a: each arm needs at least 2 outputs; got k_a=1 of n=5"),
        (np.ones((5, 5)), 4, r"^k_a: each arm needs at least 2 outputs; got k_a=4 of n=5"),
        (np.ones((5, 5)), 2.0, r"^k_a: must be an integer"),
    ],
)
def test_permutation_test_matrix_rejects(matrix, k_a, message):
    with pytest.raises(ValueError, match=message):
        permutation_test_matrix(matrix, k_a)


def test_permutation_test_matrix_rejects_auto():
    with pytest.raises(
        ValueError,
        match=r"^omega: 'auto' combines jsd and energy_cosine, which need different pooled "
        r"matrices \(.*\); it needs the embeddings: use permutation_test\(a, b, omega='auto'\)",
    ):
        permutation_test_matrix(np.ones((5, 5)), 2, omega="auto")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: correct([0.1, 0.2], alpha=0.0), r"^alpha: must be in \(0, 1\), got 0.0"),
        (lambda: correct([0.1, 0.2], alpha=1.5), r"^alpha: must be in \(0, 1\)"),
        (
            lambda: correct([0.1, 0.2], method="sidak"),
            r"^method: unknown 'sidak'; choose one of bonferroni, holm, bh, by",
        ),
        (lambda: correct([0.1, 1.2]), r"^p_values: every p-value must be in \[0, 1\]"),
        (lambda: correct([0.1, np.nan]), r"^p_values: every p-value must be in \[0, 1\]"),
        (lambda: correct([]), r"^p_values: must be a non-empty 1-D sequence"),
        (lambda: correct([0.1], n_permutations=0), r"^n_permutations: must be >= 1"),
        (lambda: min_permutations(0, 0.05), r"^m: must be >= 1"),
        (lambda: sample_size(0.0), r"^effect: must be a positive number"),
        (lambda: sample_size("big"), r"^effect: must be a positive number"),
        (lambda: sample_size(0.5, alpha=2), r"^alpha: must be in \(0, 1\)"),
        (lambda: sample_size(0.5, power=1.0), r"^power: must be in \(0, 1\)"),
        (lambda: sample_size(0.5, m=0), r"^m: must be >= 1"),
        (lambda: simulate_power(GOOD, GOOD, k=1), r"^k: must be >= 2"),
        (
            lambda: simulate_power(GOOD, GOOD, k=5),
            r"^k: 5 exceeds the smaller pilot \(4 rows\)",
        ),
        (lambda: simulate_power(GOOD, GOOD, k=3, n_simulations=0), r"^n_simulations: must be >= 1"),
        (lambda: simulate_power(GOOD[:1], GOOD, k=3), r"^a: needs at least 2 rows"),
        (lambda: simulate_power(GOOD, GOOD, k=3, share=0.0), r"^share: must be in \(0, 1\]"),
        (lambda: simulate_power(GOOD, GOOD, k=3, share="x"), r"^share: must be a number"),
        (
            lambda: simulate_power(GOOD, GOOD, k=3, share=0.5, replace=False),
            r"^k: with share < 1 a simulation draws up to 2k = 6 rows of pilot a, which has 4",
        ),
        (lambda: plan_k(GOOD[:1], GOOD), r"^a: needs at least 2 rows"),
        (lambda: plan_k(GOOD, GOOD, omega="jensen"), r"^omega: unknown 'jensen'"),
        (
            lambda: plan_k(GOOD, GOOD, omega="ks", bins=3),
            r"^bins: not an option of omega 'ks'",
        ),
        (lambda: plan_k(GOOD, GOOD, alpha=0.0), r"^alpha: must be in \(0, 1\)"),
        (lambda: plan_k(GOOD, GOOD, m=0), r"^m: must be >= 1"),
        (lambda: plan_k(GOOD, GOOD, correction="sidak"), r"^correction: unknown 'sidak'"),
        (lambda: plan_k(GOOD, GOOD, power=1.0), r"^power: must be in \(0, 1\)"),
        (lambda: plan_k(GOOD, GOOD, candidates=()), r"^candidates: needs at least one arm size"),
        (lambda: plan_k(GOOD, GOOD, candidates=5), r"^candidates: expected a sequence"),
        (lambda: plan_k(GOOD, GOOD, candidates=(1, 4)), r"^candidates: must be >= 2, got 1"),
        (lambda: plan_k(GOOD, GOOD, n_simulations=0), r"^n_simulations: must be >= 1"),
        (
            lambda: plan_k(GOOD, GOOD, m=100, n_permutations=999),
            r"^n_permutations: the smallest p-value 1/\(B\+1\) = 0.001 cannot reach the "
            r"per-test level 0.0005 \(holm, m=100, alpha=0.05\); use B >= 1999",
        ),
        (lambda: plan_k(GOOD, GOOD, detectable_at=1), r"^detectable_at: must be >= 2"),
        (lambda: rates_at([0.1, 0.2], ["control"], 0.05), r"^labels: expected 2 labels"),
        (
            lambda: rates_at([0.1, 0.2], ["control", "maybe"], 0.05),
            r"^labels: 'maybe' at position 1",
        ),
        (
            lambda: rates_at([0.1, 0.2], ["target", "target"], 0.05),
            r"^labels: need at least one control and one target",
        ),
        (lambda: rates_at([0.1, 0.2], ["control", "target"], 1.0), r"^alpha: must be in \(0, 1\)"),
        (lambda: roc_curve([0.1, -0.2], ["control", "target"]), r"^p_values: every p-value"),
        (
            lambda: tpr_at_fpr([0.1, 0.2], ["control", "target"], 1.5),
            r"^max_fpr: must be in \[0, 1\]",
        ),
        (lambda: best_model({}, 0.05), r"^results: need at least one model"),
    ],
)
def test_other_entry_points_reject(call, message):
    with pytest.raises(ValueError, match=message):
        call()


ARMS = [GOOD, GOOD + 1.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"originals": GOOD}, r"^originals\[0\]: must be a 2-D \(k, d\) array"),
        (
            {"originals": "abc"},
            r"^originals: expected a sequence of \(k, d\) arrays, one per prompt",
        ),
        ({"perturbed": 3}, r"^perturbed: expected a sequence of \(k, d\) arrays"),
        ({"originals": [], "perturbed": []}, r"^originals: needs at least one prompt"),
        ({"perturbed": ARMS[:1]}, r"^perturbed: 1 arms for 2 originals; one per prompt"),
        ({"originals": [GOOD, GOOD[:1]]}, r"^originals\[1\]: needs at least 2 rows"),
        (
            {"perturbed": [GOOD, np.where(GOOD == 5, np.nan, GOOD)]},
            r"^perturbed\[1\]: contains NaN or inf",
        ),
        (
            {"perturbed": [GOOD, GOOD[:, :2]]},
            r"^perturbed\[1\]: embedding dimension 2 does not match originals\[0\]'s 3",
        ),
        (
            {"perturbed": [GOOD, np.vstack([GOOD[:2], np.zeros((1, 3))])]},
            r"^perturbed\[1\]: row 2 is a zero vector",
        ),
        ({"omega": "jensen"}, r"^omega: unknown 'jensen'; choose one of jsd"),
        (
            {"combination": "mean"},
            r"^combination: unknown 'mean'; choose one of sum_z\+tippett\+spread, sum_z\+tippett",
        ),
        (  # the spread is a cosine distance, whatever the omega
            {"omega": "energy_l2", "originals": [GOOD, np.vstack([GOOD[:2], np.zeros((1, 3))])]},
            r"^originals\[1\]: row 2 is a zero vector",
        ),
        ({"similarity": "dot"}, r"^similarity: unknown 'dot'"),
        (
            {"omega": "energy_l2", "similarity": "neg_l1"},
            r"^similarity: omega 'energy_l2' is computed on the embeddings",
        ),
        ({"omega": "ks", "bins": 3}, r"^bins: not an option of omega 'ks'"),
        ({"n_permutations": 0}, r"^n_permutations: must be >= 1, got 0"),
        ({"rng": -1}, r"^rng: a seed must be non-negative"),
    ],
)
def test_prompt_set_test_rejects(kwargs, message):
    args = {"originals": ARMS, "perturbed": [GOOD[::-1], GOOD * 2.0], **kwargs}
    with pytest.raises(ValueError, match=message):
        prompt_set_test(args.pop("originals"), args.pop("perturbed"), **args)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"set_p_values": [0.1, 1.5]}, r"^set_p_values: every p-value must be in \[0, 1\]"),
        ({"set_p_values": []}, r"^set_p_values: must be a non-empty 1-D sequence"),
        ({"prompt_p_values": 0.1}, r"^prompt_p_values: expected a sequence with one array"),
        ({"prompt_p_values": [[0.1]]}, r"^prompt_p_values: 1 given for 2 pooled p-values"),
        ({"prompt_p_values": [[0.1], [-0.1]]}, r"^prompt_p_values\[1\]: every p-value"),
        ({"prompt_p_values": [[0.1], []]}, r"^prompt_p_values\[1\]: must be a non-empty"),
        ({"alpha": 1.0}, r"^alpha: must be in \(0, 1\)"),
        ({"selection": "sidak"}, r"^selection: unknown 'sidak'; choose one of bonferroni"),
        ({"within": "fdr"}, r"^within: unknown 'fdr'; choose one of bonferroni"),
    ],
)
def test_prompt_drilldown_rejects(kwargs, message):
    args = {"set_p_values": [0.01, 0.2], "prompt_p_values": [[0.01, 0.3], [0.5]], **kwargs}
    with pytest.raises(ValueError, match=message):
        prompt_drilldown(args.pop("set_p_values"), args.pop("prompt_p_values"), **args)


def _interval(omega="energy_l2", n_bootstrap=200):
    rng = np.random.default_rng(0)
    return effect_interval(
        rng.normal(size=(6, 3)),
        rng.normal(size=(6, 3)),
        omega=omega,
        n_bootstrap=n_bootstrap,
        rng=0,
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: set_equivalence(_interval(), 0.1),
            r"^intervals: expected a sequence of EffectInterval",
        ),
        (lambda: set_equivalence([], 0.1), r"^intervals: needs at least one prompt"),
        (lambda: set_equivalence([_interval(), 0.3], 0.1), r"^intervals: item 1 is a float"),
        (
            lambda: set_equivalence([_interval(), _interval("energy_l1")], 0.1),
            r"^intervals: item 1 measures 'energy_l1', item 0 'energy_l2'; one distance",
        ),
        (
            lambda: set_equivalence([_interval(), _interval(n_bootstrap=300)], 0.1),
            r"^intervals: item 1 has 300 bootstrap draws, item 0 200",
        ),
        (lambda: set_equivalence([_interval()], 0.0), r"^margin: must be a positive finite"),
        (lambda: set_equivalence([_interval()], "x"), r"^margin: must be a positive number"),
        (lambda: set_equivalence([_interval()], 0.1, alpha=0.0), r"^alpha: must be in \(0, 1\)"),
        (
            lambda: set_equivalence([_interval(), replace(_interval(), distances=None)], 0.1),
            r"^intervals: item 1 has no distances \(an interval read from a record made",
        ),
        (
            lambda: set_equivalence([_interval(), _interval()], 0.1, rng="x"),
            r"^rng: expected an int seed",
        ),
    ],
)
def test_set_equivalence_rejects(call, message):
    with pytest.raises(ValueError, match=message):
        call()
