"""What the per-test figures draw: P0/P1 histograms on shared edges, the permutation null;
and the answers that moved (the witness rule)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dbpa.stats import histogram_edges, pooled_similarity, split_similarities, witness_scores

from ._data import Exemplar, MovedAnswers, NullView, SimilarityView, TestRow, TestView
from ._maps import Projection, map_view
from ._values import as_int, as_json

__all__ = ["Texts", "VectorsReader", "gather_test_views", "moved_answers"]

NULL_BINS = 40
"""Bins of the permutation-null histogram."""
DEFAULT_SIMILARITY_BINS = 30
"""Bins of the P0/P1 histograms when the discrepancy has no ``bins`` option."""
MOVED_PER_SIDE = 3
"""Answers shown on each side of a change (distinct texts)."""

Texts = Mapping[str, Mapping[int, str]]
"""Output texts by arm and index."""


class VectorsReader(Protocol):
    """Reads the stored vectors of arms' outputs (``storage.Store`` is one)."""

    def arms_vectors(
        self, arm_ids: Sequence[str], embedder: str, k: int
    ) -> dict[str, NDArray[np.float32]]:
        """(k, d) vectors per arm, for every arm whose first k outputs are embedded."""
        ...


def _null_view(null: NDArray[np.float64], observed: float, mean: float) -> NullView:
    edges = np.histogram_bin_edges(np.append(null, observed), bins=NULL_BINS)
    counts, _ = np.histogram(null, bins=edges)
    return NullView(
        edges=tuple(float(e) for e in edges),
        counts=tuple(int(c) for c in counts),
        observed=observed,
        mean=mean,
    )


def _similarity_view(
    original: NDArray[np.float32], perturbed: NDArray[np.float32], test: Mapping[str, Any]
) -> SimilarityView:
    """P0 and P1 on the edges the test used (jsd's ``bins``/``range``; else 30 pooled bins)."""
    similarity = str(test["similarity"])
    options = as_json(test["omega_options"])
    matrix = pooled_similarity(original, perturbed, similarity)
    split = split_similarities(matrix, len(original))
    pairs = matrix[np.triu_indices(len(matrix), 1)]
    edges = histogram_edges(
        pairs, int(options.get("bins", DEFAULT_SIMILARITY_BINS)), options.get("range", "pooled")
    )
    p0, _ = np.histogram(split.p0, bins=edges)
    p1, _ = np.histogram(split.p1, bins=edges)
    return SimilarityView(
        similarity=similarity,
        edges=tuple(float(e) for e in edges),
        p0=tuple(float(c) / split.p0.size for c in p0),
        p1=tuple(float(c) / split.p1.size for c in p1),
        p0_mean=float(split.p0.mean()),
        p1_mean=float(split.p1.mean()),
    )


def _exemplars(
    scores: NDArray[np.float64], texts: Mapping[int, str], n: int
) -> tuple[Exemplar, ...]:
    """The ``n`` distinct texts with the largest ``scores`` (by index), with their copies."""
    copies: dict[str, int] = {}
    for i in range(len(scores)):
        copies[texts[i]] = copies.get(texts[i], 0) + 1
    chosen: dict[str, Exemplar] = {}
    for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        if texts[i] not in chosen:
            chosen[texts[i]] = Exemplar(i, texts[i], float(scores[i]), copies[texts[i]])
        if len(chosen) == n:
            break
    return tuple(chosen.values())


def moved_answers(
    original: NDArray[np.float32],
    perturbed: NDArray[np.float32],
    original_texts: Mapping[int, str],
    perturbed_texts: Mapping[int, str],
    similarity: str = "cosine",
    n: int = MOVED_PER_SIDE,
) -> MovedAnswers:
    """The ``n`` perturbed outputs most typical after the perturbation and the ``n`` original
    outputs most typical before it (distinct texts), by their witness scores."""
    scores = witness_scores(original, perturbed, similarity=similarity)
    before = _exemplars(-scores.original, original_texts, n)
    return MovedAnswers(
        after=_exemplars(scores.perturbed, perturbed_texts, n),
        before=tuple(Exemplar(e.index, e.text, -e.score, e.copies) for e in before),
    )


def gather_test_views(
    store: VectorsReader, rows: Iterable[TestRow], tests: pd.DataFrame, texts: Texts
) -> tuple[TestView, ...]:
    """One view per tested row; P0/P1 and the answers that moved only where both arms'
    outputs have stored vectors (and ``texts`` holds their first k texts)."""
    tested = [(row, tests.loc[row.test_id]) for row in rows]
    arms: dict[tuple[str, int], set[str]] = {}  # (embedder, k) -> arms, one query each
    for row, test in tested:
        embedder = str(test["embedder"])
        arms.setdefault((embedder, int(test["k_a"])), set()).add(row.original_arm)
        arms.setdefault((embedder, int(test["k_b"])), set()).add(row.perturbed_arm)
    vectors = {
        (arm_id, embedder, k): found
        for (embedder, k), arm_ids in arms.items()
        for arm_id, found in store.arms_vectors(sorted(arm_ids), embedder, k).items()
    }

    def arm_vectors(row: TestRow, test: Any) -> tuple[Any, Any]:
        embedder = str(test["embedder"])
        return (
            vectors.get((row.original_arm, embedder, int(test["k_a"]))),
            vectors.get((row.perturbed_arm, embedder, int(test["k_b"]))),
        )

    # One output map per family: every embedded arm of its drawn tests, once each.
    of_family: dict[str, dict[tuple[str, int], Any]] = {}
    for row, test in tested:
        original, perturbed = arm_vectors(row, test)
        if original is not None and perturbed is not None:
            family_arms = of_family.setdefault(row.family, {})
            family_arms[(row.original_arm, int(test["k_a"]))] = original
            family_arms[(row.perturbed_arm, int(test["k_b"]))] = perturbed
    projections = {family: Projection(list(a.values())) for family, a in of_family.items()}

    views = []
    for row, test in tested:
        original, perturbed = arm_vectors(row, test)
        embedder = str(test["embedder"])
        similarity, note, moved, output_map = None, None, None, None
        pooled = as_int(test.get("n_prompts")) if hasattr(test, "get") else None
        if pooled is not None:  # its arms are only its first prompt's
            note = (
                f"the pooled test over {pooled} prompts (its null distribution): each prompt's "
                "answers are under Prompts x perturbations"
            )
        elif original is None or perturbed is None:
            note = f"no P0/P1 histogram: the outputs have no stored {embedder} embeddings"
        else:
            similarity = _similarity_view(original, perturbed, test)
            output_map = map_view(projections[row.family], original, perturbed)
            texts_a, texts_b = texts.get(row.original_arm, {}), texts.get(row.perturbed_arm, {})
            if all(i in texts_a for i in range(len(original))) and all(
                i in texts_b for i in range(len(perturbed))
            ):
                moved = moved_answers(
                    original, perturbed, texts_a, texts_b, str(test["similarity"])
                )
        null = _null_view(
            np.asarray(test["null_distribution"], dtype=np.float64),
            float(test["statistic"]),
            float(test["null_mean"]),
        )
        views.append(
            TestView(row.family, row.perturbation_id, null, similarity, note, moved, output_map)
        )
    return tuple(views)
