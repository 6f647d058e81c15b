"""What a run records besides its tasks' results: the run row, its family, the corrected
decisions. Prefect-free, so that ``dbpa run`` can decide a finished audit from the record
without starting Prefect (see ``dbpa.launch._from_record``), with the same code as the flow."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version

import numpy as np

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
from dbpa.plan import AuditPlan, PlannedTest, look_plan
from dbpa.set_analysis import family_drilldown, family_set_margin, set_equivalence_p
from dbpa.stats import sequential_p_value
from flows._sequential import LookResult, SequentialOutcome, family_outputs, look_rows

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
    rows = [t.prompt_row(i) for tests in plan.set_members.values() for i, t in enumerate(tests)]
    store.add_prompt_tests(run_id, rows)


def correct_families(
    plan: AuditPlan,
    store: storage.Store,
    config: AuditConfig,
    run_id: str,
    correct: CorrectFamily,
    warn: Warn,
    sequential: SequentialOutcome | None = None,
) -> None:
    """Adjust each family's p-values and store the decisions (with an equivalence margin:
    calibrate it, and decide changed, equivalent or inconclusive). In a sequential audit
    the p-values are the tests' sequential p-values where they stopped, and the looks,
    the stops and the outputs used are stored too."""
    test_ids = [t.test_id for t in plan.all_tests]
    stored = store.test_p_values(test_ids) if sequential is None else {}
    intervals = store.effect_intervals(test_ids) if config.equivalence and not sequential else {}
    analysis = config.analysis
    members_of: dict[str, list[PlannedTest]] = {family: [] for family in plan.families}
    for t in plan.tests:
        members_of[t.family].append(t)
    for family, members in members_of.items():
        if sequential is None:
            p_values = {t.perturbation.id: stored.get(t.test_id) for t in members}
        else:
            stops = {
                t.perturbation.id: sequential.stops[(t.family, t.perturbation.id)] for t in members
            }
            p_values = {pid: stop.p_value for pid, stop in stops.items()}
        margin = None
        equivalence_p = None
        if config.equivalence:
            k = plan.k if sequential is None else family_outputs(plan, sequential, family)
            margin = _margin(plan, store, config.equivalence, family, members, warn, k)
            if sequential is not None:
                equivalence_p = _sequential_equivalence(
                    store, plan, sequential, members, margin.value
                )
            elif plan.set_members:
                equivalence_p = {
                    t.perturbation.id: set_equivalence_p(
                        [intervals.get(m.test_id) for m in plan.set_members[t.test_id]],
                        margin.value,
                    )
                    for t in members
                }
            else:
                equivalence_p = equivalence_p_values(
                    {t.perturbation.id: intervals.get(t.test_id) for t in members}, margin.value
                )
        value = None if margin is None else margin.value
        decisions = correct(family, p_values, analysis, equivalence_p, value)
        where = None
        if sequential is not None:
            where = {pid: (stop.stopped_at, stop.reason) for pid, stop in stops.items()}
            looks = {pid: stop.looks for pid, stop in stops.items()}
            store.add_sequential_looks(run_id, family, look_rows(sequential.design, looks, stops))
        store.add_corrections(
            run_id, family, analysis.correction, analysis.alpha, decisions, margin, where
        )
        if plan.set_members:
            rows = _drilldown_rows(store, plan, members, p_values, analysis, sequential)
            store.add_prompt_decisions(run_id, family, rows)
    if sequential is not None:
        store.set_run_outputs(run_id, sequential.outputs, sequential.fixed_outputs)


def _drilldown_rows(
    store: storage.Store,
    plan: AuditPlan,
    members: Sequence[PlannedTest],
    p_values: Mapping[str, float | None],
    analysis: AnalysisSpec,
    sequential: SequentialOutcome | None = None,
) -> list[dict[str, object]]:
    """A family's drill-down over its prompts: per perturbation whose pooled test is stored,
    each prompt's adjusted p-value and whether it moved. In a sequential audit a prompt's
    p-value is ``min_j p_j / w_j`` over the looks its pooled test took (valid however the
    test stopped), and the rows name the pooled test of its last look."""
    set_ids = {t.perturbation.id: t.test_id for t in members}
    of_prompts = {t.perturbation.id: plan.set_members[t.test_id] for t in members}
    if sequential is None:
        prompt_p = store.set_prompt_p_values(list(set_ids.values()))
        by_perturbation = {pid: prompt_p[tid] for pid, tid in set_ids.items() if tid in prompt_p}
    else:
        stops = {
            t.perturbation.id: sequential.stops[(t.family, t.perturbation.id)] for t in members
        }
        looks = {pid: stop.looks for pid, stop in stops.items()}
        by_perturbation = _sequential_prompt_p(store, looks, sequential.design.weights)
        set_ids |= {pid: taken[-1].test_id for pid, taken in looks.items() if taken}
    found = family_drilldown(by_perturbation, p_values, analysis)
    if found is None:
        return []
    tested, drill = found
    rows: list[dict[str, object]] = []
    for j, pid in enumerate(tested):
        for i, prompt in enumerate(of_prompts[pid]):
            adjusted = float(drill.prompt_adjusted[j][i])
            rows.append(
                {
                    "perturbation_id": pid,
                    "prompt_id": prompt.prompt_id,
                    "set_test_id": set_ids[pid],
                    "position": i,
                    "within": drill.within,
                    "level": drill.level,
                    "adjusted_p": None if np.isnan(adjusted) else adjusted,
                    "moved": bool(drill.moved[j][i]),
                }
            )
    return rows


def _sequential_prompt_p(
    store: storage.Store,
    looks: Mapping[str, Sequence[LookResult]],
    weights: Sequence[float],
) -> dict[str, list[float]]:
    """perturbation id -> each prompt's ``min_j p_j / w_j`` over the looks its pooled test
    took (the prompt's p-values from the looks' pooled tests), for those stored at every
    look."""
    stored = store.set_prompt_p_values([r.test_id for taken in looks.values() for r in taken])
    found = {}
    for pid, taken in looks.items():
        if not taken or any(r.test_id not in stored for r in taken):
            continue
        per_look = np.array([stored[r.test_id] for r in taken])  # (looks, prompts)
        found[pid] = [
            sequential_p_value(per_look[:, i], weights[: len(taken)])
            for i in range(per_look.shape[1])
        ]
    return found


def _sequential_equivalence(
    store: storage.Store,
    plan: AuditPlan,
    outcome: SequentialOutcome,
    members: Sequence[PlannedTest],
    margin: float | None,
) -> dict[str, float]:
    """perturbation id -> the equivalence p-value over the looks its test took: ``min_j p_j /
    w_j`` with the design's weights (valid under the stopping rule, as the test's own), p_j
    the look's equivalence p-value: its test's interval at the look's k, or over a set of
    prompts the set-level p-value of every prompt's interval at that k (``set_equivalence_p``:
    the mean effect over the prompts shown below the margin)."""
    read = {  # per perturbation and look: the tests whose intervals the look's p-value reads
        t.perturbation.id: [
            _look_tests(plan, outcome.analysis, t, r)
            for r in outcome.stops[(t.family, t.perturbation.id)].looks
        ]
        for t in members
    }
    ids = [i for looks in read.values() for look in looks for i in look]
    intervals = store.effect_intervals(ids) if margin is not None else {}
    found = {}
    for pid, looks in read.items():
        p = [
            set_equivalence_p([intervals.get(i) for i in look], margin)
            if plan.set_members
            else equivalence_p_values({look[0]: intervals.get(look[0])}, margin)[look[0]]
            for look in looks
        ]
        weights = outcome.design.weights[: len(p)]
        found[pid] = sequential_p_value(p, weights) if p else 1.0
    return found


def _look_tests(
    plan: AuditPlan, analysis: AnalysisSpec, test: PlannedTest, look: LookResult
) -> list[str]:
    """The test of one look (its id at the look's k), or over a set of prompts the
    per-prompt tests its pooled test was computed from, in prompt order."""
    if not plan.set_members:
        return [look.test_id]
    at_k = look_plan(plan, analysis, look.k, [test])
    return [m.test_id for m in at_k.set_members[look.test_id]]


def _margin(
    plan: AuditPlan,
    store: storage.Store,
    spec: EquivalenceSpec,
    family: str,
    members: Sequence[PlannedTest],
    warn: Warn,
    k: int,
) -> Margin:
    """The family's margin: the config's number, or calibrated on its stored replicate
    arms (every two of them and the original) or on its controls (each against the
    original), at ``k`` outputs per arm; over a set of prompts on the same pairs of every
    prompt, each pair's distance the mean over the prompts. Arms without k embedded outputs
    (a model failed) are left out: over a set, a pair missing on any prompt."""
    prompts = _calibration_pairs(plan, spec, members)
    ids = sorted({a for pairs in prompts for pair in pairs for a in pair})
    vectors = store.arms_vectors(ids, plan.embedder, k)
    complete = [
        j
        for j in range(len(prompts[0]))
        if all(a in vectors and b in vectors for a, b in (pairs[j] for pairs in prompts))
    ]
    found = [[(vectors[pairs[j][0]], vectors[pairs[j][1]]) for j in complete] for pairs in prompts]
    margin = family_set_margin(spec, found) if plan.set_members else family_margin(spec, found[0])
    if margin.value is None:
        warn(
            f"{family}: no equivalence margin (the {spec.margin} arms are not all sampled): "
            "every perturbation is changed or inconclusive"
        )
    elif margin.value == 0:
        warn(
            f"{family}: the {spec.margin} arms calibrate a margin of 0 (their outputs do not "
            "vary: deterministic decoding?), so no perturbation can be shown equivalent and "
            "each is changed or inconclusive; set a fixed equivalence.margin to test one"
        )
    return margin


def _calibration_pairs(
    plan: AuditPlan, spec: EquivalenceSpec, members: Sequence[PlannedTest]
) -> list[list[tuple[str, str]]]:
    """Per prompt (one for an audit of one prompt), the pairs of arm ids a calibrated margin
    rests on, in the same order on every prompt: every two of the original and its
    replicates, or the original and each control; no pair for a fixed margin."""
    of_prompts = [plan.set_members.get(t.test_id, (t,)) for t in members]
    prompts: list[list[tuple[str, str]]] = []
    for tests in zip(*of_prompts, strict=True):  # one prompt's test of every perturbation
        original = tests[0].original
        if spec.margin == "replicates":
            arms = [original.arm_id, *(a.arm_id for a in plan.replicates_of(original))]
            prompts.append(list(itertools.combinations(arms, 2)))
        elif spec.margin == "controls":
            prompts.append(
                [
                    (t.original.arm_id, t.perturbed.arm_id)
                    for t, pooled in zip(tests, members, strict=True)
                    if pooled.perturbation.label == "control"
                ]
            )
        else:
            prompts.append([])
    return prompts or [[]]
