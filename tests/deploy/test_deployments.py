"""deployments/prefect.yaml on a real Prefect server: deployed as written, triggered with
parameters, run by a process worker, its results read back through the API."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from storage import Store
from tests.deploy._processes import REPO, Api, Started, free_port
from tests.deploy.conftest import PrefectServer, stop
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.scripted_server import BatchScript, Fault, ScriptedServer

pytestmark = pytest.mark.xdist_group("prefect-server")  # one session server per worker

SPEC = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
PERSONAS = "dbpa-scheduled-audit/personas"
TICK_BATCH_WAIT_S = 1.0
"""The worker's wait for provider batches before a tick hands over (120 s by default)."""


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


@dataclass(frozen=True)
class ViewerWorker:
    """deployments/worker.sh: a worker of the pool with ``dbpa view`` of ``db`` beside it."""

    process: Started
    db: Path
    """The record the viewer serves."""
    port: int
    """The viewer's port on 127.0.0.1."""


@pytest.fixture(scope="module")
def viewer_worker(
    deployed: PrefectServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ViewerWorker]:
    """One worker.sh for the module's ticks (a worker costs seconds of CPU to start), stopped
    with Ctrl-C at the end; it must leave no process behind."""
    db, port = tmp_path_factory.mktemp("viewer") / "audit.duckdb", free_port()
    process = deployed.start(
        "worker-with-viewer",
        str(REPO / "deployments" / "worker.sh"),
        "--db",
        str(db),
        "--port",
        str(port),
        PREFECT_WORKER_QUERY_SECONDS="1",
        PREFECT_WORKER_PREFETCH_SECONDS="1",
        DBPA_TICK_BATCH_WAIT_S=str(TICK_BATCH_WAIT_S),
        **{KEY_ENV: "sk-deploy-test"},
    )
    try:
        yield ViewerWorker(process, db, port)
    finally:
        stop(process, "deployments/worker.sh")


def _epoch(run: dict[str, Any]) -> str:
    return datetime.fromisoformat(run["expected_start_time"]).isoformat(timespec="seconds")


def _keys(api: Api, flow_run_id: str) -> dict[str, dict[str, Any]]:
    """The artifacts of one flow run by key (the newest of each)."""
    return {a["key"]: a for a in api.artifacts_of(flow_run_id)}


@pytest.mark.slow
def test_triggered_ticks_run_on_a_worker_and_publish_their_outcome_on_the_tick(
    deployed, viewer_worker: ViewerWorker, tmp_path: Path
):
    """What a user watching the UI sees, read back through the REST API: every artifact and
    named task run on the tick's own run, the report link served by the viewer that
    deployments/worker.sh starts, one progress key per audit with its counts, and one
    version of each key per outcome."""
    api: Api = deployed.api
    assert api.deployment(PERSONAS)["parameters"] == {
        "config_path": "examples/personas.yaml",
        "out": "reports",
    }
    db, port, worker = viewer_worker.db, viewer_worker.port, viewer_worker.process
    out, config = tmp_path / "reports", tmp_path / "flu.yaml"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config.write_text(yaml.safe_dump(make_config(provider)))
        params = (f"config_path={config}", f"db={db}", f"out={out}")
        # The documented command once (with a JSON override); the API for the other ticks.
        first = deployed.final(deployed.trigger(PERSONAS, *params, 'overrides={"k": 6}'), worker)
        assert first["state"]["type"] == "COMPLETED", worker.output()[-4000:]
        assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 6
        same = {"config_path": str(config), "db": str(db), "out": str(out)}
        second = deployed.final(api.run_deployment(PERSONAS, **same), worker)
        assert second["state"]["type"] == "COMPLETED", worker.output()[-4000:]
        calls = provider.counts.by_endpoint["/v1/chat/completions"]
        assert calls == 5 * 6 + 5 * 8
        epoch = {"epoch": _epoch(second)}
        again = deployed.final(api.run_deployment(PERSONAS, **same, overrides=epoch), worker)
        assert again["state"]["type"] == "COMPLETED", worker.output()[-4000:]
        assert provider.counts.by_endpoint["/v1/chat/completions"] == calls
        link = _keys(api, second["id"])["persona-test-report"]["data"]
        url = re.search(r"\]\((http://127\.0\.0\.1:\d+/runs/[^)]+)\)", link).group(1)
        assert url.startswith(f"http://127.0.0.1:{port}/runs/persona-test-")
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200
        assert "persona-comedian" in page.text

    # Named after what they do, tagged per deployment and audit.
    assert first["name"] == f"flu @ {_epoch(first)}"
    assert "audit:personas" in first["tags"]
    assert api.flow_runs(parent_flow_run_id={"any_": [second["id"]]}) == []  # no subflow
    names = [t["name"] for t in api.task_runs(first["id"])]  # the second embeds no new text
    for prefix in ("sample ", "embed ", "test ", "correct ", "report "):
        assert any(n.startswith(prefix) for n in names), (prefix, names)

    # Each manual run is a tick of its own: its epoch is its scheduled start time.
    with Store(db, read_only=True) as store:
        runs = store.runs().sort_values("started_at")
        monitored = store.monitor_ticks("persona-test")
    assert list(runs.epoch)[:2] == [_epoch(first), _epoch(second)]
    # The drift monitor of every arm against the first tick, once (the re-run rewrote it).
    assert len(monitored) == 5
    assert set(monitored.baseline_epoch) == {_epoch(first)}
    assert set(monitored.epoch) == {_epoch(second)}

    # The outcome is on the tick's own run.
    keys = _keys(api, second["id"])
    assert set(keys) == {
        f"persona-test-{k}"
        for k in ("progress", "results", "summary", "report", "monitor", "evidence")
    }
    progress = keys["persona-test-progress"]
    assert progress["type"] == "progress"
    assert float(progress["data"]) == 100.0
    assert progress["description"].startswith("40 of 40 outputs (100.0%) sampled for run ")
    rows = json.loads(keys["persona-test-results"]["data"])
    assert {r["perturbation"] for r in rows} >= {"persona-doctor", "persona-comedian"}
    summary = keys["persona-test-summary"]["data"]
    assert f"Epoch (tick): `{_epoch(second)}`" in summary
    assert "- Drift monitor at this tick: 0 of 5 arms alarmed; highest evidence e = " in summary
    assert url in summary
    html = Path(re.search(r"- html: `([^`]+)`", summary).group(1))
    assert html.parent == out
    assert "Drift monitor" in html.read_text()
    monitor_rows = json.loads(keys["persona-test-monitor"]["data"])
    assert len(monitor_rows) == 5
    assert {r["baseline"] for r in monitor_rows} == {_epoch(first)}
    assert {r["decision"] for r in monitor_rows} == {"no alarm"}
    # One version of each key per tick: the re-run of the second tick added none (its
    # progress neither: it sampled nothing); the first had no tick to monitor.
    assert api.artifacts_of(again["id"]) == []
    ours = {first["id"], second["id"], again["id"]}  # other tests' runs share the server
    versions = {
        "results": 2,
        "summary": 2,
        "report": 2,
        "monitor": 1,
        "evidence": 1,
        "progress": 2,
    }
    for key, count in versions.items():
        mine = [a for a in api.artifacts(f"persona-test-{key}") if a["flow_run_id"] in ours]
        assert len(mine) == count, key


@pytest.mark.slow
def test_a_tick_with_a_rejected_key_fails_once_with_its_sampling_task_runs_failed(
    deployed, viewer_worker: ViewerWorker, tmp_path: Path
):
    """A permanent error is never retried: one Failed flow run (no retry a minute later),
    the sampling task runs that met it Failed, a handful of requests, one message."""
    api: Api = deployed.api
    config = tmp_path / "rejected.yaml"
    with ScriptedServer(rules=RULES, script=[Fault("401")] * 1000) as provider:
        config.write_text(yaml.safe_dump(make_config(provider)))
        db = tmp_path / "r.duckdb"
        out = tmp_path / "reports"  # not the deployment's reports/ in the checkout
        run_id = api.run_deployment(PERSONAS, config_path=str(config), db=str(db), out=str(out))
        run = deployed.final(run_id, viewer_worker.process)
        requests = provider.counts.total
    assert run["state"]["type"] == "FAILED", viewer_worker.process.output()[-4000:]
    assert run["run_count"] == 1  # not retried
    assert (
        "could not be sampled: model 'openai/scripted': AuthenticationError"
        in (run["state"]["message"])
    )
    assert 1 <= requests <= 8, requests
    assert sorted(p.suffix for p in out.iterdir()) == [".html", ".json", ".md"]  # incomplete
    states = {t["name"]: t["state"]["type"] for t in api.task_runs(run["id"])}
    sampling = {name: state for name, state in states.items() if name.startswith("sample ")}
    assert sampling
    assert set(sampling.values()) == {"FAILED"}, states


@pytest.mark.slow
def test_a_tick_waiting_for_its_batches_hands_over_to_a_run_of_its_deployment(
    deployed, viewer_worker: ViewerWorker, tmp_path: Path
):
    """No worker waits for a provider batch: the tick ends AwaitingBatches with the batches'
    artifact after scheduling a run of its deployment for the same epoch at the next poll;
    the worker takes that run when it is due, and it collects the same batch."""
    api: Api = deployed.api
    config, db, out = tmp_path / "batched.yaml", tmp_path / "b.duckdb", tmp_path / "reports"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        # Still running when the tick hands over; done by the next poll (5 s on).
        provider.push_batch_script(BatchScript(delay_s=3.0))
        written = make_config(provider, name="batched-test")
        written["models"][0]["batch"] = True
        config.write_text(yaml.safe_dump(written))
        same = {"config_path": str(config), "db": str(db), "out": str(out)}
        first = deployed.final(api.run_deployment(PERSONAS, **same), viewer_worker.process)
        assert first["state"]["type"] == "COMPLETED", viewer_worker.process.output()[-4000:]
        assert first["state"]["name"] == "AwaitingBatches"
        assert "waiting for 1 provider batch(es) of 40 request(s)" in first["state"]["message"]
        assert "this tick runs again at" in first["state"]["message"]
        batches = _keys(api, first["id"])["batched-test-batches"]["data"]
        assert "waiting for 1 provider batch(es)" in batches
        assert "| openai/scripted | 40 |" in batches
        epoch = _epoch(first)
        # The run it scheduled: same deployment, same parameters, the tick's epoch.
        followers = [
            r
            for r in api.flow_runs(deployment_id={"any_": [first["deployment_id"]]})
            if r["id"] != first["id"] and r["parameters"].get("config_path") == str(config)
        ]
        assert len(followers) == 1, followers
        follower = followers[0]
        assert {key: follower["parameters"][key] for key in same} == same
        assert follower["parameters"]["overrides"] == {"epoch": epoch}
        scheduled = datetime.fromisoformat(follower["expected_start_time"])
        assert scheduled > datetime.fromisoformat(first["end_time"]) - timedelta(seconds=1)
        again = deployed.final(follower["id"], viewer_worker.process)
        assert again["state"]["type"] == "COMPLETED", viewer_worker.process.output()[-4000:]
        assert again["state"]["name"] == "Completed"
        assert provider.counts.by_endpoint["/v1/batches"] == 1  # collected, not sent again
        assert provider.counts.by_endpoint["/v1/chat/completions"] == 0
    with Store(db, read_only=True) as store:
        runs = store.runs()
        stored = store.samples()
    runs = runs.sort_values("started_at")
    assert set(runs.epoch) == {epoch}  # one tick, run twice: the hand-over, then the end
    assert list(runs.status) == ["continued", "completed"]
    assert runs.message.iloc[0].startswith(f"continued by run {runs.run_id.iloc[1]}; ")
    assert len(stored) == 40
