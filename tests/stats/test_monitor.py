"""The drift monitor: validation, its false alarm rate over 500 ticks on three null shapes,
the tolerance at its boundary, the detector's run length, power, ties, and the family; the
conformal process's p-values (uniform with no change) and its power.

The error-rate checks use a large alpha (0.3) so that a few dozen simulated monitors
resolve it, and each process's per-tick e-factors (its evidence's ratio from one tick to the
next), whose mean is at most 1 exactly when the bets are fair: thousands of them per shape
detect a bias far smaller than one that would lift the false alarm rate to 1.5 alpha.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import binom, kstest

from dbpa.stats import DriftMonitor, MonitorState, family_alarms
from dbpa.stats._conformal import ConformalMartingale

D = 8
CENTRES = np.eye(4, D) * 2.0
"""Answer types 0-2 are the baseline's; type 3 is where a change sends answers."""

BASELINE = (0.5, 0.3, 0.2, 0.0)
LOOSE = 0.3
"""The level of the error-rate simulations."""


def answers(rng, shape, weights=BASELINE, spread=0.5):
    """Outputs of shape ``shape + (D,)``: answer types with the given shares, each
    ``spread`` around its centre (0: answers that repeat exactly)."""
    kinds = rng.choice(len(weights), size=shape, p=np.asarray(weights) / np.sum(weights))
    return CENTRES[kinds] + spread * rng.normal(size=(*shape, D))


def moved(share):
    """The baseline with a ``share`` of its answers moved to the new type: the total
    variation distance from the baseline is exactly ``share``."""
    return (*tuple((1 - share) * w for w in BASELINE[:3]), share)


def outputs_monitor(*args, **options):
    """``DriftMonitor`` with the betting and per-output conformal processes only, the design
    these tests check (the default adds the tick processes: ``test_tick_conformal.py``)."""
    return DriftMonitor(*args, conformal="outputs", **options)


def quiet_then(rng, quiet, changed, weights, k=5, spread=0.0):
    """``quiet`` ticks of the baseline, then ``changed`` ticks with ``weights``."""
    return np.concatenate(
        [answers(rng, (quiet, k), spread=spread), answers(rng, (changed, k), weights, spread)]
    )


def run(monitor, references, ticks):
    """Feed ``ticks[t]`` against ``references[t]``; the states, stopping at an alarm."""
    states = []
    for reference, tick in zip(references, ticks, strict=True):
        states.append(monitor.update(reference, tick))
        if states[-1].alarm:
            break
    return states


def null_run(rng, shape, n_ticks=500, k=5, k_ref=10, **options):
    spread = 0.0 if shape == "repeats" else 0.5
    if shape == "resampled":
        references = answers(rng, (n_ticks, k_ref), spread=spread)
    else:
        references = np.repeat(answers(rng, (1, k_ref), spread=spread), n_ticks, axis=0)
    ticks = answers(rng, (n_ticks, k), spread=spread)
    return run(outputs_monitor(LOOSE, rng=rng, **options), references, ticks)


def e_factors(states, process="betting"):
    return np.exp(np.diff([0.0] + [getattr(s, f"log_e_{process}") for s in states]))


def fair(factors):
    """The factors' mean is not above 1 by more than four standard errors."""
    return factors.mean() <= 1.0 + 4.0 * factors.std() / math.sqrt(factors.size)


def most_alarms(n, level=LOOSE):
    """The count above which ``n`` monitors alarm too often for ``level`` (1 in 1000)."""
    return int(binom.ppf(0.999, n, level))


@pytest.mark.parametrize("shape", ["fixed", "resampled", "repeats"])
def test_no_change_alarms_at_most_alpha_over_500_ticks(shape):
    rng = np.random.default_rng({"fixed": 1, "resampled": 2, "repeats": 3}[shape])
    runs = [null_run(rng, shape) for _ in range(40)]
    alarms = sum(r[-1].alarm for r in runs)
    assert alarms <= most_alarms(len(runs))
    for process in ("betting", "conformal"):
        factors = np.concatenate([e_factors(r, process) for r in runs])
        assert factors.size > 12_000
        assert fair(factors)
    assert max(s.stake for r in runs for s in r) > 0.0  # the monitor did bet
    assert max(s.log_e_conformal for r in runs for s in r) > 0.0  # and so did the other


def test_a_reused_baseline_output_would_be_caught():
    """The calibration check above can fail: betting against the same baseline outputs
    every tick (what the queue prevents) drives the e-factors' mean above 1."""
    rng = np.random.default_rng(4)
    reference = answers(rng, (10,))
    factors = []
    for _ in range(10):
        monitor = outputs_monitor(LOOSE, rng=rng)
        for tick in answers(rng, (300, 5)):
            monitor._book.queue.clear()  # only the reference, over and over
            monitor._book.reference = None
            factors.append(monitor.update(reference, tick).log_e_betting)
    steps = np.exp(np.diff(np.reshape(factors, (10, 300)), axis=1, prepend=0.0)).ravel()
    assert steps.mean() > 1.0 + 4.0 * steps.std() / math.sqrt(steps.size)


def test_a_change_at_the_tolerance_alarms_at_most_alpha():
    rng = np.random.default_rng(5)
    tolerance = 0.3
    runs = []
    for _ in range(40):
        reference = answers(rng, (10,), spread=0.0)
        ticks = quiet_then(rng, 100, 200, moved(tolerance))
        runs.append(run(outputs_monitor(LOOSE, tolerance, rng=rng), [reference] * 300, ticks))
    assert sum(r[-1].alarm for r in runs) <= most_alarms(len(runs))
    assert fair(np.concatenate([e_factors(r) for r in runs]))
    assert all(s.log_e_conformal == 0.0 for r in runs for s in r)  # betting alone


def test_a_change_beyond_the_tolerance_alarms():
    rng = np.random.default_rng(6)
    alarmed = 0
    for _ in range(10):
        reference = answers(rng, (10,), spread=0.0)
        ticks = quiet_then(rng, 30, 70, moved(0.7))
        alarmed += run(outputs_monitor(0.05, 0.3, rng=rng), [reference] * 100, ticks)[-1].alarm
    assert alarmed >= 9


def test_without_tolerance_the_same_change_alarms():
    """The tolerance test above is not vacuous: the change it allows is detected when
    no tolerance is given."""
    rng = np.random.default_rng(7)
    alarmed = 0
    for _ in range(10):
        reference = answers(rng, (10,), spread=0.0)
        ticks = quiet_then(rng, 100, 200, moved(0.3))
        alarmed += run(outputs_monitor(0.05, rng=rng), [reference] * 300, ticks)[-1].alarm
    assert alarmed >= 8


def test_a_change_after_quiet_ticks_is_detected_against_them():
    rng = np.random.default_rng(8)
    delays = []
    for _ in range(20):
        references = np.repeat(answers(rng, (1, 10)), 100, axis=0)
        ticks = np.concatenate([answers(rng, (40, 10)), answers(rng, (60, 10), moved(0.5))])
        states = run(outputs_monitor(0.05, rng=rng), references, ticks)
        assert states[-1].alarm
        delays.append(states[-1].alarm_tick - 41)
    assert min(delays) >= 0  # no alarm before the change
    assert np.median(delays) <= 15


def test_the_detector_runs_at_least_one_over_alpha_ticks_without_change():
    rng = np.random.default_rng(9)
    alpha, cap = 0.1, 100
    lengths = []
    for _ in range(60):
        monitor = outputs_monitor(alpha, form="detect", rng=rng)
        states = run(monitor, [answers(rng, (10,))] * cap, answers(rng, (cap, 5)))
        lengths.append(states[-1].alarm_tick or cap)
    lengths = np.asarray(lengths, dtype=float)
    assert lengths.mean() + 3.0 * lengths.std() / math.sqrt(lengths.size) >= 1.0 / alpha


def test_the_detector_forgets_the_quiet_ticks():
    """After 300 quiet ticks the wealth of the test form has paid for every bet, the
    detector has not: it alarms sooner, on the same data."""
    rng = np.random.default_rng(10)
    faster = 0
    for seed in range(8):
        references = np.repeat(answers(rng, (1, 10)), 400, axis=0)
        ticks = np.concatenate([answers(rng, (300, 5)), answers(rng, (100, 5), moved(0.5))])
        test = run(outputs_monitor(0.05, rng=seed), references, ticks)
        detect = run(outputs_monitor(1 / 3650, form="detect", rng=seed), references, ticks)
        assert detect[-1].alarm
        faster += (detect[-1].alarm_tick or 999) <= (test[-1].alarm_tick or 999)
    assert faster >= 6


def conformal_p_values(rng, shape, runs=20, n_ticks=100, k=5, weights=BASELINE, quiet=None):
    """The conformal p-values of ``runs`` monitors' tick outputs (D-dimensional; ``quiet``
    ticks of the baseline first when given, then ``weights``)."""
    spread = 0.0 if shape in ("repeats", "same") else 0.5
    p = []
    for _ in range(runs):
        martingale = ConformalMartingale(rng)
        reference = answers(rng, (10,), spread=spread)
        ticks = answers(rng, (n_ticks, k), weights, spread)
        if quiet is not None:
            ticks = np.concatenate([answers(rng, (quiet, k), spread=spread), ticks])
        if shape == "same":
            reference, ticks = np.ones_like(reference), np.ones_like(ticks)
        p.extend(q for tick in ticks for q in martingale.update(reference, tick).p_values)
    return np.asarray(p)


@pytest.mark.parametrize("shape", ["varied", "repeats", "same"])
def test_conformal_p_values_are_uniform_without_change(shape):
    """10,000 p-values per shape (answers that vary, that repeat exactly among three, all
    the same answer): a KS test of U(0, 1) at 0.001."""
    rng = np.random.default_rng({"varied": 21, "repeats": 22, "same": 23}[shape])
    p = conformal_p_values(rng, shape)
    assert p.size == 10_000
    assert kstest(p, "uniform").pvalue > 0.001


class _NoTieBreak:
    """An rng whose ``theta`` is always 1: ties count fully against the new output."""

    def __init__(self, rng):
        self._rng = rng

    def normal(self, *args, **kwargs):
        return self._rng.normal(*args, **kwargs)

    def uniform(self):
        return 1.0


def test_the_uniformity_check_can_fail():
    """Without the random tie-break answers that repeat give p-values that are too large,
    and after a change the p-values pile up near 0: the KS check above rejects both."""
    rng = np.random.default_rng(24)
    changed = conformal_p_values(rng, "varied", runs=5, n_ticks=20, weights=moved(0.4), quiet=40)
    assert kstest(changed, "uniform").pvalue < 0.001
    p = []
    for _ in range(5):
        martingale = ConformalMartingale(_NoTieBreak(rng))
        reference = answers(rng, (10,), spread=0.0)
        for tick in answers(rng, (100, 5), spread=0.0):
            p.extend(martingale.update(reference, tick).p_values)
    assert kstest(p, "uniform").pvalue < 0.001


def test_the_conformal_evidence_is_fair_without_change_and_grows_after_one():
    """Its per-tick factors average at most 1 on the three null shapes; after 100 quiet
    ticks a change of 0.4 of the answers at k = 5 sends it over 2 / 0.05 within ten ticks
    in at least 18 of 20 runs (the issue's goal is 80%)."""
    rng = np.random.default_rng(25)
    for shape in ("varied", "repeats", "same"):
        factors = []
        for _ in range(10):
            martingale = ConformalMartingale(rng)
            spread = 0.0 if shape != "varied" else 0.5
            reference = answers(rng, (10,), spread=spread)
            ticks = answers(rng, (300, 5), spread=spread)
            if shape == "same":
                reference, ticks = np.ones_like(reference), np.ones_like(ticks)
            factors.extend(math.exp(martingale.update(reference, t).log_factor) for t in ticks)
        assert fair(np.asarray(factors))
    found = early = 0
    for _ in range(20):
        martingale = ConformalMartingale(rng)
        reference = answers(rng, (10,))
        ticks = np.concatenate([answers(rng, (100, 5)), answers(rng, (11, 5), moved(0.4))])
        steps = [martingale.update(reference, t).log_martingale for t in ticks]
        early += max(steps[:100]) >= math.log(40.0)
        found += max(steps[:100]) < math.log(40.0) <= max(steps[100:])
    assert early <= most_alarms(20, 1 / 40)
    assert found >= 18


def test_answers_that_never_vary_give_no_evidence_and_no_warning():
    """The betting process does not bet; the conformal p-values are all ties, broken by
    the rng: uniform, so its evidence is a fair game that does not alarm."""
    same = np.ones((5, D))
    monitor = outputs_monitor(0.05, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        states = [monitor.update(np.ones((10, D)), same) for _ in range(500)]
    assert all(s.log_e_betting == 0.0 and not s.alarm for s in states)
    assert max(s.e_value for s in states) < 20.0


def test_the_alarm_stays_raised_and_reset_clears_it():
    rng = np.random.default_rng(11)
    monitor = outputs_monitor(0.05, rng=rng)
    reference = answers(rng, (10,), spread=0.0)
    states = run(monitor, [reference] * 200, quiet_then(rng, 20, 180, moved(1.0)))
    first = states[-1]
    assert first.alarm
    assert first.alarm_tick == first.ticks
    after = monitor.update(reference, answers(rng, (5,), spread=0.0))
    assert after.alarm
    assert after.alarm_tick == first.alarm_tick
    monitor.reset()
    fresh = monitor.update(reference, answers(rng, (5,), spread=0.0))
    assert (fresh.ticks, fresh.alarm, fresh.alarm_tick, fresh.log_e_betting) == (1, False, None, 0)
    assert fresh.log_e_value == pytest.approx(max(fresh.log_e_conformal, 0.0) - math.log(2.0))


def test_state_is_frozen_and_consistent():
    rng = np.random.default_rng(12)
    monitor = outputs_monitor(0.05, rng=rng)
    reference = answers(rng, (10,))
    states = [monitor.update(reference, answers(rng, (5,))) for _ in range(30)]
    s = states[-1]
    assert isinstance(s, MonitorState)
    with pytest.raises(AttributeError):
        s.alarm = True  # type: ignore[misc]
    assert s.ticks == 30
    assert s.threshold == 20.0
    assert s.e_value == pytest.approx(math.exp(s.log_e_value))
    assert s.log_e_value == pytest.approx(max(s.log_e_betting, s.log_e_conformal) - math.log(2))
    assert s.pairs == 2  # of 5 outputs, 2 bet on and 3 put aside
    assert s.baseline_left == 10 + 30 * (3 - 2)  # the queue grows by one output a tick
    assert 0.0 <= s.stake <= monitor.max_stake


def test_a_resampled_reference_joins_the_baseline_and_a_repeated_one_does_not():
    rng = np.random.default_rng(13)
    same, fresh = outputs_monitor(rng=0), outputs_monitor(rng=0)
    reference = answers(rng, (10,))
    for _ in range(3):
        tick = answers(rng, (5,))
        same_state = same.update(reference, tick)
        fresh_state = fresh.update(answers(rng, (10,)), tick)
    assert same_state.baseline_left == 10 + 3
    assert fresh_state.baseline_left == 30 + 3


def test_same_seed_same_evidence():
    rng = np.random.default_rng(14)
    reference, ticks = answers(rng, (10,)), answers(rng, (50, 5), moved(0.4))
    a = [s.log_e_value for s in run(outputs_monitor(rng=3), [reference] * 50, ticks)]
    b = [s.log_e_value for s in run(outputs_monitor(rng=3), [reference] * 50, ticks)]
    assert a == b


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": "x"}, "alpha"),
        ({"tolerance": -0.1}, "tolerance"),
        ({"tolerance": 1.0}, "tolerance"),
        ({"tolerance": "wide"}, "tolerance"),
        ({"form": "cusum"}, "form"),
        ({"reserve": 1.0}, "reserve"),
        ({"window": 0}, "window"),
        ({"rng": "seed"}, "rng"),
    ],
)
def test_monitor_arguments_are_validated(options, message):
    with pytest.raises(ValueError, match=f"^{message}:"):
        DriftMonitor(**options)


@pytest.mark.parametrize(
    ("reference", "tick", "message"),
    [
        (np.ones(8), np.ones((5, 8)), "reference"),
        (np.ones((1, 8)), np.ones((5, 8)), "reference"),
        (np.full((10, 8), np.nan), np.ones((5, 8)), "reference"),
        (np.ones((10, 8)), np.ones((5, 7)), "tick"),
        (np.ones((10, 8)), [["a"] * 8] * 5, "tick"),
    ],
)
def test_update_arguments_are_validated(reference, tick, message):
    with pytest.raises(ValueError, match=f"^{message}:"):
        DriftMonitor().update(reference, tick)


def test_a_new_embedder_needs_a_reset():
    monitor = DriftMonitor()
    monitor.update(np.ones((10, 8)), np.ones((5, 8)))
    with pytest.raises(ValueError, match=r"^reference:.*reset"):
        monitor.update(np.ones((10, 4)), np.ones((5, 4)))


def test_family_alarms_bonferroni_and_ebh_by_hand():
    e = [100.0, 30.0, 1.0, 0.5]  # m = 4, alpha = 0.1
    bonferroni = family_alarms(e, alpha=0.1)
    assert bonferroni.alarmed.tolist() == [True, False, False, False]
    assert bonferroni.threshold == pytest.approx(40.0)
    # e-BH: the r-th largest must reach 4 / (0.1 r) = 40, 20, 13.3, 10: r = 2
    ebh = family_alarms([1.0, 30.0, 0.5, 100.0], alpha=0.1, method="ebh")
    assert ebh.alarmed.tolist() == [False, True, False, True]
    assert ebh.threshold == pytest.approx(20.0)
    assert not family_alarms([1.0, 2.0], alpha=0.1, method="ebh").alarmed.any()


def test_family_of_monitors_on_shared_data_keeps_the_family_rate():
    """Ten arms that see the same ticks (the strongest dependence): e-Bonferroni on the
    largest e-value so far alarms in at most alpha of families."""
    rng = np.random.default_rng(15)
    families, alarmed = 30, 0
    for _ in range(families):
        reference, ticks = answers(rng, (10,)), answers(rng, (150, 5))
        best = []
        for arm in range(10):
            states = run(outputs_monitor(0.999, rng=arm), [reference] * 150, ticks)
            best.append(max(s.e_value for s in states))
        alarmed += family_alarms(best, alpha=LOOSE).alarmed.any()
    assert alarmed <= most_alarms(families)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"e_values": []}, "e_values"),
        ({"e_values": [[1.0]]}, "e_values"),
        ({"e_values": [1.0, -1.0]}, "e_values"),
        ({"e_values": ["a"]}, "e_values"),
        ({"e_values": [1.0], "alpha": 1.5}, "alpha"),
        ({"e_values": [1.0], "method": "bh"}, "method"),
    ],
)
def test_family_arguments_are_validated(arguments, message):
    with pytest.raises(ValueError, match=f"^{message}:"):
        family_alarms(**arguments)
