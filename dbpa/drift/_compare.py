"""A comparison tested and corrected: each arm's drift test and its decision in the family."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dbpa.analysis import Decision, PerturbationTestRecord, decide_family, run_test

from ._plan import Comparison, DriftJob

__all__ = [
    "DriftResult",
    "Loaded",
    "VectorReader",
    "decide",
    "load_many",
    "load_vectors",
    "run_comparison",
]


@runtime_checkable
class VectorReader(Protocol):
    """Reads the stored vectors of arms' outputs (``storage.Store`` is one)."""

    def arms_vectors(
        self, arm_ids: Sequence[str], embedder: str, k: int
    ) -> dict[str, NDArray[np.float32]]:
        """(k, d) vectors per arm, in output order, for every arm whose first k outputs are
        embedded."""
        ...


@dataclass(frozen=True)
class DriftResult:
    """One arm's drift test and its decision within the comparison."""

    job: DriftJob
    record: PerturbationTestRecord
    decision: Decision

    def row(self, comparison: Comparison) -> dict[str, Any]:
        """The row ``Store.add_drift`` stores."""
        return {
            "reference_epoch": comparison.reference_epoch,
            "arm_id": self.job.arm,
            "reference_arm": self.job.reference_arm,
            "family": self.job.family,
            "role": self.job.role,
            "test_id": self.job.test_id,
            "method": comparison.config.analysis.correction,
            "alpha": comparison.config.analysis.alpha,
            "adjusted_p": self.decision.adjusted_p,
            "reject": self.decision.reject,
        }


COMPARISONS_PER_READ = 64
"""Comparisons (a replay's ticks) whose vectors ``load_many`` reads at once."""
Loaded = tuple[list[tuple[DriftJob, NDArray[np.float32], NDArray[np.float32]]], dict[str, str]]
"""The (job, reference vectors, vectors) of every arm of a comparison embedded at both
epochs, and why the others cannot be tested (label -> reason)."""


def load_vectors(store: VectorReader, comparison: Comparison) -> Loaded:
    """The vectors of ``comparison``'s arms (``Loaded``)."""
    return next(load_many(store, [comparison]))


def load_many(store: VectorReader, comparisons: Sequence[Comparison]) -> Iterator[Loaded]:
    """``load_vectors`` of each comparison in turn, ``COMPARISONS_PER_READ`` comparisons
    at a time with one read per embedder and k (a monitor's replay compares every tick with
    its baseline: a read per arm and tick took most of its time; all at once, a long history
    of many arms would not fit in memory)."""
    for start in range(0, len(comparisons), COMPARISONS_PER_READ):
        chunk = comparisons[start : start + COMPARISONS_PER_READ]
        wanted: dict[tuple[str, int], set[str]] = {}
        for c in chunk:
            arms = wanted.setdefault((c.embedder, c.k), set())
            arms.update(a for job in c.jobs for a in (job.reference_arm, job.arm))
        found = {key: store.arms_vectors(sorted(arms), *key) for key, arms in wanted.items()}
        for c in chunk:
            vectors = found[(c.embedder, c.k)]
            ready, skipped = [], {}
            for job in c.jobs:
                if job.reference_arm in vectors and job.arm in vectors:
                    ready.append((job, vectors[job.reference_arm], vectors[job.arm]))
                else:
                    skipped[job.label] = (
                        f"not sampled and embedded (k={c.k}) at both {c.reference_epoch} and "
                        f"{c.epoch}"
                    )
            yield ready, skipped


def decide(
    comparison: Comparison, jobs: Sequence[DriftJob], records: Sequence[PerturbationTestRecord]
) -> tuple[DriftResult, ...]:
    """Correct the comparison's tests as one family."""
    if not jobs:
        return ()
    by_test = {r.test_id: r for r in records}
    p_values: dict[str, float | None] = {j.label: by_test[j.test_id].p_value for j in jobs}
    decisions = decide_family(p_values, comparison.config.analysis)
    return tuple(
        DriftResult(job, by_test[job.test_id], d) for job, d in zip(jobs, decisions, strict=True)
    )


def run_comparison(
    store: VectorReader, comparison: Comparison
) -> tuple[tuple[DriftResult, ...], dict[str, str]]:
    """Test and correct a comparison in this process: its results, and the arms skipped."""
    ready, skipped = load_vectors(store, comparison)
    records = [
        run_test(
            job.test_id,
            reference,
            current,
            original_arm=job.reference_arm,
            perturbed_arm=job.arm,
            embedder=comparison.embedder,
            analysis=comparison.config.analysis,
        )
        for job, reference, current in ready
    ]
    return decide(comparison, [job for job, _, _ in ready], records), skipped
