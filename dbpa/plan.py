"""An audit config expanded into arms to sample and tests to run.

One family per model: its original arm, and for every perturbation a perturbed arm
and a test. Arms are shared: the original arm of a family is sampled once for all its
tests, and an arm that appears in several families (a model swap) is sampled once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dbpa.analysis import AnalysisSpec, derive_test_id
from dbpa.arms import Arm
from dbpa.config import AuditConfig
from dbpa.embedding import embedder_key
from dbpa.perturbations import Perturbation
from dbpa.specs import content_hash


@dataclass(frozen=True)
class PlannedTest:
    """One perturbation of one family, with its two arms and its content id."""

    family: str
    """The family's model label."""
    position: int
    perturbation: Perturbation
    original: Arm
    perturbed: Arm
    test_id: str

    def row(self) -> dict[str, Any]:
        """The family-membership row stored for a run."""
        p = self.perturbation
        return {
            "family": self.family,
            "perturbation_id": p.id,
            "position": self.position,
            "kind": p.kind,
            "label": p.label,
            "description": p.description,
            "original_arm": self.original.arm_id,
            "perturbed_arm": self.perturbed.arm_id,
            "test_id": self.test_id,
        }


@dataclass(frozen=True)
class AuditPlan:
    """Everything one run of an audit samples and tests."""

    arms: tuple[Arm, ...]
    """Distinct arms, originals first."""
    tests: tuple[PlannedTest, ...]
    families: tuple[str, ...]
    k: int
    seed: int
    embedder: str
    """Key of the embedder's vectors (``dbpa.embedding.embedder_key``)."""
    replicates: dict[str, tuple[Arm, ...]] = field(default_factory=dict)
    """Family -> its original's replicate arms (an equivalence margin calibrated on them);
    they are sampled and embedded, never tested."""

    def arm_seed(self, arm: Arm) -> int:
        """Base seed of an arm's sampling requests: fixed by the audit seed and the arm."""
        return int(content_hash("sampling-seed", self.seed, arm.arm_id)[:12], 16)


def plan_audit(config: AuditConfig) -> AuditPlan:
    """Expand the config's family for every model."""
    embedder = embedder_key(config.embedder)
    arms: dict[str, Arm] = {}
    tests: list[PlannedTest] = []
    replicates: dict[str, tuple[Arm, ...]] = {}
    copies = config.equivalence.replicate_arms if config.equivalence else 0
    for model in config.models:
        original = Arm.of(model, config.messages, config.epoch, seed=config.seed)
        arms.setdefault(original.arm_id, original)
        replicates[model.label] = tuple(
            Arm.of(model, config.messages, config.epoch, replicate=r, seed=config.seed)
            for r in range(1, copies + 1)
        )
    for model in config.models:
        original = Arm.of(model, config.messages, config.epoch, seed=config.seed)
        for position, p in enumerate(config.family):
            perturbed = Arm.of(p.arm_model(model), p.messages, config.epoch, seed=config.seed)
            if perturbed.arm_id == original.arm_id:
                raise ValueError(
                    f"perturbations: {p.id!r} leaves the {model.label} arm unchanged "
                    "(same model, parameters and messages); it cannot be tested against itself"
                )
            arms.setdefault(perturbed.arm_id, perturbed)
            tid = derive_test_id(
                original.arm_id,
                perturbed.arm_id,
                embedder,
                config.analysis,
                config.seed,
                config.k,
            )
            tests.append(PlannedTest(model.label, position, p, original, perturbed, tid))
    for copies_of_original in replicates.values():
        for arm in copies_of_original:
            arms.setdefault(arm.arm_id, arm)
    return AuditPlan(
        arms=tuple(arms.values()),
        tests=tuple(tests),
        families=tuple(m.label for m in config.models),
        k=config.k,
        seed=config.seed,
        embedder=embedder,
        replicates=replicates if copies else {},
    )


def look_plan(
    plan: AuditPlan, analysis: AnalysisSpec, k: int, tests: Sequence[PlannedTest]
) -> AuditPlan:
    """One look of a sequential audit: the arms of ``tests`` (and their families' replicate
    arms) filled to ``k`` outputs, and each of ``tests`` as a test at ``k`` under
    ``analysis`` (its own content id: the look is a permutation test of the first k
    outputs of both arms, stored and resumed like any other)."""
    keep = {a for t in tests for a in (t.original.arm_id, t.perturbed.arm_id)}
    families = {t.family for t in tests}
    replicates = {f: arms for f, arms in plan.replicates.items() if f in families}
    keep |= {a.arm_id for arms in replicates.values() for a in arms}
    return AuditPlan(
        arms=tuple(a for a in plan.arms if a.arm_id in keep),
        tests=tuple(
            replace(
                t,
                test_id=derive_test_id(
                    t.original.arm_id, t.perturbed.arm_id, plan.embedder, analysis, plan.seed, k
                ),
            )
            for t in tests
        ),
        families=tuple(f for f in plan.families if f in families),
        k=k,
        seed=plan.seed,
        embedder=plan.embedder,
        replicates=replicates,
    )
