"""The sequential check of simulated rates: its boundaries, its operating characteristics
(exact, and against simulated Bernoulli draws), several rates on one stream, its inputs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tests.support.rates import Rate, assert_rates, check_rates, operating_characteristic


def _wald_draws(log_ratio_per_draw: float, boundary: float) -> int:
    return math.ceil(boundary / log_ratio_per_draw - 1e-12)


@pytest.mark.parametrize(("level", "passed_at"), [(0.05, 87), (0.10, 41)])
def test_no_event_passes_and_every_event_fails_where_walds_boundaries_lie(level, passed_at):
    """With no event the log likelihood ratio falls by log((1 - p0) / (1 - p1)) a draw to
    log(miss / (1 - spurious)); with an event every draw it rises by log 1.5 to
    log((1 - miss) / spurious)."""
    assert _wald_draws(math.log((1 - level) / (1 - 1.5 * level)), math.log(0.999 / 0.1)) == (
        passed_at
    )
    (never,) = check_rates(itertools.repeat(False), [Rate(level)])
    assert (never.passed, never.draws, never.events, never.by) == (True, passed_at, 0, "sequential")
    (always,) = check_rates(itertools.repeat(True), [Rate(level)])
    assert not always.passed
    assert always.draws == _wald_draws(math.log(1.5), math.log(0.9 / 0.001)) == 17


def test_the_fixed_rule_decides_at_n_max():
    """Rates of 1/16 and 1/9 at level 0.05 stay between Wald's boundaries for 100 draws;
    there the fixed rule fails a rate beyond 0.05 + 2.5 SE = 0.1045: 12 events, not 7."""
    (check,) = check_rates(itertools.cycle([True] + [False] * 15), [Rate(0.05, n_max=100)])
    assert (check.passed, check.draws, check.events, check.by) == (True, 100, 7, "fixed rule")
    (check,) = check_rates(itertools.cycle([True] + [False] * 8), [Rate(0.05, n_max=100)])
    assert (check.passed, check.draws, check.events, check.by) == (False, 100, 12, "fixed rule")


@pytest.mark.parametrize(
    ("level", "ratio", "at_level", "at_alternative", "draws"),
    [
        # P(fail | level) <=, P(fail | ratio level) >=, E[N] at 0, 0.5 level, level
        (0.05, 1.5, 0.0012, 0.90, (87, 146, 455)),
        (0.10, 1.5, 0.0011, 0.90, (41, 68, 213)),
        (0.05, 0.5, 0.0011, 0.92, (None, None, 255)),
    ],
)
def test_the_default_designs_operating_characteristics(
    level, ratio, at_level, at_alternative, draws
):
    """The numbers in the module's docstring: a valid method fails at most about 0.001 of
    the time, one at 1.5 x level (or at 0.5 x level, for the lower side) is failed at least
    0.90 of the time, a conservative one passes in tens of draws."""
    rate = Rate(level, ratio=ratio)
    fail, expected = operating_characteristic(rate, level)
    assert fail <= at_level
    assert round(expected) == draws[2]
    assert operating_characteristic(rate, ratio * level)[0] >= at_alternative
    if ratio > 1:
        for p, n in zip((0.0, 0.5 * level), draws[:2], strict=True):
            fail, expected = operating_characteristic(rate, p)
            assert fail < 1e-6
            assert round(expected) == n
        # P(fail) rises with the rate
        fails = [operating_characteristic(rate, m * level)[0] for m in (0.8, 1.0, 1.2, 1.5, 2.0)]
        assert fails == sorted(fails)


@pytest.mark.parametrize("multiple", [0.5, 1.0, 1.5])
def test_simulated_bernoulli_draws_agree_with_the_exact_characteristic(multiple):
    """400 checks of Bernoulli draws at 0.5, 1 and 1.5 x level 0.1: their share failed and
    their mean number of draws within 4 SE of the exact values."""
    rate, p = Rate(0.10), 0.10 * multiple
    rng = np.random.default_rng(int(multiple * 10))
    checks = [check_rates(iter(rng.random(rate.n_max) < p), [rate])[0] for _ in range(400)]
    fail, expected = operating_characteristic(rate, p)
    failed = np.mean([not c.passed for c in checks])
    assert abs(failed - fail) <= 4 * math.sqrt(fail * (1 - fail) / 400) + 1 / 400, failed
    draws = np.array([c.draws for c in checks])
    assert abs(draws.mean() - expected) <= 4 * draws.std() / math.sqrt(400), draws.mean()


def test_a_proportion_enters_as_a_bernoulli_draw_of_that_probability():
    """A false discovery proportion of 0.15 on every draw is failed at level 0.1 as often as
    Bernoulli(0.15) draws are (0.90), and 0.05 never is."""
    rate = Rate(0.10)
    failed = sum(
        not check_rates(itertools.repeat(0.15), [rate], rng=seed)[0].passed for seed in range(200)
    )
    assert abs(failed / 200 - 0.9028) <= 4 * math.sqrt(0.9 * 0.1 / 200), failed
    assert all(check_rates(itertools.repeat(0.05), [rate], rng=s)[0].passed for s in range(50))


def test_several_rates_on_one_stream_are_decided_each_on_its_own():
    """Each rate stops at its own draw, and the stream is not drawn from after the last."""
    pulled = []

    def stream():
        for n in itertools.count():
            pulled.append(n)
            yield (False, True)

    quick, failing = check_rates(stream(), [Rate(0.10, "none"), Rate(0.05, "all")])
    assert (quick.passed, quick.draws) == (True, 41)
    assert (failing.passed, failing.draws) == (False, 17)
    assert len(pulled) == 41
    # a bare value counts for every rate: both sides of one
    high, low = check_rates(itertools.repeat(False), [Rate(0.05), Rate(0.05, ratio=0.5)])
    assert (high.passed, high.draws) == (True, 87)
    assert not low.passed  # no event at all is a rate far below the level


def test_assert_rates_fails_the_test_and_names_the_rate():
    with pytest.raises(AssertionError, match=r"^my rate: 17/17 = 1\.0000 \(level 0\.05; FAILED"):
        assert_rates(itertools.repeat(True), Rate(0.05, "my rate"))
    assert_rates(itertools.repeat(False), Rate(0.05, "my rate"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"level": 0.0}, "level: must be in (0, 1)"),
        ({"ratio": 1.0}, "ratio: must be > 0, not 1"),
        ({"ratio": 25.0}, "ratio: must be > 0, not 1, below 1 / level"),
        ({"spurious": 0.5}, "spurious: must be in (0, 0.5)"),
        ({"miss": 0.0}, "miss: must be in (0, 0.5)"),
        ({"n_max": -3}, "n_max: must be >= 1"),
    ],
)
def test_a_bad_rate_names_its_argument(kwargs, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        Rate(**{"level": 0.05, **kwargs})


def test_bad_outcomes_name_the_argument():
    with pytest.raises(ValueError, match=r"^rates: expected a non-empty sequence of Rate"):
        check_rates([True], [])
    with pytest.raises(ValueError, match=r"^outcomes: draw 1 is \(True, False\), expected 1"):
        check_rates([False, (True, False)], [Rate(0.05)])
    with pytest.raises(ValueError, match=r"^outcomes: draw 0 is 1\.5, expected 1 value"):
        check_rates([1.5], [Rate(0.05)])
    with pytest.raises(ValueError, match=r"^outcomes: ran out after 3 draws"):
        check_rates([False] * 3, [Rate(0.05)])
