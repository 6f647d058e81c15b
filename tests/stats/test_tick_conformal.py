"""The conformal processes on whole ticks (``conformal="ticks"`` / ``"both"``, the default),
on shares and on novelty: their p-values are independent U(0, 1) with no change on the null
shapes (answers that vary, that repeat exactly, all the same, a re-sampled reference), the
checks can fail, their bets are fair, the novelty statistic is a symmetric function of the
bag with densities kept as a direct sum would give them, the default monitor (weighted
e-Bonferroni) keeps its false alarm rate over 500 ticks and its detector's run length, it
sees a change in the shares of familiar answers that the per-output process hardly sees,
and a new kind of answer after a short history sooner than the per-output process.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import kstest, pearsonr

from dbpa.stats import DriftMonitor, _tick_conformal
from dbpa.stats._bag import TIE_DIGITS, Bag
from dbpa.stats._monitor import BOTH_WEIGHTS
from dbpa.stats._tick_conformal import TickConformalMartingale

from .test_monitor import BASELINE, LOOSE, answers, e_factors, fair, most_alarms, moved, run

REWEIGHTED = (0.1, 0.2, 0.7, 0.0)
"""The baseline's own answer types in other shares (total variation 0.5)."""


def tick_p_values(
    rng, shape, runs=8, n_ticks=120, k=5, weights=BASELINE, quiet=0, block=1, statistic="shares"
):
    """Per run, the p-values of ``quiet`` baseline ticks then ``n_ticks`` ticks of
    ``weights`` (blocks of ``block`` ticks: one p-value per block)."""
    spread = 0.0 if shape in ("repeats", "same") else 0.5
    out = []
    for _ in range(runs):
        martingale = TickConformalMartingale(rng, block, statistic)
        ticks = np.concatenate(
            [answers(rng, (quiet, k), spread=spread), answers(rng, (n_ticks, k), weights, spread)]
        )
        references = (
            answers(rng, (len(ticks), 10), spread=spread)
            if shape == "resampled"
            else np.repeat(answers(rng, (1, 10), spread=spread), len(ticks), axis=0)
        )
        if shape == "same":
            references, ticks = np.ones_like(references), np.ones_like(ticks)
        p = [martingale.update(r, t).p_value for r, t in zip(references, ticks, strict=True)]
        out.append([v for v in p if not math.isnan(v)])
    return np.asarray(out)


def bag_of(rows):
    """A bag of ``rows`` (not projected)."""
    bag = Bag(np.eye(rows.shape[1]))
    bag.add(rows)
    return bag


@pytest.mark.parametrize("statistic", ["shares", "novelty"])
@pytest.mark.parametrize("shape", ["varied", "repeats", "same", "resampled"])
def test_tick_p_values_are_independent_and_uniform_without_change(shape, statistic):
    """960 p-values per shape: KS test of U(0, 1) at 0.001, and successive ticks' p-values
    uncorrelated (at 0.001)."""
    seed = {"varied": 31, "repeats": 32, "same": 33, "resampled": 34}[shape]
    rng = np.random.default_rng(seed + 100 * (statistic == "novelty"))
    p = tick_p_values(rng, shape, statistic=statistic)
    assert kstest(p.ravel(), "uniform").pvalue > 0.001
    assert pearsonr(p[:, :-1].ravel(), p[:, 1:].ravel()).pvalue > 0.001


@pytest.mark.parametrize("block", [2, 3])
@pytest.mark.parametrize("shape", ["varied", "repeats", "resampled"])
def test_block_p_values_are_independent_and_uniform_without_change(shape, block):
    """Blocks of 2 and of 3 ticks (a reference re-sampled inside a block joins the pool
    untested): 480 / 320 p-values per shape, one per block, U(0, 1) and successive ones
    uncorrelated."""
    seed = {"varied": 51, "repeats": 52, "resampled": 53}[shape] + 10 * (block - 2)
    p = tick_p_values(np.random.default_rng(seed), shape, block=block)
    assert p.shape == (8, 120 // block)
    assert kstest(p.ravel(), "uniform").pvalue > 0.001
    assert pearsonr(p[:, :-1].ravel(), p[:, 1:].ravel()).pvalue > 0.001


@pytest.mark.parametrize(
    ("statistic", "weights"), [("shares", REWEIGHTED), ("novelty", moved(0.4))]
)
def test_the_uniformity_check_can_fail(statistic, weights):
    """After a change in the shares of the baseline's own answers (shares), or to 40% of a
    new kind of answer (novelty), the changed ticks' p-values pile up near 0: the KS check
    above rejects them."""
    rng = np.random.default_rng(35)
    p = tick_p_values(rng, "varied", 4, 15, weights=weights, quiet=40, statistic=statistic)
    assert kstest(p[:, 40:].ravel(), "uniform").pvalue < 0.001


@pytest.mark.parametrize(("block", "statistic"), [(1, "shares"), (2, "shares"), (1, "novelty")])
def test_the_tick_evidence_is_fair_without_change(block, statistic):
    """The process's own per-tick factors average at most 1 on three null shapes."""
    rng = np.random.default_rng(36 + block + 10 * (statistic == "novelty"))
    factors = []
    for shape in ("varied", "repeats", "resampled"):
        for _ in range(4):
            martingale = TickConformalMartingale(rng, block, statistic)
            spread = 0.0 if shape == "repeats" else 0.5
            reference = answers(rng, (10,), spread=spread)
            for tick in answers(rng, (150, 5), spread=spread):
                if shape == "resampled":
                    reference = answers(rng, (10,), spread=spread)
                factors.append(math.exp(martingale.update(reference, tick).log_factor))
    assert fair(np.asarray(factors))


@pytest.mark.parametrize("block", [1, 2])
def test_the_capital_starts_asleep_and_quiet_ticks_cost_little(block):
    """The capital starts as a jump leaves it with all of it asleep, so after 20 quiet ticks
    the typical wealth is still most of what it was (an even start lost a median of about 2
    in log wealth by then, while the process could not yet see a change)."""
    rng = np.random.default_rng(38 + block)
    logs = []
    for _ in range(20):
        martingale = TickConformalMartingale(rng, block)
        reference = answers(rng, (10,))
        for tick in answers(rng, (20, 5)):
            state = martingale.update(reference, tick)
        logs.append(state.log_martingale)
    assert np.median(logs) > -1.0


def test_the_novelty_statistic_does_not_depend_on_the_order_of_earlier_ticks():
    """The same reference and ticks, the earlier ticks in another order: every output's
    rarity in the bag is the same, as a symmetric function of the bag gives it (a statistic
    that knew which outputs came last would differ)."""
    data = np.random.default_rng(47)
    reference, ticks = answers(data, (10,)), answers(data, (30, 5), moved(0.2))
    order = data.permutation(len(ticks) - 1)
    rarities = []
    for sequence in (ticks, np.concatenate([ticks[:-1][order], ticks[-1:]])):
        martingale = TickConformalMartingale(np.random.default_rng(48), 1, "novelty")
        for tick in sequence:
            martingale.update(reference, tick)
        bag = martingale._bag
        rarities.append(_tick_conformal._novelty(bag)[bag.ids, 0])
    # The sums are taken in another order (BLAS), then rounded to TIE_DIGITS: a density on
    # a rounding edge may move by one step, n 10**-TIE_DIGITS for n rows, and its rarity
    # (minus the log of a density of at least 1) by at most as much.
    step = len(martingale._bag) * 10.0**-TIE_DIGITS
    same = {"rtol": 0.0, "atol": step}
    earlier = rarities[1][10:-5].reshape(-1, 5)
    assert np.allclose(rarities[0][:10], rarities[1][:10], **same)  # the reference's rows
    assert np.allclose(rarities[0][10:-5].reshape(-1, 5)[order], earlier, **same)
    assert np.allclose(rarities[0][-5:], rarities[1][-5:], **same)  # the last tick's
    assert np.ptp(rarities[0]) > 0.0


def test_the_bandwidth_is_the_mean_squared_distance_on_its_grid():
    """``BANDWIDTH`` times the mean squared distance between two rows (all ordered pairs,
    computed directly), rounded to a power of ``BANDWIDTH_STEP``; 0 for rows that do not
    vary."""
    bag = answers(np.random.default_rng(51), (40,))
    squared = ((bag[:, None, :] - bag[None, :, :]) ** 2).sum(axis=2)
    h2 = _tick_conformal._bandwidth(bag_of(bag))
    exponent = math.log(h2) / math.log(2.0**0.25)
    assert exponent == pytest.approx(round(exponent), abs=1e-9)
    assert abs(math.log(h2 / (0.15 * squared.mean()))) <= 0.5 * math.log(2.0**0.25) + 1e-12
    one = answers(np.random.default_rng(52), (1,))
    assert _tick_conformal._bandwidth(bag_of(np.repeat(one, 7, axis=0))) == 0.0


def test_the_kept_densities_are_the_direct_sums(monkeypatch):
    """Densities kept as rows join and leave the bag (a bag of at most 60 rows, so rows
    leave every tick) equal the kernel sums over the bag computed directly at the kept
    bandwidth."""
    monkeypatch.setattr(_tick_conformal, "MAX_BAG", 60)
    rng = np.random.default_rng(49)
    martingale = TickConformalMartingale(rng, 1, "novelty")
    reference = answers(rng, (10,))
    for tick in answers(rng, (25, 5), moved(0.3)):
        martingale.update(reference, tick)
        bag = martingale._bag
        assert len(bag) <= 60
        rows = bag.rows[bag.ids]
        squared = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(axis=2)
        direct = np.exp(-squared / bag.bandwidth).sum(axis=1)
        kept = bag._sums[bag.ids]
        assert np.allclose(kept, direct, rtol=1e-12)


def test_a_new_kind_of_answer_after_a_short_history_is_seen_sooner_than_per_output():
    """After 20 quiet ticks 40% of the answers become a new kind (k = 5): the default monitor
    alarms within 10 ticks in most runs, more often than with the per-output process (whose
    p-values cannot be smaller than one over the outputs so far)."""
    rng = np.random.default_rng(50)
    found = {"outputs": 0, "both": 0}
    for seed in range(12):
        data = np.random.default_rng(seed)
        reference = answers(data, (5,))
        ticks = np.concatenate([answers(data, (20, 5)), answers(data, (10, 5), moved(0.4))])
        for conformal in found:
            states = run(DriftMonitor(0.05, conformal=conformal, rng=rng), [reference] * 30, ticks)
            found[conformal] += states[-1].alarm and states[-1].alarm_tick > 20
    assert found["both"] >= 8
    assert found["both"] > found["outputs"]


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["fixed", "resampled", "repeats"])
def test_both_conformal_processes_keep_the_false_alarm_rate_over_500_ticks(shape):
    rng = np.random.default_rng({"fixed": 41, "resampled": 42, "repeats": 43}[shape])
    spread = 0.0 if shape == "repeats" else 0.5
    runs = []
    for _ in range(30):
        if shape == "resampled":
            references = answers(rng, (500, 10), spread=spread)
        else:
            references = np.repeat(answers(rng, (1, 10), spread=spread), 500, axis=0)
        monitor = DriftMonitor(LOOSE, rng=rng)
        runs.append(run(monitor, references, answers(rng, (500, 5), spread=spread)))
    assert sum(r[-1].alarm for r in runs) <= most_alarms(len(runs))
    assert fair(np.concatenate([e_factors(r) for r in runs]))
    assert max(s.log_e_conformal for r in runs for s in r) > 0.0


def test_the_detector_with_both_runs_at_least_one_over_alpha_ticks():
    rng = np.random.default_rng(44)
    alpha, cap = 0.1, 100
    lengths = []
    for _ in range(40):
        monitor = DriftMonitor(alpha, form="detect", rng=rng)
        states = run(monitor, [answers(rng, (10,))] * cap, answers(rng, (cap, 5)))
        lengths.append(states[-1].alarm_tick or cap)
    lengths = np.asarray(lengths, dtype=float)
    assert lengths.mean() + 3.0 * lengths.std() / math.sqrt(lengths.size) >= 1.0 / alpha


def test_a_change_in_shares_is_seen_by_the_tick_process():
    """After 60 quiet ticks the shares of the three familiar answers move (total variation
    0.5, k = 10): the default monitor alarms within 10 ticks in most runs, more often than
    with the per-output process alone."""
    rng = np.random.default_rng(45)
    found = {"outputs": 0, "both": 0}
    for seed in range(12):
        data = np.random.default_rng(seed)
        reference = answers(data, (10,))
        ticks = np.concatenate([answers(data, (60, 10)), answers(data, (11, 10), REWEIGHTED)])
        for conformal in found:
            states = run(DriftMonitor(0.05, conformal=conformal, rng=rng), [reference] * 71, ticks)
            found[conformal] += states[-1].alarm and states[-1].alarm_tick > 60
    assert found["both"] >= 9
    assert found["both"] > found["outputs"]


def test_the_conformal_option_is_validated():
    with pytest.raises(ValueError, match="conformal"):
        DriftMonitor(0.05, conformal="pairs")


@pytest.mark.parametrize("blocks", [(), (1, 1), (0,), (1.5,), 2])
def test_the_blocks_are_validated(blocks):
    with pytest.raises(ValueError, match="blocks"):
        DriftMonitor(0.05, blocks=blocks)


@pytest.mark.parametrize("form", ["test", "detect"])
def test_the_alarm_line_is_shared_by_weights(form):
    """The default: betting 0.1, per-output 0.3, novelty 0.3, shares on blocks of 1 and 2
    0.15 each; each process alarms alone at 1 / (w alpha) (test) or 2 / (w alpha)
    (detector); equal weights with ``outputs``, and weights may be given."""
    rng = np.random.default_rng(46)
    reference = answers(rng, (10,))
    betting, outputs, novelty, ticks = BOTH_WEIGHTS
    for options, weights in (
        ({}, (betting, outputs, novelty, ticks / 2, ticks / 2)),
        ({"conformal": "outputs"}, (0.5, 0.5)),
        ({"conformal": "ticks", "blocks": (1, 2, 3)}, (0.25,) * 4),
        ({"weights": (0.4, 0.3, 0.1, 0.1, 0.1)}, (0.4, 0.3, 0.1, 0.1, 0.1)),
    ):
        monitor = DriftMonitor(0.05, form=form, rng=rng, **options)
        logs, evidence = [], []
        for _ in range(20):
            s = monitor.update(reference, answers(rng, (5,), REWEIGHTED))
            logs.append(s.log_martingales)
            evidence.append(s.log_e_value)
        assert s.weights == pytest.approx(weights)
        processes = np.asarray(logs)
        if form == "detect":  # each process's Shiryaev-Roberts statistic on its factors
            factors = np.diff(processes, axis=0, prepend=0.0)
            for t in range(len(factors)):
                previous = processes[t - 1] if t else np.full(len(weights), -np.inf)
                processes[t] = factors[t] + np.logaddexp(previous, 0.0)
        halved = math.log(2.0) if form == "detect" else 0.0
        assert evidence == pytest.approx(list((processes + np.log(weights)).max(1) - halved))


@pytest.mark.parametrize(
    ("options", "weights"),
    [
        ({}, (0.5, 0.5)),
        ({}, (0.1, 0.6, 0.15, 0.15)),
        ({}, (0.1, 0.2, 0.3, 0.2, 0.5)),
        ({}, (0.0, 0.25, 0.25, 0.25, 0.25)),
        ({}, (math.nan, 0.25, 0.25, 0.25, 0.25)),
        ({}, "abcd"),
        ({}, 3),
        ({"conformal": "outputs"}, (0.1, 0.6, 0.15, 0.15)),
    ],
)
def test_the_weights_are_validated(options, weights):
    with pytest.raises(ValueError, match=r"^weights:"):
        DriftMonitor(0.05, weights=weights, **options)
