"""A comparison tested and corrected: each arm's drift test and its decision in the family."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dbpa.analysis import Decision, PerturbationTestRecord, decide_family, run_test

from ._plan import Comparison, DriftJob

__all__ = ["DriftResult", "VectorReader", "decide", "load_vectors", "run_comparison"]


@runtime_checkable
class VectorReader(Protocol):
    """Reads the stored vectors of an arm's outputs (``storage.Store`` is one)."""

    def arm_vectors(self, arm_id: str, embedder: str, k: int) -> NDArray[np.float32]:
        """(k, d) vectors of the arm's first k outputs; ``LookupError`` when fewer are
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


def load_vectors(
    store: VectorReader, comparison: Comparison
) -> tuple[list[tuple[DriftJob, NDArray[np.float32], NDArray[np.float32]]], dict[str, str]]:
    """The (job, reference vectors, vectors) of every arm embedded at both epochs, and why
    the others cannot be tested (label -> reason)."""
    k = comparison.k
    ready, skipped = [], {}
    for job in comparison.jobs:
        try:
            reference = store.arm_vectors(job.reference_arm, comparison.embedder, k)
            current = store.arm_vectors(job.arm, comparison.embedder, k)
        except LookupError:
            skipped[job.label] = (
                f"not sampled and embedded (k={k}) at both {comparison.reference_epoch} "
                f"and {comparison.epoch}"
            )
            continue
        ready.append((job, reference, current))
    return ready, skipped


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
