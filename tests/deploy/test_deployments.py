"""deployments/prefect.yaml on a real Prefect server: deployed as written, triggered with
parameters, run by a process worker, its results read back through the API."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from storage import Store
from tests.deploy._processes import REPO, Api
from tests.pipeline.conftest import RULES, make_config
from tests.support.scripted_server import ScriptedServer

SPEC = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
PERSONAS = "dbpa-scheduled-audit/personas"


def test_one_nightly_deployment_per_example():
    deployments = {d["name"]: d for d in SPEC["deployments"]}
    assert sorted(deployments) == [p.stem for p in EXAMPLES]
    for example in EXAMPLES:
        d = deployments[example.stem]
        assert yaml.safe_load(example.read_text())["name"] == example.stem
        assert d["entrypoint"] == "flows.scheduled.scheduled_audit"
        assert d["parameters"]["config_path"] == f"examples/{example.name}"
        assert d["schedules"] == [{"cron": "0 3 * * *", "timezone": "UTC"}]
        assert d["work_pool"]["name"] == "dbpa"
        assert f"audit:{example.stem}" in d["tags"]
    assert SPEC["pull"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": "{{ repo.stdout }}"}}
    ]


def _epoch(run: dict[str, Any]) -> str:
    return datetime.fromisoformat(run["expected_start_time"]).isoformat(timespec="seconds")


@pytest.mark.slow
def test_triggered_ticks_run_on_a_worker_and_publish_reports_and_drift(
    deployed, worker, tmp_path: Path
):
    api: Api = deployed.api
    assert api.deployment(PERSONAS)["parameters"] == {
        "config_path": "examples/personas.yaml",
        "db": "dbpa.duckdb",
        "out": "reports",
    }
    db, out = tmp_path / "audit.duckdb", tmp_path / "reports"
    config = tmp_path / "flu.yaml"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config.write_text(yaml.safe_dump(make_config(provider)))
        params = (f"config_path={config}", f"db={db}", f"out={out}")
        first = deployed.final(deployed.trigger(PERSONAS, *params, 'overrides={"k": 6}'), worker)
        assert first["state"]["type"] == "COMPLETED", worker.output()[-4000:]
        assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 6
        second = deployed.final(deployed.trigger(PERSONAS, *params), worker)
        assert second["state"]["type"] == "COMPLETED", worker.output()[-4000:]
        assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 6 + 5 * 8

    # Named after what they do, tagged per deployment, audit and model.
    assert first["name"] == f"flu @ {_epoch(first)}"
    assert "audit:personas" in first["tags"]
    children = api.flow_runs(parent_flow_run_id={"any_": [second["id"]]})
    assert [c["name"] for c in children] == ["audit persona-test", "drift persona-test"]
    for child in children:
        assert {"audit:persona-test", "model:openai/scripted"} <= set(child["tags"])

    # Each manual run is a tick of its own: its epoch is its scheduled start time.
    with Store(db, read_only=True) as store:
        runs = store.runs().sort_values("started_at")
        drift = store.drift("persona-test")
    assert list(runs.epoch) == [_epoch(first), _epoch(second)]
    assert set(drift.against) == {"previous", "baseline"}
    assert set(drift.reference_epoch) == {_epoch(first)}
    assert len(drift) == 2 * 5  # every arm against the one earlier tick, twice

    # The artifacts of the latest tick, read back through the API.
    table = api.artifacts("persona-test-results")[0]
    rows = json.loads(table["data"])
    assert table["type"] == "table"
    assert {r["perturbation"] for r in rows} >= {"persona-doctor", "persona-comedian"}
    summary = api.artifacts("persona-test-summary")[0]
    assert summary["type"] == "markdown"
    html = Path(re.search(r"- html: `([^`]+)`", summary["data"]).group(1))
    assert html.parent == out
    assert 'id="drift"' in html.read_text()
    drift_table = api.artifacts("persona-test-drift")[0]
    drift_rows = json.loads(drift_table["data"])
    assert len(drift_rows) == 2 * 5
    assert {r["against"] for r in drift_rows} == {"previous", "baseline"}  # epochs: description
    assert list(drift_rows[0])[:3] == ["arm", "against", "decision"]
    assert _epoch(first) in drift_table["description"]
    link = api.artifacts("persona-test-report")[0]  # a link, which Prefect stores as Markdown
    assert f"]({html.as_uri()})" in link["data"]
    # One version of each key per tick (the tick's rewrite of its reports publishes none;
    # the first tick had nothing to compare for drift).
    for key, versions in {"results": 2, "summary": 2, "report": 2, "drift": 1}.items():
        assert len(api.artifacts(f"persona-test-{key}")) == versions, key
