"""Which drift tests to run: the comparisons of an epoch against earlier ones, arm by arm."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbpa.analysis import SequentialSpec, derive_test_id
from dbpa.config import AuditConfig, parse_config
from dbpa.plan import AuditPlan, plan_audit

from ._epochs import Epoch

__all__ = ["AGAINST", "Comparison", "DriftError", "DriftJob", "outdated", "plan_drift"]

AGAINST = ("previous", "baseline")
"""What an epoch is compared with: the epoch before it in epoch order, or the baseline
epoch."""


class DriftError(ValueError):
    """A drift request that cannot be served; the message names the option and why."""


@dataclass(frozen=True)
class DriftJob:
    """One arm at the tested epoch and at the reference epoch."""

    family: str
    role: str
    """``original``, or the id of the first perturbation of ``family`` that samples the arm;
    over a set of prompts followed by `` on <prompt id>`` (every prompt's arms drift apart)."""
    reference_arm: str
    arm: str
    test_id: str
    prompt_id: str | None = None
    """The arm's prompt over a set of prompts; None for a single prompt."""

    @property
    def label(self) -> str:
        """``role (family)``, e.g. ``persona-child (gpt-4o)``."""
        return f"{self.role} ({self.family})"

    @property
    def pool(self) -> str:
        """The label without the prompt: every prompt's arm of this perturbation (or the
        original) and family over a set, e.g. ``persona-child (gpt-4o)``; the label itself
        for a single prompt."""
        if self.prompt_id is None:
            return self.label
        return f"{self.role.removesuffix(f' on {self.prompt_id}')} ({self.family})"


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


def plan_drift(
    audit: str,
    epochs: Sequence[Epoch],
    *,
    epoch: str = "latest",
    baseline: str = "first",
    against: Sequence[str] = AGAINST,
) -> tuple[Comparison, ...]:
    """The comparisons of ``epoch`` (default: the latest) against the previous epoch and
    the ``baseline`` one (default: the first); none when no earlier epoch exists. ``epochs``
    are in epoch order (:func:`read_epochs`): latest, previous and first are meant in it,
    not in the order the runs happened.

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
        k = min(_common_k(config.model_dump()), _common_k(reference.config, config.k))
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


def outdated(
    epochs: Sequence[str], recorded: Mapping[str, Mapping[str, str]], tick: str
) -> tuple[str, ...]:
    """The epochs after ``tick`` whose drift tests are to run again now that ``tick`` is
    recorded (``epochs`` in epoch order, ``tick`` among them): the next one, unless its
    previous epoch is ``tick`` already, and every later one whose recorded tests compare
    with another epoch than the one before it and the first (a tick recorded late is the
    previous epoch of the next, and the baseline of all when it is the earliest).
    ``recorded``: epoch -> against -> the reference epoch of its recorded tests."""
    position = list(epochs).index(tick)
    found = []
    for i in range(position + 1, len(epochs)):
        now = {"previous": epochs[i - 1], "baseline": epochs[0]}
        tested = recorded.get(epochs[i], {})
        untested = i == position + 1 and tested.get("previous") != tick
        if untested or any(now[against] != ref for against, ref in tested.items()):
            found.append(epochs[i])
    return tuple(found)


def _common_k(config: Mapping[str, Any], default: int = 20) -> int:
    """Outputs every arm of an epoch's run holds: its k, or in a sequential audit (whose
    tests stop early) the first look's k."""
    k = int(config.get("k", default))
    sequential = config.get("sequential")
    if not sequential:
        return k
    return SequentialSpec.model_validate(sequential).design(k).looks[0]


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
    for now, then in zip(plan.unit_tests, reference.unit_tests, strict=True):
        on = "" if now.prompt_id is None else f" on {now.prompt_id}"
        pairs = (
            (f"original{on}", now.original, then.original),
            (f"{now.perturbation.id}{on}", now.perturbed, then.perturbed),
        )
        for role, arm, earlier in pairs:
            if arm.arm_id in jobs:
                continue
            test_id = derive_test_id(
                earlier.arm_id, arm.arm_id, plan.embedder, config.analysis, config.seed, k
            )
            jobs[arm.arm_id] = DriftJob(
                now.family, role, earlier.arm_id, arm.arm_id, test_id, now.prompt_id
            )
    return tuple(jobs.values())
