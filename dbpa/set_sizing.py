"""How many prompts and outputs per prompt an audit over a set of prompts needs, estimated
from a stored pilot run over a set before paying for it.

Each perturbation of each family (model) of the pilot is its prompts' original and perturbed
arms' stored embeddings. ``dbpa.stats.plan_set_power`` resamples them (prompts and outputs
without replacement) and runs the audit's pooled test (``prompt_set_test`` with the audit's
omega, combination and B) at the level a lone change must pass among the config's m
perturbations per model under its correction. Per perturbation it gives the smallest k per
prompt reaching the target power with the config's number of prompts, and the number of
prompts needed at the config's k; the cost (model calls = prompts x arms per prompt x k,
tokens, dollars) comes from the pilot's stored usage as for one prompt (``dbpa.sizing``).

Reads the record through ``SetPilotReader``; never calls a model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dbpa.config import AuditConfig
from dbpa.plan import AuditPlan, plan_audit
from dbpa.set_analysis import SET_COMBINATION
from dbpa.sizing import Budget, PilotReader, family_budget, mean_usage
from dbpa.stats import OMEGAS, SetSizePlan, fine_permutations, lone_threshold, plan_set_power

__all__ = [
    "SET_SIMULATIONS",
    "SetBudget",
    "SetPerturbationSize",
    "SetPilotReader",
    "SetSizes",
    "estimate_set_sizes",
]

SET_SIMULATIONS = 50
"""Simulated audits per (prompts, k) point by default: a pooled test costs a set's worth of
single-prompt tests (module ``dbpa.stats._set_power``: the time)."""


class SetPilotReader(PilotReader, Protocol):
    """What the set planner reads from the record (``storage.Store`` is one): the one-prompt
    planner's reads and the prompts' results."""

    def prompt_results(self, run_id: str) -> pd.DataFrame: ...


@dataclass(frozen=True)
class SetPerturbationSize:
    """The planner's estimate for one perturbation (of one family) of the pilot set."""

    family: str
    perturbation_id: str
    label: str | None
    pilot_prompts: int
    """Prompts of the pilot with both arms embedded for this perturbation (what is resampled)."""
    pilot_k: int
    """Outputs per arm the pilot stored."""
    plan: SetSizePlan | None
    """Its simulated power curves; None when no prompt of the pilot has both arms embedded."""

    @property
    def k(self) -> int | None:
        """k per prompt needed at the config's prompts (None: not reached or not simulated)."""
        return None if self.plan is None else self.plan.k

    @property
    def prompts(self) -> int | None:
        """Prompts needed at the config's k (None: not reached or not simulated)."""
        return None if self.plan is None else self.plan.prompts


@dataclass(frozen=True)
class SetBudget(Budget):
    """Model calls, tokens and dollars of the audit at n prompts and k outputs per arm
    (``arms``: every model's arms of the n prompts, replicate arms included)."""

    prompts: int


@dataclass(frozen=True)
class SetSizes:
    """What ``dbpa plan`` reports for a set of prompts: per perturbation, then the cost."""

    pilot_run: str
    power: float
    omega: str
    combination: str
    alpha: float
    correction: str
    m: int
    """Perturbations per model: the correction's size."""
    level: float
    """The raw pooled p-value a lone change must pass (``lone_threshold``)."""
    n_prompts: int
    """The config's prompts (where k per prompt is read)."""
    audit_k: int
    """The config's k (where the prompts needed are read)."""
    n_simulations: int
    n_permutations: int
    """B of the simulated pooled tests: the audit's."""
    resolution_permutations: int | None
    """When the audit's B resolves ``level`` only coarsely: the B that would not."""
    perturbations: tuple[SetPerturbationSize, ...]
    configured: SetBudget
    """At the config's prompts and k."""
    recommended: SetBudget | None
    """At the config's prompts and the largest k needed over the perturbations; None when no
    perturbation reaches the target power within the pilot."""
    fewest_prompts: SetBudget | None
    """At the config's k and the most prompts needed over the perturbations; None when none
    reaches the target at the config's k within the pilot."""


def estimate_set_sizes(
    reader: SetPilotReader,
    pilot_run: str,
    config: AuditConfig,
    *,
    power: float = 0.8,
    n_simulations: int = SET_SIMULATIONS,
    rng: int = 0,
) -> SetSizes:
    """Estimate k per prompt and the prompts needed for every perturbation of the set run
    ``pilot_run`` under ``config``'s analysis (``config`` has ``prompts:``)."""
    if config.prompts is None:
        raise ValueError("config: has no prompts:; dbpa.sizing.estimate_sizes plans one prompt")
    analysis = config.analysis
    plan = plan_audit(config)
    m = len(plan.tests) // len(plan.families)
    row = reader.run(pilot_run)
    run_id = str(row["run_id"])
    pilot_config = row["config"]
    pilot_config = dict(json.loads(pilot_config) if isinstance(pilot_config, str) else pilot_config)
    if not pilot_config.get("prompts"):
        raise ValueError(
            f"--from: run {run_id} is an audit of one prompt; a set of prompts is planned from "
            "a pilot run over a set (prompts:)"
        )
    pilot_k = int(pilot_config["k"])
    frame = reader.prompt_results(run_id)
    if frame.empty:
        raise ValueError(
            f"--from: run {run_id} stored no pooled tests over its prompts (not finished?); "
            "the planner resamples the prompts of its tests"
        )
    arm_ids = sorted(set(frame.original_arm.dropna()) | set(frame.perturbed_arm.dropna()))
    vectors: dict[str, NDArray[np.float32]] = {}
    for embedder in reader.results(run_id).embedder.dropna().unique():
        vectors |= reader.arms_vectors(arm_ids, str(embedder), pilot_k)
    similarity = analysis.similarity if OMEGAS[analysis.omega].level != "embedding" else "cosine"
    gen = np.random.default_rng(rng)
    n_prompts = len(config.prompt_set)
    sizes = []
    for (family, _, perturbation_id), members in frame.groupby(
        ["family", "position", "perturbation_id"], sort=False
    ):
        members = members.sort_values("prompt_position")
        pairs = [
            (vectors[str(r.original_arm)], vectors[str(r.perturbed_arm)])
            for r in members.itertuples()
            if str(r.original_arm) in vectors and str(r.perturbed_arm) in vectors
        ]
        estimate = None
        if pairs:
            estimate = plan_set_power(
                [a for a, _ in pairs],
                [b for _, b in pairs],
                n_prompts=n_prompts,
                k=plan.k,
                power=power,
                alpha=analysis.alpha,
                m=m,
                correction=analysis.correction,
                n_simulations=n_simulations,
                n_permutations=analysis.n_permutations,
                omega=analysis.omega,
                similarity=similarity,
                combination=SET_COMBINATION,
                rng=gen,
                **analysis.omega_options,
            )
        label = members.label.iloc[0]
        sizes.append(
            SetPerturbationSize(
                family=str(family),
                perturbation_id=str(perturbation_id),
                label=None if pd.isna(label) else str(label),
                pilot_prompts=len(pairs),
                pilot_k=pilot_k,
                plan=estimate,
            )
        )
    per_output = mean_usage(reader.usage(arm_ids))
    arms_of = _arms_of(plan, [pid for pid, _ in config.prompt_set])
    ks = [s.k for s in sizes if s.k is not None]
    prompts = [s.prompts for s in sizes if s.prompts is not None]
    level = lone_threshold(m, analysis.alpha, analysis.correction)
    b = analysis.n_permutations

    def budget(n: int, k: int) -> SetBudget:
        return SetBudget(prompts=n, **vars(family_budget(k, arms_of(n), per_output)))

    return SetSizes(
        pilot_run=run_id,
        power=power,
        omega=analysis.omega,
        combination=SET_COMBINATION,
        alpha=analysis.alpha,
        correction=analysis.correction,
        m=m,
        level=level,
        n_prompts=n_prompts,
        audit_k=plan.k,
        n_simulations=n_simulations,
        n_permutations=b,
        resolution_permutations=fine if b < (fine := fine_permutations(level)) else None,
        perturbations=tuple(sizes),
        configured=budget(n_prompts, plan.k),
        recommended=budget(n_prompts, max(ks)) if ks else None,
        fewest_prompts=budget(max(prompts), plan.k) if prompts else None,
    )


def _arms_of(plan: AuditPlan, prompt_ids: Sequence[str]) -> Callable[[int], int]:
    """n -> the arms of the config's first n prompts, replicate arms of a calibrated margin
    included (beyond them: the mean per prompt)."""
    per_prompt: dict[str | None, set[str]] = {}
    for t in plan.prompt_tests:
        replicates = (a.arm_id for a in plan.replicates_of(t.original))
        per_prompt.setdefault(t.prompt_id, set()).update(
            (t.original.arm_id, t.perturbed.arm_id, *replicates)
        )

    def arms(n: int) -> int:
        if n > len(prompt_ids):
            return math.ceil(len(plan.arms) * n / len(prompt_ids))
        return len(set().union(*(per_prompt.get(pid, set()) for pid in prompt_ids[:n])))

    return arms
