"""Drift: the arms of an audit at one epoch tested against the same arms at an earlier one.

An arm is a model, its parameters, the messages and the epoch, so the same model,
parameters and messages at two ticks of a scheduled audit are two arms. Their stored
embeddings go through the permutation test of a perturbation (``run_test``); the tests
of one comparison (every arm at ``epoch`` against ``reference_epoch``) are one family for
the multiplicity correction, with the audit's correction and alpha.

Reads the record through a ``storage.Store``; never calls a model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dbpa.analysis import Decision, PerturbationTestRecord, decide_family, derive_test_id, run_test
from dbpa.config import AuditConfig, parse_config
from dbpa.plan import AuditPlan, plan_audit

if TYPE_CHECKING:
    from storage import Store

__all__ = [
    "AGAINST",
    "Comparison",
    "DriftError",
    "DriftJob",
    "DriftResult",
    "Epoch",
    "decide",
    "load_vectors",
    "plan_drift",
    "read_epochs",
    "run_comparison",
]

AGAINST = ("previous", "baseline")
"""What an epoch is compared with: the epoch before it, or the baseline epoch."""


class DriftError(ValueError):
    """A drift request that cannot be served; the message names the option and why."""


@dataclass(frozen=True)
class Epoch:
    """An epoch of an audit that has a completed run."""

    epoch: str
    run_id: str
    """Its latest completed run."""
    config: Mapping[str, Any] = field(repr=False)
    """The configuration of that run, as stored."""


@dataclass(frozen=True)
class DriftJob:
    """One arm at the tested epoch and at the reference epoch."""

    family: str
    role: str
    """``original``, or the id of the first perturbation of ``family`` that samples the arm."""
    reference_arm: str
    arm: str
    test_id: str

    @property
    def label(self) -> str:
        """``role (family)``, e.g. ``persona-child (gpt-4o)``."""
        return f"{self.role} ({self.family})"


@dataclass(frozen=True)
class Comparison:
    """One family of drift tests: every arm at ``epoch`` against ``reference_epoch``."""

    audit: str
    against: str
    """``previous`` or ``baseline``."""
    epoch: str
    reference_epoch: str
    config: AuditConfig = field(repr=False)
    """The tested epoch's configuration: embedder, analysis and seed of the tests."""
    k: int
    """Outputs compared per arm: the smaller k of the two epochs' runs."""
    embedder: str
    """Key of the embeddings compared."""
    jobs: tuple[DriftJob, ...]


@dataclass(frozen=True)
class DriftResult:
    """One arm's drift test and its decision within the comparison."""

    job: DriftJob
    record: PerturbationTestRecord
    decision: Decision

    def row(self, comparison: Comparison) -> dict[str, Any]:
        """The row ``Store.add_drift`` stores."""
        return {
            "reference_epoch": comparison.reference_epoch,
            "arm_id": self.job.arm,
            "reference_arm": self.job.reference_arm,
            "family": self.job.family,
            "role": self.job.role,
            "test_id": self.job.test_id,
            "method": comparison.config.correction,
            "alpha": comparison.config.alpha,
            "adjusted_p": self.decision.adjusted_p,
            "reject": self.decision.reject,
        }


def read_epochs(store: Store, audit: str) -> tuple[Epoch, ...]:
    """The epochs of ``audit`` with a completed run, oldest first."""
    return tuple(
        Epoch(str(r.epoch), str(r.run_id), _as_mapping(r.config))
        for r in store.audit_epochs(audit).itertuples()
    )


def plan_drift(
    audit: str,
    epochs: Sequence[Epoch],
    *,
    epoch: str = "latest",
    baseline: str = "first",
    against: Sequence[str] = AGAINST,
) -> tuple[Comparison, ...]:
    """The comparisons of ``epoch`` (default: the latest) against the previous epoch and
    the ``baseline`` one (default: the first); none when no earlier epoch exists.

    The arms are those of the tested epoch's configuration; the reference arms are the
    same configuration at the reference epoch.
    """
    for value in against:
        if value not in AGAINST:
            raise DriftError(f"against: unknown {value!r}; choose {' or '.join(AGAINST)}")
    if not epochs:
        raise DriftError(f"audit: no completed run of {audit!r} is recorded")
    names = [e.epoch for e in epochs]
    tested = _position("epoch", epoch, names, default=len(names) - 1)
    base = _position("baseline", baseline, names, default=0)
    if base > tested:
        raise DriftError(
            f"baseline: epoch {names[base]!r} is later than the tested epoch {names[tested]!r}"
        )
    references = {"previous": tested - 1, "baseline": base}
    config = parse_config(epochs[tested].config, source=f"run {epochs[tested].run_id}")
    plan = plan_audit(config)
    comparisons = []
    for name in against:
        if not 0 <= references[name] < tested:
            continue
        reference = epochs[references[name]]
        k = min(config.k, int(reference.config.get("k", config.k)))
        comparisons.append(
            Comparison(
                audit=audit,
                against=name,
                epoch=names[tested],
                reference_epoch=reference.epoch,
                config=config,
                k=k,
                embedder=plan.embedder,
                jobs=_jobs(config, plan, reference.epoch, k),
            )
        )
    return tuple(comparisons)


def load_vectors(
    store: Store, comparison: Comparison
) -> tuple[list[tuple[DriftJob, NDArray[np.float32], NDArray[np.float32]]], dict[str, str]]:
    """The (job, reference vectors, vectors) of every arm embedded at both epochs, and why
    the others cannot be tested (label -> reason)."""
    k = comparison.k
    ready, skipped = [], {}
    for job in comparison.jobs:
        try:
            reference = store.arm_vectors(job.reference_arm, comparison.embedder, k)
            current = store.arm_vectors(job.arm, comparison.embedder, k)
        except LookupError:
            skipped[job.label] = (
                f"not sampled and embedded (k={k}) at both {comparison.reference_epoch} "
                f"and {comparison.epoch}"
            )
            continue
        ready.append((job, reference, current))
    return ready, skipped


def decide(
    comparison: Comparison, jobs: Sequence[DriftJob], records: Sequence[PerturbationTestRecord]
) -> tuple[DriftResult, ...]:
    """Correct the comparison's tests as one family."""
    if not jobs:
        return ()
    by_test = {r.test_id: r for r in records}
    p_values: dict[str, float | None] = {j.label: by_test[j.test_id].p_value for j in jobs}
    decisions = decide_family(p_values, comparison.config.analysis)
    return tuple(
        DriftResult(job, by_test[job.test_id], d) for job, d in zip(jobs, decisions, strict=True)
    )


def run_comparison(
    store: Store, comparison: Comparison
) -> tuple[tuple[DriftResult, ...], dict[str, str]]:
    """Test and correct a comparison in this process: its results, and the arms skipped."""
    ready, skipped = load_vectors(store, comparison)
    records = [
        run_test(
            job.test_id,
            reference,
            current,
            original_arm=job.reference_arm,
            perturbed_arm=job.arm,
            embedder=comparison.embedder,
            analysis=comparison.config.analysis,
        )
        for job, reference, current in ready
    ]
    return decide(comparison, [job for job, _, _ in ready], records), skipped


# ---------------------------------------------------------------------- helpers


def _position(option: str, value: str, names: Sequence[str], default: int) -> int:
    if value in ("latest", "first"):
        return default
    if value not in names:
        listed = ", ".join(names[-5:])
        raise DriftError(f"{option}: no completed run at epoch {value!r}; recorded: {listed}")
    return names.index(value)


def _jobs(
    config: AuditConfig, plan: AuditPlan, reference_epoch: str, k: int
) -> tuple[DriftJob, ...]:
    reference = plan_audit(config.model_copy(update={"epoch": reference_epoch}))
    jobs: dict[str, DriftJob] = {}
    for now, then in zip(plan.tests, reference.tests, strict=True):
        pairs = (
            ("original", now.original, then.original),
            (now.perturbation.id, now.perturbed, then.perturbed),
        )
        for role, arm, earlier in pairs:
            if arm.arm_id in jobs:
                continue
            test_id = derive_test_id(
                earlier.arm_id, arm.arm_id, plan.embedder, config.analysis, config.seed, k
            )
            jobs[arm.arm_id] = DriftJob(now.family, role, earlier.arm_id, arm.arm_id, test_id)
    return tuple(jobs.values())


def _as_mapping(value: Any) -> Mapping[str, Any]:
    """A stored JSON column (text, or already decoded) as a mapping."""
    return json.loads(value) if isinstance(value, str) else dict(value)
