"""The monitor flow: states stored once per tick, one ``dbpa.drift.alarm`` event per alarm
(a re-run emits none), the evidence table and chart as artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

import tasks.monitor
from flows.monitor import monitor
from storage import Store
from tests.drift.conftest import record_tick
from tests.drift.test_monitor import record_reweighted

pytestmark = pytest.mark.usefixtures("prefect_harness")
EPOCHS = [f"2026-11-{day:02d}T03:00:00+00:00" for day in range(1, 13)]
AUTOMATION = Path(__file__).parents[2] / "deployments" / "automations" / "drift-alarm.yaml"


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    monkeypatch.setattr(tasks.monitor, "emit_event", lambda **event: found.append(event))
    return found


def test_an_alarm_is_stored_and_announced_once(tmp_path, events):
    db = tmp_path / "a.duckdb"
    with Store(db) as store:
        for i, epoch in enumerate(EPOCHS):
            record_tick(store, epoch, shift={"original": 4.0} if i >= 5 else None)
    first = monitor(audit="drifty", db=str(db))
    again = monitor(audit="drifty", db=str(db))  # a retried or re-run tick
    with Store(db, read_only=True) as store:
        rows = store.monitor_ticks("drifty")
    assert len(rows) == 3 * 11  # each arm once per tick after the baseline
    assert [a.split(" ")[0] for a in first.alarmed] == ["original"]
    assert first.raised == first.alarmed
    assert again.raised == ()
    assert len(events) == 1
    (event,) = events
    assert event["event"] == "dbpa.drift.alarm"
    payload = event["payload"]
    assert payload["audit"] == "drifty"
    assert payload["arm"] == first.alarmed[0]
    assert payload["e_value"] >= payload["threshold"] == pytest.approx(60.0)
    assert EPOCHS.index(payload["epoch"]) >= 5
    with get_client(sync_client=True) as client:
        keys = {"drifty-monitor", "drifty-evidence"}
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=list(keys)))
        )
    assert {a.key for a in found} == keys
    chart = next(a for a in found if a.key == "drifty-evidence")
    assert "data:image/png;base64," in str(chart.data)


def test_quiet_ticks_emit_nothing(tmp_path, events):
    db = tmp_path / "a.duckdb"
    with Store(db) as store:
        for epoch in EPOCHS[:6]:
            record_tick(store, epoch)
    summary = monitor(audit="drifty", db=str(db), publish=False)
    assert summary.alarmed == summary.raised == ()
    assert events == []


def test_the_shipped_automation_listens_for_the_alarm_event():
    from prefect.automations import AutomationCore

    shipped = yaml.safe_load(AUTOMATION.read_text())
    AutomationCore.model_validate(shipped)  # what ``prefect automation create`` accepts
    assert shipped["trigger"]["expect"] == [tasks.monitor.ALARM_EVENT]
    assert shipped["trigger"]["match"]["prefect.resource.id"] == "dbpa.audit.*"
    body = shipped["actions"][0]["body"]
    for key in ("audit", "arm", "tick", "e_value"):
        assert f"event.payload.{key}" in body


def test_the_flow_runs_the_configs_design(tmp_path, events):
    """Without a design given (as a scheduled tick calls it) the config's ``monitor.conformal:
    both`` alarms on a change of familiar answers' shares."""
    db = tmp_path / "a.duckdb"
    with Store(db) as store:
        record_reweighted(store, quiet=12, changed=6, monitor={"conformal": "both"})
    found = monitor(audit="drifty", db=str(db), publish=False)
    assert [a.split(" ")[0] for a in found.alarmed] == ["original"]
    assert len(events) == 1
