"""Power of the pooled test over a set of prompts, simulated from a pilot set: a strong change
is found, no change is rejected at about the level, more outputs or prompts help, and every
bad argument is named."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from dbpa.stats import plan_set_power, simulate_set_power

FAST = {"omega": "energy_l2", "n_permutations": 99}


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _pilot(
    rng: np.random.Generator, prompts: int, k: int, shift: float, d: int = 8
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per prompt its own centre; the perturbed arm moved by ``shift`` along one axis."""
    centres = [rng.normal(size=d) * 3 for _ in range(prompts)]
    move = np.zeros(d)
    move[0] = shift
    originals = [_unit(c + rng.normal(size=(k, d))) for c in centres]
    perturbed = [_unit(c + move + rng.normal(size=(k, d))) for c in centres]
    return originals, perturbed


def test_a_strong_change_is_found_almost_always():
    a, b = _pilot(np.random.default_rng(0), prompts=4, k=10, shift=4.0)
    result = simulate_set_power(a, b, [(4, 6), (2, 6)], n_simulations=40, rng=1, **FAST)
    assert result.at(4, 6).power >= 0.95
    assert result.at(2, 6).power >= 0.9
    assert result.level == 0.05  # m = 1: the level is alpha
    assert result.pilot_prompts == 4
    assert result.pilot_k == 10
    assert [(p.n_prompts, p.k) for p in result.points] == [(4, 6), (2, 6)]


def test_no_change_is_rejected_at_about_the_level():
    """Ten null pilots, each much larger than the simulated arms: 400 simulated audits at
    alpha 0.05 reject within three binomial standard errors of it."""
    rng = np.random.default_rng(2)
    rejections = 0
    for seed in range(10):
        a, b = _pilot(rng, prompts=6, k=30, shift=0.0)
        result = simulate_set_power(a, b, [(3, 4)], n_simulations=40, rng=seed, **FAST)
        rejections += result.points[0].rejections
    rate = rejections / 400
    bound = 3 * np.sqrt(0.05 * 0.95 / 400)
    assert 0.05 - bound <= rate <= 0.05 + bound, rate


def test_the_level_is_the_lone_threshold_of_the_family():
    a, b = _pilot(np.random.default_rng(3), prompts=3, k=8, shift=1.0)
    holm = simulate_set_power(a, b, [(3, 4)], m=4, n_simulations=10, rng=0, **FAST)
    assert holm.level == pytest.approx(0.05 / 4)
    by = simulate_set_power(
        a, b, [(3, 4)], m=4, correction="by", n_simulations=10, omega="energy_l2",
        n_permutations=199,
    )  # fmt: skip
    assert by.level == pytest.approx(0.05 / (4 * (1 + 1 / 2 + 1 / 3 + 1 / 4)))  # 0.006
    assert by.resolution_permutations == 1666  # 1/(B+1) <= 0.006 / 10 from B = 1666
    fine = simulate_set_power(a, b, [(3, 4)], n_simulations=10, rng=0, omega="energy_l2")
    assert fine.resolution_permutations is None  # B = 2000 resolves 0.05


def test_power_grows_with_outputs_and_prompts():
    """A moderate change: common random numbers keep the curves from crossing back much."""
    a, b = _pilot(np.random.default_rng(4), prompts=8, k=16, shift=0.8)
    points = [(8, 2), (8, 6), (8, 16), (1, 16), (3, 16)]
    result = simulate_set_power(a, b, points, n_simulations=40, rng=5, **FAST)
    by_k = [result.at(8, k).power for k in (2, 6, 16)]
    by_n = [result.at(n, 16).power for n in (1, 3, 8)]
    assert by_k[0] + 0.3 <= by_k[2]
    assert by_n[0] + 0.3 <= by_n[2]
    assert all(later >= earlier - 0.1 for earlier, later in itertools.pairwise(by_k))
    assert all(later >= earlier - 0.1 for earlier, later in itertools.pairwise(by_n))


def test_intervals_cover_the_rate_and_the_seed_repeats_it():
    a, b = _pilot(np.random.default_rng(6), prompts=3, k=8, shift=1.0)
    first = simulate_set_power(a, b, [(3, 4), (2, 8)], n_simulations=20, rng=7, **FAST)
    again = simulate_set_power(a, b, [(3, 4), (2, 8)], n_simulations=20, rng=7, **FAST)
    assert first == again
    for point in first.points:
        assert point.ci_low <= point.power <= point.ci_high
        assert point.power == point.rejections / 20
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.level = 0.1  # type: ignore[misc]
    with pytest.raises(KeyError):
        first.at(1, 2)


def test_plan_reads_k_at_the_prompts_and_prompts_at_k():
    a, b = _pilot(np.random.default_rng(8), prompts=5, k=8, shift=4.0)
    plan = plan_set_power(a, b, n_prompts=5, k=8, n_simulations=20, rng=0, **FAST)
    assert plan.k_status == "estimated"
    assert plan.prompts_status == "estimated"
    assert plan.k is not None
    assert 2 <= plan.k <= 8
    assert plan.prompts is not None
    assert 1 <= plan.prompts <= 5
    assert [p.k for p in plan.k_curve] == [2, 3, 4, 6, 8]
    assert {p.n_prompts for p in plan.k_curve} == {5}
    assert [p.n_prompts for p in plan.prompt_curve] == [1, 2, 3, 5]
    assert all(np.diff(plan.k_fitted) >= 0)
    assert all(np.diff(plan.prompt_fitted) >= 0)
    # the smallest k read on the curve reaches the target there, the one below does not
    reached = [p.k for p, f in zip(plan.k_curve, plan.k_fitted, strict=True) if f >= 0.8]
    assert plan.k <= reached[0]


def test_plan_of_no_change_does_not_reach_the_target():
    a, b = _pilot(np.random.default_rng(9), prompts=4, k=6, shift=0.0)
    plan = plan_set_power(a, b, n_prompts=4, k=6, n_simulations=20, rng=0, **FAST)
    assert (plan.k, plan.k_status) == (None, "not_reached")
    assert (plan.prompts, plan.prompts_status) == (None, "not_reached")


def test_plan_beyond_the_pilot_simulates_what_it_can():
    a, b = _pilot(np.random.default_rng(10), prompts=3, k=6, shift=4.0)
    more_prompts = plan_set_power(a, b, n_prompts=10, k=6, n_simulations=10, rng=0, **FAST)
    assert more_prompts.k_status == "beyond_pilot"
    assert more_prompts.k_curve == ()
    assert more_prompts.prompts_status == "estimated"
    more_k = plan_set_power(a, b, n_prompts=3, k=20, n_simulations=10, rng=0, **FAST)
    assert more_k.prompts_status == "beyond_pilot"
    assert more_k.prompt_curve == ()
    assert more_k.k_status == "estimated"
    with pytest.raises(ValueError, match=r"^n_prompts: the audit.s 10 prompts exceed"):
        plan_set_power(a, b, n_prompts=10, k=20, n_simulations=10, **FAST)


GOOD_A, GOOD_B = _pilot(np.random.default_rng(11), prompts=3, k=6, shift=1.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"originals": "abc"}, "^originals: expected a sequence"),
        ({"originals": []}, "^originals: needs at least one pilot prompt"),
        ({"perturbed": GOOD_B[:2]}, "^perturbed: 2 arms for 3 originals"),
        ({"perturbed": [*GOOD_B[:2], np.ones((6, 4))]}, r"^perturbed\[2\]: embedding dimension"),
        ({"originals": [GOOD_A[0][:1], *GOOD_A[1:]]}, r"^originals\[0\]: needs at least 2 rows"),
        ({"omega": "nope"}, "^omega: unknown"),
        ({"similarity": "nope"}, "^similarity: unknown"),
        ({"omega": "energy_l2", "similarity": "neg_l2"}, "^similarity: omega 'energy_l2'"),
        ({"combination": "nope"}, "^combination: unknown"),
        ({"alpha": 1.5}, "^alpha: must be in"),
        ({"m": 0}, "^m: must be >= 1"),
        ({"correction": "nope"}, "^correction: unknown"),
        ({"n_simulations": 0}, "^n_simulations: must be >= 1"),
        ({"n_permutations": 9, "m": 4}, r"^n_permutations: the smallest p-value 1/\(B\+1\)"),
        ({"confidence": 1.0}, "^confidence: must be in"),
        ({"points": "ab"}, "^points: expected a sequence"),
        ({"points": []}, "^points: needs at least one"),
        ({"points": [(3, 4, 5)]}, r"^points\[0\]: expected an \(n_prompts, k\) pair"),
        ({"points": [(0, 4)]}, r"^points\[0\] n_prompts: must be >= 1"),
        ({"points": [(3, 1)]}, r"^points\[0\] k: must be >= 2"),
        ({"points": [(4, 4)]}, r"^points\[0\]: 4 prompts exceed the pilot's 3"),
        ({"points": [(3, 7)]}, r"^points\[0\]: k = 7 exceeds the pilot's smallest arm"),
        ({"rng": -1}, "^rng: a seed must be non-negative"),
    ],
)
def test_every_bad_argument_is_named(change, message):
    kwargs = {
        "originals": GOOD_A,
        "perturbed": GOOD_B,
        "points": [(3, 4)],
        "n_simulations": 2,
        "n_permutations": 99,
        "omega": "jsd",
        **change,
    }
    with pytest.raises(ValueError, match=message):
        simulate_set_power(**kwargs)


def test_a_zero_vector_is_named_for_a_cosine_omega():
    zero = [GOOD_A[0].copy(), *GOOD_A[1:]]
    zero[0][2] = 0.0
    with pytest.raises(ValueError, match=r"^originals\[0\]: row 2 is a zero vector"):
        simulate_set_power(zero, GOOD_B, [(3, 4)], n_simulations=2, n_permutations=99, omega="jsd")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_prompts": 0}, "^n_prompts: must be >= 1"),
        ({"k": 1}, "^k: must be >= 2"),
        ({"power": 1.0}, "^power: must be in"),
    ],
)
def test_the_plan_names_its_own_bad_arguments(change, message):
    kwargs = {"n_prompts": 3, "k": 4, "n_simulations": 2, **FAST, **change}
    with pytest.raises(ValueError, match=message):
        plan_set_power(GOOD_A, GOOD_B, **kwargs)
