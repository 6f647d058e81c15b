"""The witness scores against a direct loop, and what they single out."""

from __future__ import annotations

import numpy as np
import pytest

from dbpa.stats import witness_scores


def _loop(a, b, similarity):
    def sim(x, y):
        if similarity == "cosine":
            return x @ y / np.linalg.norm(x) / np.linalg.norm(y)
        return -np.linalg.norm(x - y, ord=1 if similarity == "neg_l1" else 2)

    pooled = [(x, "a", i) for i, x in enumerate(a)] + [(y, "b", j) for j, y in enumerate(b)]
    scores = []
    for x, arm, i in pooled:
        to_b = [sim(x, y) for j, y in enumerate(b) if not (arm == "b" and j == i)]
        to_a = [sim(x, y) for j, y in enumerate(a) if not (arm == "a" and j == i)]
        scores.append(np.mean(to_b) - np.mean(to_a))
    return np.array(scores[: len(a)]), np.array(scores[len(a) :])


@pytest.mark.parametrize("similarity", ["cosine", "neg_l1", "neg_l2"])
def test_matches_a_direct_loop(similarity):
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(5, 4)), rng.normal(size=(7, 4)) + 0.5
    scores = witness_scores(a, b, similarity=similarity)
    original, perturbed = _loop(a, b, similarity)
    np.testing.assert_allclose(scores.original, original, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scores.perturbed, perturbed, rtol=1e-12, atol=1e-12)
    assert scores.similarity == similarity


def test_the_new_answers_score_highest_and_the_lost_ones_lowest():
    rng = np.random.default_rng(0)
    common, lost, new = np.eye(8)[0], np.eye(8)[1], np.eye(8)[2]
    noise = lambda k: 0.05 * rng.normal(size=(k, 8))  # noqa: E731
    a = np.vstack([common + noise(6), lost + noise(4)])  # originals 6-9 say "lost"
    b = np.vstack([common + noise(6), new + noise(4)])  # perturbed 6-9 say "new"
    scores = witness_scores(a, b)
    assert set(np.argsort(scores.perturbed)[-4:]) == {6, 7, 8, 9}
    assert set(np.argsort(scores.original)[:4]) == {6, 7, 8, 9}
    assert scores.perturbed[6:].min() > 0 > scores.original[6:].max()


def test_bad_arms_are_named():
    with pytest.raises(ValueError, match=r"^b"):
        witness_scores(np.ones((3, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="similarity"):
        witness_scores(np.eye(3), np.eye(3), similarity="dot")
