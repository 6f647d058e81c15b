"""Multiplicity correction of one family."""

from __future__ import annotations

from typing import Any

from prefect import task

from dbpa.analysis import AnalysisSpec, Decision, decide_family
from tasks._cache import content_key


def _describe(parameters: dict[str, Any]) -> Any:
    described = [parameters["p_values"], parameters["analysis"].model_dump()]
    if parameters.get("equivalence_p") is not None:  # without a margin: the keys of before
        described += [parameters["equivalence_p"], parameters["margin"]]
    return described


@task(
    name="correct",
    task_run_name="correct {family}",
    cache_key_fn=content_key(_describe),
)
def correct_family(
    family: str,
    p_values: dict[str, float | None],
    analysis: AnalysisSpec,
    equivalence_p: dict[str, float] | None = None,
    margin: float | None = None,
) -> list[Decision]:
    """Adjusted p-values and decisions; untested perturbations count as p = 1. With the
    equivalence p-values (against ``margin``): changed, equivalent or inconclusive."""
    return decide_family(p_values, analysis, equivalence_p, margin)
