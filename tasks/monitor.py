"""The drift monitor's alarm as a Prefect event, for automations to act on."""

from __future__ import annotations

from prefect import task
from prefect.events import emit_event

from dbpa.drift import MonitorReplay, MonitorTick

ALARM_EVENT = "dbpa.drift.alarm"


@task(name="dbpa-drift-alarm", task_run_name="alarm {tick.series} @ {tick.epoch}")
def emit_alarm(replay: MonitorReplay, tick: MonitorTick) -> None:
    """Emit ``dbpa.drift.alarm`` for an arm whose monitor alarmed at ``tick``."""
    emit_event(
        event=ALARM_EVENT,
        resource={
            "prefect.resource.id": f"dbpa.audit.{replay.audit}.{tick.arm_id}",
            "prefect.resource.name": f"{replay.audit}: {tick.series}",
            "dbpa.audit": replay.audit,
        },
        payload={
            "audit": replay.audit,
            "arm": tick.series,
            "arm_id": tick.arm_id,
            "epoch": tick.epoch,
            "baseline_epoch": tick.baseline_epoch,
            "tick": tick.state.ticks,
            "e_value": tick.state.e_value,
            "log_e_value": tick.state.log_e_value,
            "threshold": tick.state.threshold,
            "form": replay.form,
        },
    )
