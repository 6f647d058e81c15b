"""From stored embeddings to decisions: one test per perturbation, one correction per family."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, model_validator

from dbpa.specs import Spec, content_hash
from dbpa.stats import CORRECTIONS, OMEGAS, SIMILARITIES, correct, permutation_test


class AnalysisSpec(Spec):
    """How outputs are compared and decided; changing it re-uses every sample and embedding."""

    similarity: str = "cosine"
    """cosine, neg_l1 or neg_l2: the pairwise similarity behind P0 and P1."""
    omega: str = "auto"
    """Discrepancy (see ``dbpa.stats.OMEGAS``). ``auto`` (the default) combines a P0-vs-P1
    statistic and an energy distance on the embeddings in one calibrated test; the paper's
    statistic is ``jsd``."""
    omega_options: dict[str, Any] = Field(default_factory=dict)
    """Options of the discrepancy, e.g. ``{bins: 30}`` for jsd."""
    n_permutations: int = Field(default=2000, ge=1)
    """B, permutations per test."""
    alpha: float = Field(default=0.05, gt=0, lt=1)
    correction: str = "holm"
    """Multiplicity correction per family: bonferroni, holm, bh or by."""

    @model_validator(mode="after")
    def _known_names(self) -> AnalysisSpec:
        known: list[tuple[str, str, Collection[str]]] = [
            ("similarity", self.similarity, SIMILARITIES),
            ("omega", self.omega, OMEGAS),
            ("correction", self.correction, CORRECTIONS),
        ]
        for name, value, registry in known:
            if value not in registry:
                raise ValueError(f"{name}: unknown {value!r}; choose one of {', '.join(registry)}")
        spec = OMEGAS[self.omega]
        spec.resolve_options(self.omega_options)
        if spec.level == "embedding" and self.similarity != "cosine":
            raise ValueError(
                f"similarity: omega {self.omega!r} uses its own distance ({spec.matrix})"
            )
        return self


def derive_test_id(
    original_arm: str,
    perturbed_arm: str,
    embedder: str,
    analysis: AnalysisSpec,
    seed: int,
    k: int,
) -> str:
    """Content id of a test: the arms, k, the embedder and every setting that changes it."""
    return content_hash(
        "test",
        original_arm,
        perturbed_arm,
        k,
        embedder,
        analysis.similarity,
        analysis.omega,
        analysis.omega_options,
        analysis.n_permutations,
        seed,
    )


@dataclass(frozen=True)
class PerturbationTestRecord:
    """One stored permutation test of a perturbed arm against its original arm."""

    test_id: str
    original_arm: str
    perturbed_arm: str
    embedder: str
    similarity: str
    omega: str
    omega_options: Mapping[str, Any]
    n_permutations: int
    """B as asked; ``evaluated`` is the number of splits actually evaluated (fewer when exact)."""
    seed: int
    statistic: float
    p_value: float
    null_mean: float
    null_std: float
    effect: float
    z: float
    evaluated: int
    exact: bool
    k_a: int
    k_b: int
    null_distribution: NDArray[np.float64] = field(repr=False)
    driver: str | None = None
    """A combined omega (``auto``): the component with the smallest p-value, the first hint
    of what changed; None for a single omega."""
    components: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """A combined omega: per component, its aspect, statistic, own p-value and effect."""


def run_test(
    test_id: str,
    original: NDArray[np.floating[Any]],
    perturbed: NDArray[np.floating[Any]],
    *,
    original_arm: str,
    perturbed_arm: str,
    embedder: str,
    analysis: AnalysisSpec,
) -> PerturbationTestRecord:
    """The permutation test of one perturbation, seeded by its test id (so it is reproducible)."""
    seed = int(test_id[:15], 16)
    result = permutation_test(
        original,
        perturbed,
        similarity=analysis.similarity if OMEGAS[analysis.omega].level != "embedding" else "cosine",
        omega=analysis.omega,
        n_permutations=analysis.n_permutations,
        rng=seed,
        **analysis.omega_options,
    )
    return PerturbationTestRecord(
        test_id=test_id,
        original_arm=original_arm,
        perturbed_arm=perturbed_arm,
        embedder=embedder,
        similarity=analysis.similarity,
        omega=analysis.omega,
        omega_options=dict(result.options),
        n_permutations=analysis.n_permutations,
        seed=seed,
        statistic=result.statistic,
        p_value=result.p_value,
        null_mean=result.null_mean,
        null_std=result.null_std,
        effect=result.effect,
        z=result.z,
        evaluated=result.evaluated,
        exact=result.exact,
        k_a=result.k_a,
        k_b=result.k_b,
        null_distribution=np.asarray(result.null_distribution),
        driver=result.driver,
        components={
            name: {
                "aspect": c.aspect,
                "statistic": c.statistic,
                "p_value": c.p_value,
                "effect": c.effect,
            }
            for name, c in result.components.items()
        },
    )


@dataclass(frozen=True)
class Decision:
    """The corrected outcome of one perturbation within its family."""

    perturbation_id: str
    p_value: float
    """Raw p-value; 1.0 when the test could not run (a model failed), which keeps FWER/FDR valid."""
    adjusted_p: float
    reject: bool
    tested: bool


def decide_family(p_values: Mapping[str, float | None], analysis: AnalysisSpec) -> list[Decision]:
    """Correct a family; perturbations without a p-value count as p = 1 (conservative)."""
    ids: Sequence[str] = list(p_values)
    raw = np.array([1.0 if p_values[i] is None else float(p_values[i]) for i in ids])  # type: ignore[arg-type]
    result = correct(raw, method=analysis.correction, alpha=analysis.alpha)
    return [
        Decision(
            perturbation_id=pid,
            p_value=float(raw[j]),
            adjusted_p=float(result.adjusted[j]),
            reject=bool(result.reject[j]) and p_values[pid] is not None,
            tested=p_values[pid] is not None,
        )
        for j, pid in enumerate(ids)
    ]


def stars(p: float) -> str:
    """The paper's significance stars: * p<0.05, ** p<0.01, *** p<0.001."""
    if math.isnan(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""
