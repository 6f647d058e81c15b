"""The conformal processes' bag (``dbpa.stats._bag``): a multiset whose counts, moments and
kernel densities, kept as rows join and leave (outputs that repeat, entries that lose every
row and come back, entries compacted away), equal those computed directly from the rows at
its positions, and whose equal outputs share one entry.
"""

from __future__ import annotations

import numpy as np

from dbpa.stats._bag import Bag

D = 96
"""Above the width the bag projects to, so that the projection is exercised."""
WIDTH = 32


def outputs(rng: np.random.Generator, n: int, answers: np.ndarray) -> np.ndarray:
    """``n`` outputs: one of ``answers`` each, a third of them moved a little (new rows)."""
    x = answers[rng.integers(0, len(answers), n)].copy()
    moved = rng.random(n) < 1 / 3
    x[moved] += 0.05 * rng.normal(size=(int(moved.sum()), D))
    return x


def test_what_the_bag_keeps_equals_what_its_positions_give():
    rng = np.random.default_rng(70)
    projection = rng.normal(size=(D, WIDTH)) / np.sqrt(WIDTH)
    answers = rng.normal(size=(4, D))
    bandwidth = 0.5
    bag = Bag(projection, bandwidth=bandwidth)
    added: list[np.ndarray] = []  # the outputs at the bag's positions, in order
    compacted = False
    for _ in range(60):
        new = outputs(rng, int(rng.integers(1, 8)), answers)
        bag.add(new)
        added.extend(new)
        if len(added) > 40:  # random rows leave, as the tick process's thinning does
            keep = np.sort(rng.choice(len(added), 30, replace=False))
            before = len(bag.rows)
            bag.keep(keep)
            compacted |= len(bag.rows) < before
            added = [added[i] for i in keep]
        rows = np.array(added) @ projection
        assert len(bag) == len(rows)
        assert np.allclose(bag.rows[bag.ids], rows, rtol=0.0, atol=1e-12)
        assert np.array_equal(bag.counts, np.bincount(bag.ids, minlength=len(bag.rows)))
        assert np.allclose(bag.mean(), rows.mean(axis=0), atol=1e-12)
        assert np.allclose(bag.covariance(), np.cov(rows.T, bias=True), atol=1e-12)
        squared = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(axis=2)
        direct = np.exp(-squared / bandwidth).sum(axis=1)
        densities = bag.densities()[bag.ids]
        assert np.allclose(densities, direct, rtol=1e-7)
        same = np.array([[a.tobytes() == b.tobytes() for b in added] for a in added])
        assert np.array_equal(same, bag.ids[:, None] == bag.ids[None, :])
    assert compacted  # the run had entries lose every row, and the bag compacted them


def test_equal_outputs_get_equal_densities_exactly_at_any_bandwidth():
    """One answer in most of the bag and a few others: its positions' densities are one
    value, to the last bit, however small the bandwidth."""
    rng = np.random.default_rng(71)
    answer = rng.normal(size=D)
    others = answer + 1e-6 * rng.normal(size=(5, D))
    bag = Bag(rng.normal(size=(D, WIDTH)) / np.sqrt(WIDTH), bandwidth=1e-14)
    for _ in range(30):
        bag.add(np.concatenate([np.repeat(answer[None, :], 4, axis=0), others[:1]]))
        others = np.roll(others, 1, axis=0)
    densities = bag.densities()[bag.ids]
    first = bag.ids == bag.ids[0]
    assert first.sum() == 120
    assert np.ptp(densities[first]) == 0.0
