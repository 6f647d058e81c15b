"""How many outputs an audit needs, estimated from a stored pilot run before paying for it.

Each perturbation of the pilot run is a pilot pair (its original and perturbed arms' stored
embeddings, at whatever k the pilot used). ``dbpa.stats.plan_k`` resamples the pair at
candidate arm sizes under the audit's omega, alpha and correction (at the family's per-test
level) and returns the smallest k that reaches the target power, and the smallest share of
changed outputs the audit's own k detects. The cost of the whole family at the recommended
k comes from the pilot's stored token counts and costs (litellm's prices at sampling time).

Reads the record through ``PilotReader``; never calls a model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dbpa.config import AuditConfig
from dbpa.plan import plan_audit
from dbpa.stats import SamplePlan, min_permutations, plan_k

__all__ = ["Budget", "PerturbationSize", "PilotReader", "SizePlan", "estimate_sizes"]

CANDIDATES = (5, 10, 20, 40, 80, 160)
"""Arm sizes simulated first, up to the pilot's own k (arms are drawn without replacement),
then bisected between the last miss and the first hit."""


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
    plan: SamplePlan | None
    """The simulation behind the estimate; None when the pilot pair is not embedded."""

    @property
    def k(self) -> int | None:
        """Recommended outputs per arm (None: even the largest candidate falls short)."""
        return None if self.plan is None else self.plan.k

    @property
    def detectable_share(self) -> float | None:
        """Minimum detectable effect at the audit's k: the smallest share of changed outputs
        (changed as the pilot's perturbed outputs differ) detected with the target power."""
        return None if self.plan is None else self.plan.detectable_share


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
    """Tests in the audit's family (all models): the correction's size."""
    audit_k: int
    n_simulations: int
    n_permutations: int
    """B of the simulated tests."""
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

    ``n_permutations`` defaults to the smallest B that lets one test reach the family's
    per-test level (with a floor of 199), which keeps the simulations cheap; a larger B
    changes power very little.
    """
    analysis = config.analysis
    plan = plan_audit(config)
    m = len(plan.tests)
    b = n_permutations or max(199, min_permutations(m, analysis.alpha, analysis.correction))
    row = reader.run(pilot_run)
    pilot_k = int(_as_mapping(row["config"])["k"])
    results = reader.results(row["run_id"])
    arm_ids = sorted(set(results.original_arm) | set(results.perturbed_arm))
    vectors: dict[str, NDArray[np.float32]] = {}
    for embedder in results.embedder.dropna().unique():  # the pilot's tests say which
        vectors |= reader.arms_vectors(arm_ids, str(embedder), pilot_k)
    gen = np.random.default_rng(rng)
    sizes = []
    for r in results.itertuples():
        a, b_arm = vectors.get(r.original_arm), vectors.get(r.perturbed_arm)
        estimate = None
        if a is not None and b_arm is not None:
            estimate = plan_k(
                a,
                b_arm,
                omega=analysis.omega,
                alpha=analysis.alpha,
                m=m,
                correction=analysis.correction,
                power=power,
                candidates=sorted({c for c in CANDIDATES if c < pilot_k} | {pilot_k}),
                n_simulations=n_simulations,
                n_permutations=b,
                detectable_at=plan.k,
                similarity=analysis.similarity,
                rng=gen,
                **analysis.omega_options,
            )
        sizes.append(
            PerturbationSize(
                family=str(r.family),
                perturbation_id=str(r.perturbation_id),
                label=None if pd.isna(r.label) else str(r.label),
                pilot_k=pilot_k,
                plan=estimate,
            )
        )
    per_output = _per_output(reader.usage(arm_ids))
    ks = [s.k for s in sizes if s.k is not None]
    arms = len(plan.arms)
    return SizePlan(
        pilot_run=str(row["run_id"]),
        power=power,
        omega=analysis.omega,
        alpha=analysis.alpha,
        correction=analysis.correction,
        m=m,
        audit_k=plan.k,
        n_simulations=n_simulations,
        n_permutations=b,
        perturbations=tuple(sizes),
        recommended=_budget(max(ks), arms, per_output) if ks else None,
        configured=_budget(plan.k, arms, per_output),
    )


def _per_output(usage: pd.DataFrame) -> tuple[float | None, float | None]:
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


def _budget(k: int, arms: int, per_output: tuple[float | None, float | None]) -> Budget:
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
