"""Multiplicity correction of one family."""

from __future__ import annotations

from typing import Any

from prefect import task

from dbpa.analysis import AnalysisSpec, Decision, decide_family
from tasks._cache import content_key


def _describe(parameters: dict[str, Any]) -> Any:
    return [parameters["p_values"], parameters["analysis"].model_dump()]


@task(
    name="correct",
    task_run_name="correct {family}",
    cache_key_fn=content_key(_describe),
)
def correct_family(
    family: str, p_values: dict[str, float | None], analysis: AnalysisSpec
) -> list[Decision]:
    """Adjusted p-values and decisions; untested perturbations count as p = 1."""
    return decide_family(p_values, analysis)
