"""A config loaded, bound and planned once, with what the record says is still to do.

Every later step of a run receives this: the warm-ups and the head start read what is left
(``work``) and sample ``ready``; deciding from the record, or the audit flow, gets ``plan``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._work import PendingWork, generation_work, pending_work

if TYPE_CHECKING:
    from dbpa.config import AuditConfig
    from dbpa.plan import AuditPlan
    from storage import Turn


@dataclass(frozen=True)
class Prepared:
    """One run of an audit, planned."""

    config: AuditConfig
    """The validated config, its paraphrases bound when the record holds them all."""
    plan: AuditPlan | None
    """Its plan; None while paraphrases are to be generated (the flow generates them first,
    then plans the config they complete)."""
    ready: AuditPlan
    """What the run surely samples from the start: the plan (or, while paraphrases are to be
    generated, the plan of the family that needs none), in a sequential audit to its first
    look only (a test may stop there; which go on, only the flow knows)."""
    work: PendingWork
    """What the record says is still to do."""
    db: str | Path
    """The record: a DuckDB file, or a PostgreSQL record's URL."""
    turn: Turn | None = None
    """This run's turn at writing a file ``db`` (``storage.ready_to_write``), held until
    ``run_prepared`` ends: a run started at the same moment waits for it. None on a
    PostgreSQL record, which many runs write at once."""

    def release(self) -> None:
        """End this run's turn at writing the record (idempotent)."""
        if self.turn is not None:
            self.turn.release()

    @property
    def finished(self) -> bool:
        """Every output, vector and test is stored: only the decisions and reports are left
        (a sequential audit's decisions come from its looks, which only the flow reads)."""
        return self.plan is not None and self.work.done and not self.config.sequential


def load_audit(
    config: Path, overrides: dict[str, Any] | None = None, db: str | Path | None = None
) -> tuple[AuditConfig, AuditPlan | None]:
    """The validated config and its plan; a ``ConfigError`` names file, field and reason.

    The plan is None while a paraphrase spec's texts are not generated yet (the audit flow
    generates them first); with ``db``, a record that holds them all, they are bound first
    (see :func:`bind_stored`).
    """
    from dbpa.plan import plan_audit
    from dbpa.spend import check_batches, check_prices, is_capped

    cfg = bind_stored(_loaded(config, overrides), db)
    check_batches(cfg)  # batch: true on a provider without a batch API: refused
    plan = None if cfg.ungenerated else plan_audit(cfg)
    if is_capped(cfg):  # a capped run of a model of unknown price: refused
        check_prices(cfg, plan or plan_audit(cfg.ready_part()))
    return cfg, plan


def _loaded(config: Path, overrides: dict[str, Any] | None) -> AuditConfig:
    from dbpa.config import ConfigError, load_config

    try:
        return load_config(config, overrides or {})
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"{config}: {exc}") from None


def bind_stored(cfg: AuditConfig, db: str | Path | None) -> AuditConfig:
    """``cfg`` with its paraphrases bound when the record ``db`` holds every one of them (read
    only; with ``min_similarity`` the embedder is loaded)."""
    if not (cfg.ungenerated and db is not None):
        return cfg
    import storage
    from dbpa.generation import bind_generated, embed_with, generator_jobs, stored_outputs

    if not (storage.is_postgres_url(db) or Path(db).is_file()):
        return cfg
    jobs = generator_jobs(cfg)
    try:
        with storage.Store(db, read_only=True) as store:
            outputs = stored_outputs(jobs, store)
    except FileNotFoundError:  # a database no audit has written yet
        return cfg
    if any(len(outputs[j.key]) != j.spec.n for j in jobs):
        return cfg
    embedder = embed_with(cfg)
    return bind_generated(cfg, outputs, embedder)


def prepare(
    config: Path,
    overrides: dict[str, Any],
    db: str | Path,
    *,
    wait: bool,
    on_wait: Callable[[int | None], None],
    needs_margin: str | None = None,
) -> Prepared:
    """Load, bind and plan ``config`` once, wait for this run's turn at writing the record
    ``db`` (a file: ``on_wait`` is told the holder's pid once; with ``wait`` False,
    ``DatabaseInUseError`` at once; a PostgreSQL record has no turns: many runs write it at
    once) and read what is left to do. The turn is held until
    ``run_prepared`` ends (``Prepared.release``). ``needs_margin`` names an option that needs the
    config's equivalence margin (a ``ConfigError`` without one, before any wait)."""
    from dbpa.config import ConfigError
    from dbpa.plan import plan_audit
    from dbpa.spend import check_batches, check_prices
    from storage import Store, is_postgres_url, ready_to_write

    cfg = _loaded(config, overrides)
    if needs_margin and cfg.equivalence is None:
        raise ConfigError(
            f"{needs_margin}: the config has no equivalence margin (set `equivalence:` in "
            "it, or --set equivalence=true)"
        )
    if is_postgres_url(db):  # reached, login and database accepted, migrated: before any work
        Store(db).close()
        turn = None
    else:
        turn = ready_to_write(db, wait=wait, on_wait=on_wait)
    try:
        cfg = bind_stored(cfg, db)  # paraphrases: bound here when the record holds them
        # With paraphrases still to generate, the flow generates, then plans; the arms that
        # need none (the original's, other specs') are sampled from the start all the same.
        plannable = cfg.ready_part() if cfg.ungenerated else cfg
        planned = plan_audit(plannable)
        check_prices(cfg, planned)  # a capped run of a model of unknown price: refused
        check_batches(cfg)  # batch: true on a provider without a batch API: refused
        plan = None if cfg.ungenerated else planned
        ready = first_look(planned, cfg)
        work = pending_work(ready, db) if plan is not None else generation_work(cfg)
    except BaseException:
        if turn is not None:
            turn.release()
        raise
    return Prepared(cfg, plan, ready, work, db, turn)


def first_look(plan: AuditPlan, cfg: AuditConfig) -> AuditPlan:
    """``plan`` as far as the run surely samples it: a sequential audit only to its first
    look. A finished sequential audit, its arms short of k where tests stopped, has nothing
    to sample."""
    if not cfg.sequential:
        return plan
    return dataclasses.replace(plan, k=cfg.sequential.design(cfg.k).looks[0])
