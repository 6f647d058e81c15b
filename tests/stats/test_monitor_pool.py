"""Evidence pooled over a prompt set's arms: validation, agreement with one arm's monitor,
the family's false alarm rate over 500 ticks with many arms, and the power a change spread
over 20 prompts gains.

The error-rate simulation drives ``pool_evidence`` with exact test martingales that sit at
Ville's bound (small fair bets: a product of them crosses ``c`` with probability close to
``1 / c``), so it resolves a false alarm rate well above alpha; the real monitors' own
martingale property is ``test_monitor.py``'s to check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dbpa.stats import DriftMonitor, pool_evidence
from tests.stats.test_monitor import BASELINE, answers, moved

ALPHA = 0.05


def _arm_logs(monitor: DriftMonitor, reference, ticks) -> tuple[np.ndarray, list]:
    states = [monitor.update(reference, tick) for tick in ticks]
    return np.array([s.log_martingales for s in states]), states


@pytest.mark.parametrize("form", ["test", "detect"])
@pytest.mark.parametrize("conformal", ["outputs", "both"])
def test_a_pool_of_one_arm_is_that_arms_monitor(form, conformal):
    rng = np.random.default_rng(3)
    reference = answers(rng, (20,))
    ticks = [answers(rng, (5,), BASELINE if t < 6 else moved(0.4)) for t in range(14)]
    logs, _ = _arm_logs(DriftMonitor(conformal=conformal, rng=1), reference, ticks)
    _, states = _arm_logs(DriftMonitor(form=form, conformal=conformal, rng=1), reference, ticks)
    pooled = pool_evidence(logs[:, None, :], ALPHA, form=form, weights=states[-1].weights)
    assert pooled.log_e_value == pytest.approx([s.log_e_value for s in states], abs=1e-9)
    assert pooled.alarm_tick == states[-1].alarm_tick
    halved = 2.0 if form == "detect" else 1.0
    assert pooled.weights == pytest.approx([w / halved for w in states[-1].weights])


def test_each_process_alarms_at_its_weighted_line():
    """Weights 0.2 and 0.8: the first process alarms at 1 / (0.2 alpha), the second at
    1 / (0.8 alpha); equal weights by default."""
    logs = np.log([[[50.0, 1.0]], [[101.0, 1.0]], [[1.0, 26.0]]])
    weighted = pool_evidence(logs, 0.05, weights=[0.2, 0.8])
    assert weighted.e_value == pytest.approx([10.0, 20.2, 20.8])
    assert weighted.alarm_tick == 2
    assert pool_evidence(logs[2:], 0.05, weights=[0.2, 0.8]).alarm_tick == 1  # 0.8 * 26 >= 20
    assert pool_evidence(logs, 0.05).e_value == pytest.approx([25.0, 50.5, 13.0])


def test_arms_evidence_multiplies():
    logs = np.log([[[2.0, 1.0], [3.0, 0.5]], [[4.0, 1.0], [0.5, 8.0]]])
    pooled = pool_evidence(logs, 0.1)
    assert np.exp(pooled.log_processes).ravel() == pytest.approx([6.0, 0.5, 2.0, 8.0])
    assert pooled.e_value == pytest.approx([3.0, 4.0])  # the larger process over m = 2
    assert pooled.alarm_tick is None
    assert pooled.threshold == pytest.approx(10.0)
    assert pool_evidence(logs, 0.34).alarm_tick == 1  # 3 >= 1 / 0.34


def test_the_detector_restarts_on_the_pooled_factors():
    logs = np.log([[[0.1]], [[0.2]], [[0.6]]])  # factors 0.1, 2, 3
    detector = pool_evidence(logs, ALPHA, form="detect")
    expected = [0.1, (0.1 + 1) * 2, ((0.1 + 1) * 2 + 1) * 3]
    assert detector.e_value == pytest.approx(expected)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"log_martingales": np.zeros((3, 2))}, "log_martingales"),
        ({"log_martingales": np.zeros((0, 2, 1))}, "log_martingales"),
        ({"log_martingales": [[["x"]]]}, "log_martingales"),
        ({"log_martingales": np.full((1, 1, 1), np.nan)}, "log_martingales"),
        ({"log_martingales": np.full((1, 1, 1), np.inf)}, "log_martingales"),
        ({"alpha": 1.5}, "alpha"),
        ({"form": "watch"}, "form"),
        ({"weights": [1.0]}, "weights"),
        ({"weights": [0.5, 0.6]}, "weights"),
        ({"weights": [1.5, -0.5]}, "weights"),
        ({"weights": [0.5, np.nan]}, "weights"),
        ({"weights": ["a", "b"]}, "weights"),
    ],
)
def test_bad_input_is_named(kwargs, match):
    arguments = {"log_martingales": np.zeros((2, 2, 2)), "alpha": ALPHA, **kwargs}
    with pytest.raises(ValueError, match=match):
        pool_evidence(**arguments)


def _null_logs(rng, shape, stake=0.05):
    """Log test martingales (..., ticks, arms, processes) of fair +-1 bets at ``stake``: close
    to continuous, so that their products cross ``c`` with probability near ``1 / c``."""
    steps = np.where(rng.random(shape) < 0.5, math.log1p(stake), math.log1p(-stake))
    return np.cumsum(steps, axis=-3)


@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.1, 0.6, 0.15, 0.15)])
def test_the_family_of_pools_alarms_falsely_at_most_alpha_over_500_ticks(weights):
    """3 perturbations x 6 prompts x 2 processes at equal weights (``outputs``) or 4 at the
    default's, 500 ticks, pools at alpha / 3: P(some pool ever alarms) <= alpha. The rate
    sits near alpha (Ville's bound is nearly reached), so a rule that pooled without the
    e-Bonferroni over processes or pools, or that used the weights wrongly, would fail."""
    rng = np.random.default_rng(2026)
    runs, pools = 1000, 3
    alarms = 0
    for _ in range(runs):
        logs = _null_logs(rng, (pools, 500, 6, len(weights)), stake=0.1)
        alarms += any(pool_evidence(g, ALPHA / pools, weights=weights).alarm_tick for g in logs)
    rate = alarms / runs
    assert ALPHA / 3 < rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.1, 0.6, 0.15, 0.15)])
def test_the_pooled_detector_keeps_its_bound_on_early_alarms(weights):
    """Shiryaev-Roberts on pooled factors: P(alarm by tick n) <= n alpha / 2 (m > 1)."""
    rng = np.random.default_rng(7)
    runs, n, level = 1500, 40, 0.005
    alarms = sum(
        pool_evidence(
            _null_logs(rng, (n, 10, len(weights)), 0.2), level, form="detect", weights=weights
        ).alarm_tick
        is not None
        for _ in range(runs)
    )
    assert alarms / runs <= n * level / 2 + 3 * math.sqrt(0.1 * 0.9 / runs)


def _pool_run(seed, changed, share=0.5, prompts=20, quiet=5, ticks=15):
    """Per-arm log martingales and evidence of ``prompts`` arms whose first ``changed``
    arms move a ``share`` of their answers to a new kind after ``quiet`` ticks (k = 5)."""
    rng = np.random.default_rng(seed)
    logs = np.zeros((ticks, prompts, 2))
    arm_evidence = np.zeros((ticks, prompts))
    for j in range(prompts):
        monitor = DriftMonitor(conformal="outputs", rng=rng.spawn(1)[0])
        reference = answers(rng, (20,))
        for t in range(ticks):
            shares = moved(share) if t >= quiet and j < changed else BASELINE
            state = monitor.update(reference, answers(rng, (5,), shares))
            logs[t, j] = state.log_martingales
            arm_evidence[t, j] = state.log_e_value
    return logs, arm_evidence


def test_a_change_spread_over_20_prompts_alarms_sooner_than_on_one():
    """One perturbation and the original over 20 prompts (2 pools at alpha / 2): a change
    on every prompt alarms within 10 ticks; on one prompt, or with e-Bonferroni over the
    40 arms (today's design), the same change has not alarmed by then."""
    pools, arms = 2, 40
    for seed in range(2):
        spread, per_arm = _pool_run(seed, changed=20)
        pooled = pool_evidence(spread, ALPHA / pools).alarm_tick
        assert pooled is not None
        assert pooled <= 5 + 10
        lone = pool_evidence(_pool_run(seed, changed=1)[0], ALPHA / pools).alarm_tick
        assert lone is None or lone > pooled
        bonferroni = np.flatnonzero((per_arm >= math.log(arms / ALPHA)).any(axis=1))
        assert bonferroni.size == 0 or bonferroni[0] + 1 > pooled
