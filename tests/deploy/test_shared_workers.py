"""deployments/README.md's pool at scale: a shared PostgreSQL record, the pool's concurrency
limit at 2, two deployments/worker.sh started from two folders (standing in for two machines:
each its own home, temporary folder and way of giving the password), ticks of one audit run on
either worker, at once, and one drift monitor over all of them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from storage import Store
from tests.deploy._processes import REPO, Started, free_port, start, wait_for
from tests.deploy.conftest import POOL, PrefectServer, stop
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.postgres import PostgresServer
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.xdist_group("prefect-server")  # one session server per worker

PERSONAS = "dbpa-scheduled-audit/personas"
EPOCHS = ("2026-11-01T03:00:00+00:00", "2026-11-02T03:00:00+00:00", "2026-11-03T03:00:00+00:00")


@pytest.fixture
def shared_pool(deployed: PrefectServer) -> Iterator[PrefectServer]:
    """The pool at the README's shared-record setting (2 runs at once), back to 1 after."""
    deployed.cli("work-pool", "set-concurrency-limit", POOL, "2")
    try:
        yield deployed
    finally:
        deployed.cli("work-pool", "set-concurrency-limit", POOL, "1")


def _start_worker(
    server: PrefectServer, folder: Path, url: str, postgres: PostgresServer, by_file: bool
) -> Started:
    """deployments/worker.sh run from ``folder`` (its HOME and TMPDIR too), one run at a time,
    the record in DBPA_DB; the password in ``folder``/.pgpass (``by_file``) or PGPASSWORD."""
    folder.mkdir()
    (folder / "tmp").mkdir()
    password: dict[str, str] = {"PGPASSWORD": postgres.password}
    if by_file:
        pgpass = folder / ".pgpass"
        pgpass.write_text(
            f"{postgres.host}:{postgres.port}:*:{postgres.user}:{postgres.password}\n"
        )
        pgpass.chmod(0o600)
        password = {}
    env = {k: v for k, v in server.env.items() if k != "PGPASSWORD"}
    env |= {
        "HOME": str(folder),
        "TMPDIR": str(folder / "tmp"),
        "DBPA_DB": url,
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        KEY_ENV: "sk-deploy-test",
        **password,
    }
    script = str(REPO / "deployments" / "worker.sh")
    command = [script, "--port", str(free_port()), "--limit", "1"]
    return start(command, env, server.logs / f"shared-{folder.name}.log", cwd=folder)


def _ran(worker: Started, flow_run_id: str) -> bool:
    """The flow run ran on ``worker``: its own log line with its URL, which only the process
    running it prints (both workers may try to submit one run; the loser's submission is
    aborted, "cannot transition to a PENDING state")."""
    return re.search(rf"/flow-run/{flow_run_id}\b", worker.output()) is not None


@pytest.mark.slow
def test_ticks_on_two_workers_at_once_continue_one_monitor_on_a_shared_record(
    shared_pool: PrefectServer, postgres: PostgresServer, tmp_path: Path, monkeypatch
):
    server, api = shared_pool, shared_pool.api
    url = f"postgresql://{postgres.user}@{postgres.host}:{postgres.port}/"
    url += postgres.create_database()
    assert api.deployment(PERSONAS)["parameters"] == {
        "config_path": "examples/personas.yaml",
        "out": "reports",
    }  # no record among the parameters: each worker's DBPA_DB
    workers = [
        _start_worker(server, tmp_path / "machine-a", url, postgres, by_file=False),
        _start_worker(server, tmp_path / "machine-b", url, postgres, by_file=True),
    ]
    try:
        for worker in workers:  # both polling before the ticks: each can take one at once
            wait_for(lambda w=worker: "started!" in w.output() or None, 120, "a worker to start")
        with ScriptedServer(rules=RULES, embedding_dimension=24, latency=0.2) as provider:
            config = tmp_path / "flu.yaml"
            config.write_text(yaml.safe_dump(make_config(provider)))
            params = {"config_path": str(config), "out": str(tmp_path / "reports")}
            ticks = [  # the first two at once: one on each worker
                api.run_deployment(PERSONAS, **params, overrides={"k": 6, "epoch": epoch})
                for epoch in EPOCHS[:2]
            ]
            runs = [server.final(t, workers[0], timeout=300) for t in ticks]
            ticks.append(
                api.run_deployment(PERSONAS, **params, overrides={"k": 6, "epoch": EPOCHS[2]})
            )
            runs.append(server.final(ticks[2], workers[1], timeout=300))
    finally:
        for worker in workers:
            stop(worker, "deployments/worker.sh")
    logs = "\n".join(w.output()[-3000:] for w in workers)
    assert [r["state"]["type"] for r in runs] == ["COMPLETED"] * 3, logs
    # Each of the two ticks at once ran on a worker of its own, at the same time.
    assert {_ran(w, ticks[0]) for w in workers} == {True, False}, logs
    assert [_ran(w, ticks[1]) for w in workers] == [not _ran(w, ticks[0]) for w in workers], logs
    first, second = runs[0], runs[1]
    assert first["start_time"] < second["end_time"], logs
    assert second["start_time"] < first["end_time"], logs

    # One record holds every tick; the monitor of the last replayed all three, once each.
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    with Store(url, read_only=True) as store:
        epochs = sorted(store.runs().epoch)
        monitored = store.monitor_ticks("persona-test")
    assert epochs == list(EPOCHS)
    assert len(monitored) == 5 * 2  # every arm at the second and the third tick
    assert set(monitored.baseline_epoch) == {EPOCHS[0]}
    assert sorted(set(monitored.epoch)) == list(EPOCHS[1:])
