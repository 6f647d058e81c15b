"""One tick of a scheduled audit: fresh samples at the scheduled time, then drift: the
anytime-valid monitor of every arm (``flows.monitor``, its design the config's
``monitor.conformal``), or with ``per_tick`` the permutation tests of this tick against the
previous and the first one (``flows.drift``).

The epoch, part of every arm's id, is the flow run's scheduled start time (UTC, ISO 8601
to the second). So every tick of a schedule samples anew; a retry of the same flow run
keeps its scheduled time and resumes the tick (stored outputs are not requested again);
a run triggered by hand is scheduled for the moment it was triggered, so it is a new
tick. ``overrides={"epoch": "..."}`` runs, or resumes, a given tick instead.

A tick of a config with ``batch: true`` models waits :data:`TICK_BATCH_WAIT_S` (or the
worker's ``DBPA_TICK_BATCH_WAIT_S``) for their provider batches; batches still running then
end the tick run in the state ``AwaitingBatches`` (a Completed state of that name: nothing
failed) after it has scheduled a run of its deployment for the same epoch at the next poll,
which collects them from the record (see ARCHITECTURE.md: no worker waits for hours).

A tick that fails is retried once, a minute later, unless its failure is permanent
(``flows._retries.PERMANENT``: a rejected key, an unknown model, a bad request, an endpoint
unreachable for its whole connect budget, a config that cannot be used): the retry would
meet it again, so the tick fails once, with one message.

The record is the ``db`` parameter, else the ``DBPA_DB`` environment variable of the process
that runs the tick (a worker's: ``deployments/README.md``), else ``dbpa.duckdb``: a shared
record's URL stays out of the deployments' parameters and its password with libpq.
"""

from __future__ import annotations

import dataclasses
import math
import os
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.client.schemas.objects import State
from prefect.deployments import run_deployment
from prefect.runtime import deployment, flow_run
from prefect.states import Completed

import storage
from dbpa.config import ConfigError, load_config
from dbpa.environment import RECORD
from flows._batches import BatchesPending
from flows._retries import retried_unless_permanent
from flows.audit import AuditOutcome, audit, audit_with_runner, flow_run_tags
from flows.drift import drift, outdated_epochs
from flows.monitor import monitor
from tasks.report import write_reports

TICK_BATCH_WAIT_S = 120.0
"""How long a tick polls its provider batches before it hands over to a scheduled re-run
(``DBPA_TICK_BATCH_WAIT_S`` in the environment of the process that runs the tick sets it)."""
RETRY_DELAY_SECONDS = 60
"""Wait before the retry of a failed tick (the retry resumes it); permanent failures are not
retried."""


def come_back(waiting: BatchesPending, parameters: dict[str, Any]) -> State[Any]:
    """The tick's end while its batches run: a run of its deployment with ``parameters``
    (the same epoch) scheduled at the next poll, and the state ``AwaitingBatches``."""
    message = str(waiting)
    deployment_id = deployment.id
    if deployment_id is not None:
        when = datetime.now(UTC) + timedelta(seconds=waiting.poll_in_s)
        run_deployment(
            deployment_id,
            parameters=parameters,
            scheduled_time=when,
            timeout=0,
            as_subflow=False,
            idempotency_key=f"{flow_run.id}-batches",
        )
        message += f"; this tick runs again at {when.isoformat(timespec='seconds')}"
    else:
        message += f"; run the tick again with overrides epoch={parameters['overrides']['epoch']}"
    get_run_logger().info("%s", message)
    return Completed(name="AwaitingBatches", message=message)


def tick_batch_wait_s() -> float:
    """``DBPA_TICK_BATCH_WAIT_S`` (seconds, 0 or more) if set, else :data:`TICK_BATCH_WAIT_S`."""
    chosen = os.environ.get("DBPA_TICK_BATCH_WAIT_S", "").strip()
    if not chosen:
        return TICK_BATCH_WAIT_S
    try:
        seconds = float(chosen)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0.0):
        raise ConfigError(f"DBPA_TICK_BATCH_WAIT_S must be seconds, 0 or more, not {chosen!r}")
    return seconds


def tick_epoch() -> str:
    """This flow run's scheduled start time in UTC, to the second (now outside a run)."""
    scheduled: datetime = flow_run.scheduled_start_time
    return scheduled.astimezone(UTC).isoformat(timespec="seconds")


def _flow_run_name() -> str:
    """The config's name and the tick's epoch (the one given in ``overrides``, if any)."""
    epoch = (flow_run.parameters.get("overrides") or {}).get("epoch") or tick_epoch()
    return f"{Path(flow_run.parameters['config_path']).stem} @ {epoch}"


@flow(
    name="dbpa-scheduled-audit",
    flow_run_name=_flow_run_name,
    retries=1,
    retry_delay_seconds=RETRY_DELAY_SECONDS,
    log_prints=True,
)
def scheduled_audit(
    config_path: str,
    db: str | None = None,
    out: str | None = None,
    overrides: dict[str, Any] | None = None,
    runner: str = "threads",
    per_tick: bool = False,
) -> AuditOutcome | State[Any]:
    """Audit ``config_path`` at this tick's epoch, replay every arm's drift monitor through
    the latest epoch (in epoch order: ``dbpa.drift.epoch_order``; a tick run late takes its
    place), or with ``per_tick`` test every arm against the previous and the first epoch,
    and again for the later epochs whose previous or first epoch this tick now is, and write
    the run's reports with the drift history. A permanent failure of the audit fails the
    tick without a retry.

    ``db``: the record (None: ``DBPA_DB``, else ``dbpa.duckdb``); ``overrides`` sets config
    keys, dotted for nested ones (``{"k": 10}``, ``{"embedder.model": "..."}``);
    ``runner``: threads, dask or dask=ADDRESS.
    """
    logger = get_run_logger()
    db = db or os.environ.get(RECORD) or "dbpa.duckdb"
    with retried_unless_permanent():
        batch_wait_s = tick_batch_wait_s()
        config = load_config(config_path, {"epoch": tick_epoch(), **(overrides or {})})
        logger.info("%s: tick %s (%s)", config.name, config.epoch, Path(config_path).resolve())
        if runner == "threads":  # inline: its task runs and artifacts are the tick's own
            run_tick: Any = audit.fn
        else:  # the cluster is a subflow's task runner
            run_tick = audit_with_runner(runner)
        try:
            with tags(*flow_run_tags(config)) if runner != "threads" else nullcontext():
                outcome: AuditOutcome = run_tick(
                    config=config, db=db, out=out, publish=False, batch_wait_s=batch_wait_s
                )
        except BatchesPending as waiting:
            again = {**(overrides or {}), "epoch": config.epoch}
            return come_back(waiting, {**flow_run.parameters, "overrides": again})
        if not per_tick:
            monitor.fn(audit=config.name, db=db)
        else:
            drift.fn(audit=config.name, db=db, epoch=config.epoch)
            for later in outdated_epochs(config.name, db, config.epoch):
                logger.info("drift of epoch %s again: %s comes before it", later, config.epoch)
                drift.fn(audit=config.name, db=db, epoch=later, publish=False)  # its own
        with storage.Store(db) as store:
            storage.register(store)
            try:  # with the drift section, published on the tick's run
                reports = write_reports(db, outcome.run_id, out)
            finally:
                storage.unregister(store)
    return dataclasses.replace(outcome, reports=reports)
