"""An audit config expanded into arms to sample and tests to run.

One family per model: its original arm, and for every perturbation a perturbed arm
and a test. Arms are shared: the original arm of a family is sampled once for all its
tests, and an arm that appears in several families (a model swap) is sampled once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from dbpa.analysis import AnalysisSpec, derive_test_id
from dbpa.arms import Arm
from dbpa.config import AuditConfig
from dbpa.embedding import embedder_key
from dbpa.perturbations import Perturbation
from dbpa.set_analysis import SET_COMBINATION
from dbpa.specs import Message, ModelSpec, content_hash


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
    prompt_id: str | None = None
    """The prompt of a set this test is of; None for the test of an audit of one prompt and
    for the pooled test of a set (whose arms are then its first prompt's)."""

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

    def prompt_row(self, prompt_position: int) -> dict[str, Any]:
        """The row of a per-prompt test of a set stored for a run (``run_prompt_tests``)."""
        return {
            "family": self.family,
            "perturbation_id": self.perturbation.id,
            "prompt_id": self.prompt_id,
            "prompt_position": prompt_position,
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
    """Family -> its original's replicate arms (an equivalence margin calibrated on them;
    over a set of prompts every prompt's original's, prompt by prompt); they are sampled and
    embedded, never tested."""
    set_members: dict[str, tuple[PlannedTest, ...]] = field(default_factory=dict)
    """Over a set of prompts: the id of each pooled test (in ``tests``) -> its per-prompt
    tests, in prompt order; empty for an audit of one prompt."""

    @property
    def prompt_tests(self) -> tuple[PlannedTest, ...]:
        """Every per-prompt test of a set of prompts (empty for one prompt)."""
        return tuple(t for members in self.set_members.values() for t in members)

    @property
    def unit_tests(self) -> tuple[PlannedTest, ...]:
        """The tests of two arms each: ``tests``, or over a set of prompts the per-prompt
        tests (the pooled tests are computed from theirs)."""
        return self.prompt_tests if self.set_members else self.tests

    @property
    def all_tests(self) -> tuple[PlannedTest, ...]:
        """Every test stored for the plan: the pooled ones and the per-prompt ones."""
        return self.tests + self.prompt_tests

    @cached_property
    def _replicates_by_original(self) -> dict[str, tuple[Arm, ...]]:
        found: dict[str, list[Arm]] = {}
        for copies in self.replicates.values():
            for arm in copies:
                original = Arm.of(arm.model, arm.messages, arm.epoch, seed=arm.seed)
                found.setdefault(original.arm_id, []).append(arm)
        return {a: tuple(arms) for a, arms in found.items()}

    def replicates_of(self, original: Arm) -> tuple[Arm, ...]:
        """The replicate arms of ``original`` (its model and messages sampled again), in
        order; empty without a margin calibrated on replicates."""
        return self._replicates_by_original.get(original.arm_id, ())

    def arm_seed(self, arm: Arm) -> int:
        """Base seed of an arm's sampling requests: fixed by the audit seed and the arm."""
        return int(content_hash("sampling-seed", self.seed, arm.arm_id)[:12], 16)


def plan_audit(config: AuditConfig) -> AuditPlan:
    """Expand the config's family for every model (over a set of prompts: see
    :func:`plan_set`)."""
    if config.prompts is not None:
        return plan_set(config)
    embedder = embedder_key(config.embedder)
    arms: dict[str, Arm] = {}
    tests: list[PlannedTest] = []
    replicates: dict[str, tuple[Arm, ...]] = {}
    copies = config.equivalence.replicate_arms if config.equivalence else 0
    for model in config.models:
        original = Arm.of(model, config.messages, config.epoch, seed=config.seed)
        arms.setdefault(original.arm_id, original)
        replicates[model.label] = _replicate_arms(config, model, config.messages, copies)
    for model in config.models:
        original = Arm.of(model, config.messages, config.epoch, seed=config.seed)
        for position, p in enumerate(config.family):
            test = _paired(config, embedder, model, original, p, position)
            arms.setdefault(test.perturbed.arm_id, test.perturbed)
            tests.append(test)
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


def _replicate_arms(
    config: AuditConfig, model: ModelSpec, messages: Sequence[Message], copies: int
) -> tuple[Arm, ...]:
    """The ``copies`` replicate arms of the original of ``model`` and ``messages``."""
    return tuple(
        Arm.of(model, messages, config.epoch, replicate=r, seed=config.seed)
        for r in range(1, copies + 1)
    )


def _paired(
    config: AuditConfig,
    embedder: str,
    model: ModelSpec,
    original: Arm,
    p: Perturbation,
    position: int,
    shown_id: str | None = None,
    prompt_id: str | None = None,
) -> PlannedTest:
    """The test of ``original`` against its perturbation by ``p`` (over a set of prompts,
    ``p`` is the spec as applied to prompt ``prompt_id`` and ``shown_id`` the set's id of it);
    an error where the perturbation leaves the arm as it is."""
    perturbed = Arm.of(p.arm_model(model), p.messages, config.epoch, seed=config.seed)
    if perturbed.arm_id == original.arm_id:
        where = (
            "unchanged (same model, parameters and messages)"
            if prompt_id is None
            else f"of prompt {prompt_id!r} unchanged"
        )
        raise ValueError(
            f"perturbations: {(shown_id or p.id)!r} leaves the {model.label} arm {where}; "
            "it cannot be tested against itself"
        )
    tid = derive_test_id(
        original.arm_id, perturbed.arm_id, embedder, config.analysis, config.seed, config.k
    )
    return PlannedTest(model.label, position, p, original, perturbed, tid, prompt_id)


def set_test_id(members: Sequence[PlannedTest]) -> str:
    """The pooled test's content id: its combination and its per-prompt tests' ids."""
    return content_hash("prompt-set", SET_COMBINATION, [t.test_id for t in members])


def plan_set(config: AuditConfig) -> AuditPlan:
    """A set of prompts: per model, prompt and perturbation an original and a perturbed arm
    and their test (the arms of one prompt are those of an audit of that prompt alone), and
    per model and perturbation one pooled test over the prompts (in ``tests``, its arms the
    first prompt's: what a view of one prompt shows); with a margin calibrated on replicates,
    each prompt's replicate arms (those of an audit of that prompt alone)."""
    embedder = embedder_key(config.embedder)
    arms: dict[str, Arm] = {}
    tests: list[PlannedTest] = []
    members: dict[str, tuple[PlannedTest, ...]] = {}
    prompts = config.prompt_set
    per_prompt = config.set_family.per_prompt
    for model in config.models:
        originals = [Arm.of(model, m, config.epoch, seed=config.seed) for _, m in prompts]
        for arm in originals:
            arms.setdefault(arm.arm_id, arm)
    for model in config.models:
        originals = [Arm.of(model, m, config.epoch, seed=config.seed) for _, m in prompts]
        for position, p in enumerate(config.family):
            of_prompts = []
            for (pid, _), original, family in zip(prompts, originals, per_prompt, strict=True):
                test = _paired(
                    config, embedder, model, original, family[position], position, p.id, pid
                )
                arms.setdefault(test.perturbed.arm_id, test.perturbed)
                of_prompts.append(test)
            pooled = replace(of_prompts[0], perturbation=p, test_id=set_test_id(of_prompts))
            pooled = replace(pooled, prompt_id=None)
            tests.append(pooled)
            members[pooled.test_id] = tuple(of_prompts)
    copies = config.equivalence.replicate_arms if config.equivalence else 0
    replicates: dict[str, tuple[Arm, ...]] = {}
    for model in config.models:
        of_model = {
            a.arm_id: a for _, m in prompts for a in _replicate_arms(config, model, m, copies)
        }
        replicates[model.label] = tuple(of_model.values())
        for arm in of_model.values():
            arms.setdefault(arm.arm_id, arm)
    return AuditPlan(
        arms=tuple(arms.values()),
        tests=tuple(tests),
        families=tuple(m.label for m in config.models),
        k=config.k,
        seed=config.seed,
        embedder=embedder,
        replicates=replicates if copies else {},
        set_members=members,
    )


def look_plan(
    plan: AuditPlan, analysis: AnalysisSpec, k: int, tests: Sequence[PlannedTest]
) -> AuditPlan:
    """One look of a sequential audit: the arms of ``tests`` (and their families' replicate
    arms) filled to ``k`` outputs, and each of ``tests`` as a test at ``k`` under
    ``analysis`` (its own content id: the look is a permutation test of the first k
    outputs of both arms, stored and resumed like any other). Over a set of prompts each of
    ``tests`` is a pooled test: every prompt's arms are filled, its per-prompt tests re-keyed
    at ``k`` and the pooled test keyed by them (the pooled test of the first k outputs of
    every prompt)."""

    def at_k(t: PlannedTest) -> PlannedTest:
        tid = derive_test_id(
            t.original.arm_id, t.perturbed.arm_id, plan.embedder, analysis, plan.seed, k
        )
        return replace(t, test_id=tid)

    looked: list[PlannedTest] = []
    members: dict[str, tuple[PlannedTest, ...]] = {}
    for t in tests:
        if t.test_id in plan.set_members:
            of_prompts = tuple(at_k(m) for m in plan.set_members[t.test_id])
            pooled = replace(t, test_id=set_test_id(of_prompts))
            members[pooled.test_id] = of_prompts
            looked.append(pooled)
        else:
            looked.append(at_k(t))
    paired = [*tests, *(m for of_prompts in members.values() for m in of_prompts)]
    keep = {a for t in paired for a in (t.original.arm_id, t.perturbed.arm_id)}
    families = {t.family for t in tests}
    replicates = {f: arms for f, arms in plan.replicates.items() if f in families}
    keep |= {a.arm_id for arms in replicates.values() for a in arms}
    return AuditPlan(
        arms=tuple(a for a in plan.arms if a.arm_id in keep),
        tests=tuple(looked),
        families=tuple(f for f in plan.families if f in families),
        k=k,
        seed=plan.seed,
        embedder=plan.embedder,
        replicates=replicates,
        set_members=members,
    )
