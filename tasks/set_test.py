"""Pooled tests of perturbations over a set of prompts (compute only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from prefect import task

from dbpa.analysis import AnalysisSpec
from dbpa.set_analysis import SetTestRecord, run_set_test
from tasks._cache import array_digest, content_key


@dataclass(frozen=True)
class SetJob:
    """One pooled test: every prompt's two arms' embeddings."""

    set_test_id: str
    prompt_ids: tuple[str, ...]
    test_ids: tuple[str, ...]
    arms: tuple[str, str]
    """The first prompt's original and perturbed arm (the pooled test's stored arms)."""
    originals: tuple[NDArray[np.float32], ...] = field(repr=False)
    perturbed: tuple[NDArray[np.float32], ...] = field(repr=False)


def _describe(parameters: dict[str, Any]) -> Any:
    """Each pooled test's id with the digests of every vector it reads, the embedder and
    every analysis setting (ids do not pin the outputs)."""
    jobs = [
        [
            job.set_test_id,
            list(job.test_ids),
            [array_digest(x) for x in job.originals],
            [array_digest(x) for x in job.perturbed],
        ]
        for job in parameters["jobs"]
    ]
    return [jobs, parameters["embedder"], parameters["analysis"].model_dump(mode="json")]


@task(name="test-set", task_run_name="test {label}", cache_key_fn=content_key(_describe))
def run_set_tests(
    jobs: list[SetJob], embedder: str, analysis: AnalysisSpec, label: str
) -> list[SetTestRecord]:
    """One seeded pooled test per job (stratified within prompts)."""
    return [
        run_set_test(
            job.set_test_id,
            job.originals,
            job.perturbed,
            prompt_ids=job.prompt_ids,
            test_ids=job.test_ids,
            arms=job.arms,
            embedder=embedder,
            analysis=analysis,
        )
        for job in jobs
    ]
