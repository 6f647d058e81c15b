"""Error-rate and coverage checks of a simulation, as a sequential test of the simulation itself.

A simulation of a statistical method gives one Bernoulli outcome per simulated audit: a true
null rejected, an interval that missed the truth. Its check is itself a test, of the rate
``p`` of those outcomes: the method is valid when ``p <= level``. ``check_rates`` runs Wald's
sequential probability ratio test (SPRT, Wald 1945) of ``p = level`` (pass) against ``p =
ratio * level`` (fail), taking the outcomes one at a time from an iterator, so a clearly
valid method stops after a few dozen audits and an invalid one is failed as soon as the
evidence is in. ``ratio < 1`` checks the other side (a rate that must not be too low: a
permutation test's exact size, a coverage that must be nominal rather than conservative).
Where neither boundary is crossed by ``n_max`` draws, the fixed rule the tests used before
decides: fail when the rate is beyond ``level +- Z * SE`` of ``n_max`` draws.

Operating characteristics of the default design (spurious 0.001, miss 0.1, ratio 1.5, Z =
2.5, ``n_max = 200 / level``), exact by ``operating_characteristic`` (a dynamic programme
over the draws; ``tests/support/test_rates.py`` checks it against simulated Bernoulli
draws), as P(fail) and the expected number of draws E[N]:

=========  ======  =========  =========  =========  =========  ============
level      n_max   rate 0     0.5 level  level      1.5 level  P(fail) at
                   E[N]       E[N]       E[N]       E[N]       level / 1.5x
=========  ======  =========  =========  =========  =========  ============
0.05       4000    87         146        455        1050       0.0011 / 0.90
0.10       2000    41         68         213        494        0.0010 / 0.90
=========  ======  =========  =========  =========  =========  ============

So a conservative method (the common case: an equivalence test at the margin, an interval
that over-covers) is passed after 87 draws at alpha = 0.05 (41 for a 90% interval), one of
exact size (a permutation test) after about 455, and a method at 1.5 alpha is failed with
probability 0.90. Every landing runs dozens of these checks; the seeds are fixed, so a check
that passes keeps passing until the code under test changes its draws, and then fails
spuriously with probability about 0.001 if the method is exactly at its level (far less if
it is conservative). The fixed rule alone at 0.001 / 0.90 needs about 1500 draws for every
method, valid or not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

Z = 2.5
"""Standard errors beyond the level at which the fixed rule fails a truncated check."""


@dataclass(frozen=True)
class Rate:
    """One rate to check: valid at ``level``, failed at ``ratio * level``.

    ``spurious`` is Wald's error probability of failing a method whose rate is ``level``,
    ``miss`` of passing one whose rate is ``ratio * level``; at ``n_max`` draws (default
    ``ceil(200 / min(level, ratio * level))``) the fixed rule decides what the SPRT has not.
    """

    level: float
    what: str = "rate"
    ratio: float = 1.5
    spurious: float = 0.001
    miss: float = 0.1
    n_max: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"level: must be in (0, 1), got {self.level!r}")
        if not (0.0 < self.ratio != 1.0 and self.ratio * self.level < 1.0):
            raise ValueError(f"ratio: must be > 0, not 1, below 1 / level, got {self.ratio!r}")
        for name in ("spurious", "miss"):
            if not 0.0 < getattr(self, name) < 0.5:
                raise ValueError(f"{name}: must be in (0, 0.5), got {getattr(self, name)!r}")
        if self.n_max == 0:
            smaller = min(self.level, self.ratio * self.level)
            object.__setattr__(self, "n_max", math.ceil(200 / smaller))
        if self.n_max < 1:
            raise ValueError(f"n_max: must be >= 1, got {self.n_max!r}")

    @cached_property
    def _log_ratios(self) -> tuple[float, float, float, float]:
        """Log likelihood ratio of an event and of a non-event, and Wald's two boundaries."""
        p0, p1 = self.level, self.ratio * self.level
        return (
            math.log(p1 / p0),
            math.log((1 - p1) / (1 - p0)),
            math.log((1 - self.miss) / self.spurious),
            math.log(self.miss / (1 - self.spurious)),
        )

    def sequential(self, events: Any, draws: int) -> Any:
        """Wald's verdict after ``events`` events in ``draws`` draws (a count, or an array of
        them): -1 fail, 1 pass, 0 go on."""
        event, no_event, fail, accept = self._log_ratios
        llr = events * event + (draws - events) * no_event
        return (llr <= accept) * 1 - (llr >= fail) * 1

    def fixed(self, events: Any, draws: int) -> Any:
        """The fixed rule at ``draws``: -1 where the rate is beyond ``level +- Z SE``, else 1."""
        bound = Z * math.sqrt(self.level * (1 - self.level) / draws)
        rate = events / draws
        beyond = rate > self.level + bound if self.ratio > 1 else rate < self.level - bound
        return 1 - 2 * beyond


@dataclass(frozen=True)
class RateCheck:
    """What one sequential check saw and decided.

    ``events`` of ``draws`` outcomes; ``by`` is ``"sequential"`` when a boundary of the SPRT
    decided, ``"fixed rule"`` when ``n_max`` draws were reached first.
    """

    rate: Rate
    passed: bool
    draws: int
    events: int
    by: str

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        side = ">=" if self.rate.ratio > 1 else "<="
        return (
            f"{self.rate.what}: {self.events}/{self.draws} = {self.events / self.draws:.4f} "
            f"(level {self.rate.level:g}; {verdict} against {side} {self.rate.ratio:.3g} x "
            f"level, {self.by})"
        )


def check_rates(
    outcomes: Iterable[Sequence[float] | float], rates: Sequence[Rate], *, rng: int = 0
) -> tuple[RateCheck, ...]:
    """Draw outcomes until every rate is decided.

    Each draw gives one value per rate (a bare value counts for every rate: two sides of
    one rate), a bool or a probability in [0, 1]: a false discovery proportion enters as a
    Bernoulli draw of that probability from ``rng``, so its rate is the FDR. A rate decided
    early ignores later draws; the iterator is not drawn from once all are decided.
    """
    rates = tuple(rates)
    if not rates or not all(isinstance(r, Rate) for r in rates):
        raise ValueError("rates: expected a non-empty sequence of Rate")
    coin = np.random.default_rng(rng)
    events = [0] * len(rates)
    done: list[RateCheck | None] = [None] * len(rates)
    draws = 0
    for outcome in outcomes:
        values = _values(outcome, len(rates), draws)
        draws += 1
        for i, rate in enumerate(rates):
            if done[i] is not None:
                continue
            value = values[i]
            events[i] += value == 1.0 or (value > 0.0 and coin.random() < value)
            verdict, by = rate.sequential(events[i], draws), "sequential"
            if verdict == 0 and draws >= rate.n_max:
                verdict, by = rate.fixed(events[i], draws), "fixed rule"
            if verdict:
                done[i] = RateCheck(rate, verdict > 0, draws, events[i], by)
        if all(check is not None for check in done):
            return tuple(check for check in done if check is not None)
    raise ValueError(f"outcomes: ran out after {draws} draws, before every rate was decided")


def _values(outcome: Any, n: int, draw: int) -> tuple[float, ...]:
    try:
        values = (float(outcome),) * n if np.ndim(outcome) == 0 else tuple(map(float, outcome))
    except (TypeError, ValueError):
        values = ()
    if len(values) != n or not all(0.0 <= v <= 1.0 for v in values):
        raise ValueError(f"outcomes: draw {draw} is {outcome!r}, expected {n} value(s) in [0, 1]")
    return values


def assert_rates(outcomes: Iterable[Sequence[float] | float], *rates: Rate) -> None:
    """``check_rates``, failing the calling test if any rate fails; prints every check."""
    checks = check_rates(outcomes, rates)
    for check in checks:
        print(check)
    failed = [str(check) for check in checks if not check.passed]
    assert not failed, "; ".join(failed)


def operating_characteristic(rate: Rate, p: float) -> tuple[float, float]:
    """Exact P(fail) and E[draws] of one check when each outcome is an event with
    probability ``p``: the distribution of the event count over the undecided paths,
    carried draw by draw (counts past Wald's upper boundary at ``n_max`` never stay undecided:
    the boundary rises with the draws)."""
    event, no_event, fail, accept = rate._log_ratios
    upper = fail if event > no_event else accept
    last = (upper - rate.n_max * no_event) / (event - no_event)
    counts = np.arange(min(rate.n_max, max(0, math.ceil(last))) + 2, dtype=float)
    paths = np.zeros(counts.size)
    paths[0] = 1.0
    failed = expected = 0.0
    for n in range(1, rate.n_max + 1):
        paths[1:] = paths[1:] * (1 - p) + paths[:-1] * p
        paths[0] *= 1 - p
        verdict = rate.sequential(counts, n)
        if n == rate.n_max:
            verdict = np.where(verdict != 0, verdict, rate.fixed(counts, n))
        failed += paths[verdict < 0].sum()
        expected += n * paths[verdict != 0].sum()
        paths[verdict != 0] = 0.0
    return failed, expected
