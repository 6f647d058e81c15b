"""The drift monitor flow: every arm's evidence replayed, stored, alarmed and charted.

``dbpa.drift.replay_monitor`` replays each arm's anytime-valid monitor over the audit's
epochs from the stored embeddings; the states are stored by (series, baseline, epoch), so a
retried or re-run tick rewrites the same rows. An arm whose alarm is raised at a tick not
stored as alarmed before emits ``dbpa.drift.alarm`` (once per alarm: a re-run finds it
stored; at least once: the event goes out before the rows are written). With ``publish``,
a table artifact lists each arm's evidence and a markdown artifact shows the evidence
chart. No model is called.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

import storage
from dbpa.drift import MonitorReplay, MonitorTick, replay_monitor
from tasks.artifacts import artifact_key, outcome_digest, publish_once
from tasks.monitor import emit_alarm


@dataclass(frozen=True)
class MonitorSummary:
    """What one run of the monitor found."""

    audit: str
    arms: int
    alarmed: tuple[str, ...]
    """Arms whose alarm is raised (now or at an earlier tick since their baseline)."""
    raised: tuple[str, ...]
    """Arms whose alarm was first raised in this run (their events were emitted)."""


@flow(name="dbpa-monitor", flow_run_name="monitor {audit}", log_prints=True)
def monitor(
    audit: str,
    db: str = "dbpa.duckdb",
    epoch: str = "latest",
    tolerance: float | None = None,
    form: str = "test",
    conformal: str | None = None,
    publish: bool = True,
    pool: str | None = None,
) -> MonitorSummary:
    """Replay the drift monitor of every arm of ``audit`` through ``epoch``, store it, emit
    ``dbpa.drift.alarm`` for new alarms and (with ``publish``) show the evidence.
    ``conformal`` (outputs, ticks or both): the conformal processes, None for the config's
    ``monitor.conformal`` at ``epoch`` (a scheduled tick uses its config's); ``pool``
    (prompts or arms) and ``tolerance`` likewise for ``monitor.pool`` and
    ``monitor.tolerance``."""
    logger = get_run_logger()
    with storage.Store(db) as store:
        replay = replay_monitor(
            store,
            audit,
            epoch=epoch,
            tolerance=tolerance,
            form=form,
            conformal=conformal,
            pool=pool,
        )
        known = _stored_alarms(store, audit)
        raised = [t for t in replay.ticks if t.raised and (t.series, t.baseline_epoch) not in known]
        for tick in raised:
            emit_alarm(replay, tick)
        store.add_monitor_ticks(audit, [t.row(replay) for t in replay.ticks])
    for label, reason in replay.skipped.items():
        logger.warning("monitor: %s not monitored: %s", label, reason)
    latest = replay.latest()
    alarmed = tuple(t.series for t in latest if t.state.alarm)
    logger.info(
        "monitor of %s: %s, conformal %s; %d alarmed%s",
        audit,
        replay.design,
        replay.conformal,
        len(alarmed),
        f" ({', '.join(alarmed)})" if alarmed else "",
    )
    if publish and latest:
        _publish(replay, latest)
    return MonitorSummary(audit, replay.arms, alarmed, tuple(t.series for t in raised))


def _stored_alarms(store: storage.Store, audit: str) -> set[tuple[str, str]]:
    """(series, baseline epoch) whose alarm is stored already."""
    rows = store.monitor_ticks(audit)
    alarmed = rows[rows.alarm.astype(bool)]
    return {(str(r.series), str(r.baseline_epoch)) for r in alarmed.itertuples()}


def _publish(replay: MonitorReplay, latest: tuple[MonitorTick, ...]) -> None:
    from dbpa.report import evidence_figure

    table = [_table_row(t) for t in latest]
    digest = outcome_digest(replay.audit, table)
    publish_once(
        create_table_artifact,
        artifact_key(replay.audit, "monitor"),
        f"Drift monitor of {replay.audit}: evidence of each series against its baseline "
        f"({replay.design}, conformal {replay.conformal})",
        digest,
        table=table,
    )
    chart = evidence_figure(replay.history())
    publish_once(
        create_markdown_artifact,
        artifact_key(replay.audit, "evidence"),
        f"Evidence of {replay.audit}'s arms over the ticks",
        digest,
        markdown=f"![evidence over ticks]({chart.uri})",
    )


def _table_row(tick: MonitorTick) -> dict[str, str]:
    s = tick.state
    return {
        "arm": tick.series,
        "arms": str(tick.arms),
        "decision": "alarm" if s.alarm else "no alarm",
        "e-value": f"{s.e_value:.3g}",
        "alarm line": f"{s.threshold:.3g}",
        "ticks": str(s.ticks),
        "alarmed at tick": str(s.alarm_tick) if s.alarm_tick else "-",
        "baseline": tick.baseline_epoch,
    }
