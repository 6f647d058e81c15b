"""Permutation tests of perturbed arms against their original arm (compute only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from prefect import task

from dbpa.analysis import AnalysisSpec, PerturbationTestRecord, run_test
from tasks._cache import array_digest, content_key


@dataclass(frozen=True)
class TestJob:
    """The two arms' embeddings of one planned test."""

    __test__ = False  # not a pytest class

    test_id: str
    original_arm: str
    perturbed_arm: str
    original: NDArray[np.float32] = field(repr=False)
    perturbed: NDArray[np.float32] = field(repr=False)


def _describe(parameters: dict[str, Any]) -> Any:
    """Each test's id with the digests of the vectors it reads, the embedder and every
    analysis setting: the id alone does not pin the outputs it was computed from."""
    jobs = [
        [
            job.test_id,
            job.original_arm,
            job.perturbed_arm,
            array_digest(job.original),
            array_digest(job.perturbed),
        ]
        for job in parameters["jobs"]
    ]
    return [jobs, parameters["embedder"], parameters["analysis"].model_dump(mode="json")]


@task(
    name="test",
    task_run_name="test {label}",
    cache_key_fn=content_key(_describe),
)
def run_tests(
    jobs: list[TestJob], embedder: str, analysis: AnalysisSpec, label: str
) -> list[PerturbationTestRecord]:
    """One seeded permutation test per job (the pooled matrix is built once per test)."""
    return [
        run_test(
            job.test_id,
            job.original,
            job.perturbed,
            original_arm=job.original_arm,
            perturbed_arm=job.perturbed_arm,
            embedder=embedder,
            analysis=analysis,
        )
        for job in jobs
    ]
