"""How many outputs an audit needs, estimated from a stored pilot run before paying for it.

Each family (model) of the pilot run is its original arm and its perturbed arms' stored
embeddings, at whatever k the pilot used. ``dbpa.stats.plan_family`` resamples them at arm
sizes up to the pilot's, simulating the whole family as the audit runs it (the audit's
omega, B, alpha and correction over its m tests per model), and returns per perturbation
the smallest k that reaches the target power and the smallest share of changed outputs the
audit's own k detects. The cost of the whole family at the recommended k comes from the
pilot's stored token counts and costs (litellm's prices at sampling time).

Reads the record through ``PilotReader``; never calls a model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dbpa.config import AuditConfig
from dbpa.plan import plan_audit
from dbpa.stats import (
    OMEGAS,
    Detectable,
    PerturbationPower,
    fine_permutations,
    lone_threshold,
    plan_family,
)

__all__ = [
    "Budget",
    "PerturbationSize",
    "PilotReader",
    "SizePlan",
    "estimate_sizes",
    "mean_usage",
]


class PilotReader(Protocol):
    """What the planner reads from the record (``storage.Store`` is one)."""

    def run(self, run_id: str) -> dict[str, Any]: ...

    def results(self, run_id: str) -> pd.DataFrame: ...

    def arms_vectors(
        self, arm_ids: Sequence[str], embedder: str, k: int
    ) -> dict[str, NDArray[np.float32]]: ...

    def usage(self, arm_ids: Sequence[str]) -> pd.DataFrame: ...


@dataclass(frozen=True)
class PerturbationSize:
    """The planner's estimate for one perturbation of the pilot run."""

    family: str
    perturbation_id: str
    label: str | None
    pilot_k: int
    """Outputs per arm the pilot stored for this pair."""
    plan: PerturbationPower | None
    """Its power curve within its simulated family; None when the pilot pair (its perturbed
    arm or its family's original) is not embedded."""

    @property
    def k(self) -> int | None:
        """Recommended outputs per arm (None: not reached within the pilot, or not embedded)."""
        return None if self.plan is None else self.plan.k

    @property
    def detectable_share(self) -> float | None:
        """Minimum detectable effect at the audit's k: the smallest share of changed outputs
        (changed as the pilot's perturbed outputs differ) detected with the target power."""
        return None if self.plan is None else self.plan.detectable_share

    @property
    def detectable(self) -> Detectable | Literal["not_embedded"]:
        """Why ``detectable_share`` is what it is (``PerturbationPower.detectable``)."""
        return "not_embedded" if self.plan is None else self.plan.detectable


@dataclass(frozen=True)
class Budget:
    """Model calls, tokens and dollars of the whole family at one k per arm."""

    k: int
    arms: int
    calls: int
    tokens: int | None
    """From the pilot's mean tokens per output; None when the pilot stored none."""
    cost_usd: float | None
    """From the pilot's mean cost per output; None when a price was unknown."""


@dataclass(frozen=True)
class SizePlan:
    """What ``dbpa plan`` reports: per perturbation, then for the whole family."""

    pilot_run: str
    power: float
    omega: str
    alpha: float
    correction: str
    m: int
    """Tests in each model's family of the audit: the correction's size (a pilot family with
    more perturbations is simulated with its own size)."""
    level: float
    """The raw p-value a lone change must pass in the family (``lone_threshold``)."""
    audit_k: int
    n_simulations: int
    n_permutations: int
    """B of the simulated tests: the audit's."""
    resolution_permutations: int | None
    """When the audit's B resolves ``level`` only coarsely (1/(B+1) > level / 10): the B
    that would not; None otherwise."""
    simulated_ks: tuple[int, ...]
    """Every k simulated, over the pilot's families."""
    perturbations: tuple[PerturbationSize, ...]
    recommended: Budget | None
    """At the largest recommended k over the perturbations (one k serves the audit);
    None when no perturbation reaches the target power."""
    configured: Budget
    """At the config's k."""


def estimate_sizes(
    reader: PilotReader,
    pilot_run: str,
    config: AuditConfig,
    *,
    power: float = 0.8,
    n_simulations: int = 100,
    n_permutations: int | None = None,
    rng: int = 0,
) -> SizePlan:
    """Estimate k for every perturbation of ``pilot_run`` under ``config``'s analysis.

    Each family (model) of the pilot is simulated as the audit will run it
    (``dbpa.stats.plan_family``): its original's pilot shared by its tests, the correction
    over the config's family of m tests per model (or the pilot family's size, when larger),
    the tests the pilot lacks (not in it, or not embedded) at p = 1. ``n_permutations`` is
    the B of the simulated tests: the config's by default, never fewer (power depends on B).
    """
    analysis = config.analysis
    plan = plan_audit(config)
    m = len(plan.tests) // len(plan.families)
    b = analysis.n_permutations if n_permutations is None else n_permutations
    if b < analysis.n_permutations:
        raise ValueError(
            f"n_permutations: {b} is fewer than the audit's {analysis.n_permutations}; power "
            "depends on B, so the simulated tests use at least the audit's"
        )
    row = reader.run(pilot_run)
    pilot_config = _as_mapping(row["config"])
    if pilot_config.get("prompts"):
        raise ValueError(
            f"--from: run {row['run_id']} is over a set of prompts; an audit of one prompt is "
            "planned from a pilot run of one prompt"
        )
    pilot_k = int(pilot_config["k"])
    results = reader.results(row["run_id"])
    arm_ids = sorted(set(results.original_arm) | set(results.perturbed_arm))
    vectors: dict[str, NDArray[np.float32]] = {}
    for embedder in results.embedder.dropna().unique():  # the pilot's tests say which
        vectors |= reader.arms_vectors(arm_ids, str(embedder), pilot_k)
    gen = np.random.default_rng(rng)
    similarity = analysis.similarity if OMEGAS[analysis.omega].level != "embedding" else "cosine"
    sizes = []
    family_plans = []
    for _, members in results.groupby("family", sort=False):
        original = vectors.get(members.original_arm.iloc[0])
        embedded = [i for i, arm in enumerate(members.perturbed_arm) if arm in vectors]
        estimates: dict[int, PerturbationPower] = {}
        if original is not None and embedded:
            family_plan = plan_family(
                original,
                [vectors[members.perturbed_arm.iloc[i]] for i in embedded],
                m=max(m, len(members)),
                omega=analysis.omega,
                alpha=analysis.alpha,
                correction=analysis.correction,
                power=power,
                n_simulations=n_simulations,
                n_permutations=b,
                detectable_at=plan.k,
                similarity=similarity,
                rng=gen,
                **analysis.omega_options,
            )
            family_plans.append(family_plan)
            estimates = dict(zip(embedded, family_plan.perturbations, strict=True))
        for i, r in enumerate(members.itertuples()):
            sizes.append(
                PerturbationSize(
                    family=str(r.family),
                    perturbation_id=str(r.perturbation_id),
                    label=None if pd.isna(r.label) else str(r.label),
                    pilot_k=pilot_k,
                    plan=estimates.get(i),
                )
            )
    per_output = mean_usage(reader.usage(arm_ids))
    ks = [s.k for s in sizes if s.k is not None]
    arms = len(plan.arms)
    level = lone_threshold(m, analysis.alpha, analysis.correction)
    return SizePlan(
        pilot_run=str(row["run_id"]),
        power=power,
        omega=analysis.omega,
        alpha=analysis.alpha,
        correction=analysis.correction,
        m=m,
        level=level,
        audit_k=plan.k,
        n_simulations=n_simulations,
        n_permutations=b,
        resolution_permutations=fine if b < (fine := fine_permutations(level)) else None,
        simulated_ks=tuple(sorted({k for f in family_plans for k in f.ks})),
        perturbations=tuple(sizes),
        recommended=family_budget(max(ks), arms, per_output) if ks else None,
        configured=family_budget(plan.k, arms, per_output),
    )


def mean_usage(usage: pd.DataFrame) -> tuple[float | None, float | None]:
    """Mean tokens and mean dollars per output of the pilot (None where unknown)."""
    outputs = float(usage.outputs.sum()) if len(usage) else 0.0
    if outputs == 0:
        return None, None
    tokens = usage.prompt_tokens.fillna(0).sum() + usage.completion_tokens.fillna(0).sum()
    known_cost = usage.cost_usd.notna().all()
    return (
        float(tokens) / outputs if tokens > 0 else None,
        float(usage.cost_usd.sum()) / outputs if known_cost else None,
    )


def family_budget(k: int, arms: int, per_output: tuple[float | None, float | None]) -> Budget:
    """The calls, tokens and dollars of ``arms`` arms at ``k`` outputs each, from the pilot's
    mean ``(tokens, dollars)`` per output (``mean_usage``)."""
    tokens, cost = per_output
    calls = k * arms
    return Budget(
        k=k,
        arms=arms,
        calls=calls,
        tokens=None if tokens is None else math.ceil(tokens * calls),
        cost_usd=None if cost is None else cost * calls,
    )


def _as_mapping(value: Any) -> dict[str, Any]:
    return dict(json.loads(value) if isinstance(value, str) else value)
