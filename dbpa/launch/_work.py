"""What a run still has to do, read from the record before its flow starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dbpa.config import AuditConfig
    from dbpa.plan import AuditPlan


@dataclass(frozen=True)
class PendingWork:
    """What a run of a plan still has to do, by the record."""

    models: frozenset[str]
    """Model strings of the arms short of k outputs (they will be sampled)."""
    embedding: bool
    """Whether some output has (or will have) no vector from the plan's embedder."""
    tests: bool = True
    """Whether some planned test (or its effect interval) is not stored."""

    @property
    def done(self) -> bool:
        """Nothing left to sample, embed or test: only the decisions and reports."""
        return not (self.models or self.embedding or self.tests)


def pending_work(plan: AuditPlan, db: str | Path) -> PendingWork:
    """What a run of ``plan`` on the record ``db`` (a file or a URL) still has to do.

    Everything when the record is missing or cannot be read here (in use, damaged,
    unreachable): the flow then meets and reports that itself.
    """
    import storage

    everything = PendingWork(frozenset(a.model.model for a in plan.arms), embedding=True)
    if not (storage.is_postgres_url(db) or Path(db).is_file()):
        return everything

    arm_ids = [a.arm_id for a in plan.arms]
    try:
        with storage.Store(db, read_only=True) as store:
            stored = store.sample_indices(arm_ids)
            short = frozenset(
                a.model.model
                for a in plan.arms
                if sum(1 for i in stored[a.arm_id] if i < plan.k) < plan.k
            )
            if short:
                return PendingWork(short, embedding=True)
            texts = store.arm_texts(arm_ids, plan.k)
            missing = store.missing_embeddings(plan.embedder, texts.text_hash)
            test_ids = {t.test_id for t in plan.all_tests}
            tested = store.existing_tests(test_ids) if not missing else set()
    except Exception:  # the flow opens the record itself and reports what is wrong
        return everything
    return PendingWork(frozenset(), embedding=bool(missing), tests=tested != test_ids)


def generation_work(config: AuditConfig) -> PendingWork:
    """What a run of ``config`` may do before its plan is known (paraphrases to generate or
    read): everything, its audited and generator models included."""
    generators = frozenset(spec.model.model for _, spec in config.ungenerated)
    return PendingWork(frozenset(m.model for m in config.models) | generators, embedding=True)
