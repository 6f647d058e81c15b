"""What a run records besides its tasks' results: the run row, its family, the corrected
decisions. Prefect-free, so that ``dbpa run`` can decide a finished audit from the record
without starting Prefect (see ``dbpa.cli._from_record``), with the same code as the flow."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version

import storage
from dbpa.analysis import (
    AnalysisSpec,
    Decision,
    EquivalenceSpec,
    Margin,
    equivalence_p_values,
    family_margin,
)
from dbpa.config import AuditConfig
from dbpa.plan import AuditPlan, PlannedTest

CorrectFamily = Callable[
    [str, dict[str, float | None], AnalysisSpec, dict[str, float] | None, float | None],
    list[Decision],
]
"""(family, p-values, analysis, equivalence p-values, margin) -> the family's decisions."""
Warn = Callable[[str], None]

_PACKAGES = ("dbpa", "prefect", "litellm", "duckdb", "numpy", "scipy", "sentence-transformers")


def versions() -> dict[str, str]:
    """The versions of the packages a run's results depend on."""
    found = {}
    for package in _PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def new_run_id(config: AuditConfig, started: datetime, suffix: str) -> str:
    """``<audit>-<started, UTC>-<suffix>``: the id of a run (the suffix tells runs that
    start in the same second apart: the flow run's id)."""
    return f"{config.name}-{started:%Y%m%d-%H%M%S}-{suffix}"


def start_run(
    store: storage.Store,
    plan: AuditPlan,
    config: AuditConfig,
    run_id: str,
    flow_run_id: str | None,
    warn: Warn,
) -> None:
    """Record the run, its arms and its family (marking runs left unfinished as crashed)."""
    if crashed := store.mark_interrupted_runs():
        warn(f"{crashed} earlier run(s) had been interrupted; marked crashed")
    store.start_run(
        run_id,
        audit=config.name,
        config=config.model_dump(mode="json"),
        config_hash=config.fingerprint(),
        epoch=config.epoch,
        flow_run_id=flow_run_id,
        versions=versions(),
    )
    store.add_arms(plan.arms)
    store.add_family(run_id, [t.row() for t in plan.tests])


def correct_families(
    plan: AuditPlan,
    store: storage.Store,
    config: AuditConfig,
    run_id: str,
    correct: CorrectFamily,
    warn: Warn,
) -> None:
    """Adjust each family's p-values and store the decisions (with an equivalence margin:
    calibrate it, and decide changed, equivalent or inconclusive)."""
    test_ids = [t.test_id for t in plan.tests]
    stored = store.test_p_values(test_ids)
    intervals = store.effect_intervals(test_ids) if config.equivalence else {}
    analysis = config.analysis
    members_of: dict[str, list[PlannedTest]] = {family: [] for family in plan.families}
    for t in plan.tests:
        members_of[t.family].append(t)
    for family, members in members_of.items():
        p_values = {t.perturbation.id: stored.get(t.test_id) for t in members}
        margin = None
        equivalence_p = None
        if config.equivalence:
            margin = _margin(plan, store, config.equivalence, family, members, warn)
            equivalence_p = equivalence_p_values(
                {t.perturbation.id: intervals.get(t.test_id) for t in members}, margin.value
            )
        value = None if margin is None else margin.value
        decisions = correct(family, p_values, analysis, equivalence_p, value)
        store.add_corrections(
            run_id, family, analysis.correction, analysis.alpha, decisions, margin
        )


def _margin(
    plan: AuditPlan,
    store: storage.Store,
    spec: EquivalenceSpec,
    family: str,
    members: Sequence[PlannedTest],
    warn: Warn,
) -> Margin:
    """The family's margin: the config's number, or calibrated on its stored replicate
    arms (every two of them and the original) or on its controls (each against the
    original). Arms without k embedded outputs (a model failed) are left out."""
    pairs: list[tuple[str, str]] = []
    if spec.margin == "replicates":
        arms = [members[0].original.arm_id, *(a.arm_id for a in plan.replicates[family])]
        pairs = list(itertools.combinations(arms, 2))
    elif spec.margin == "controls":
        pairs = [
            (t.original.arm_id, t.perturbed.arm_id)
            for t in members
            if t.perturbation.label == "control"
        ]
    vectors: Mapping[str, object] = store.arms_vectors(
        sorted({a for pair in pairs for a in pair}), plan.embedder, plan.k
    )
    complete = [(vectors[a], vectors[b]) for a, b in pairs if a in vectors and b in vectors]
    margin = family_margin(spec, complete)  # type: ignore[arg-type]
    if margin.value is None:
        warn(
            f"{family}: no equivalence margin (the {spec.margin} arms are not all sampled): "
            "every perturbation is changed or inconclusive"
        )
    return margin
