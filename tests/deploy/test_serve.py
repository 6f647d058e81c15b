"""``dbpa serve``: one long-running process that serves the scheduled audit of a config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from storage import Store
from tests.deploy._processes import DBPA, REPO, wait_for
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.xdist_group("prefect-server")  # one session server per worker

DEPLOYMENT = "dbpa-scheduled-audit/persona-test"


@pytest.mark.slow
def test_serve_runs_a_triggered_tick_and_stops_on_ctrl_c(prefect_server, tmp_path: Path):
    api = prefect_server.api
    db, out = tmp_path / "served.duckdb", tmp_path / "reports"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config = tmp_path / "flu.yaml"
        config.write_text(yaml.safe_dump(make_config(provider)))
        serve = prefect_server.start(
            "serve",
            DBPA,
            "serve",
            str(config),
            "--cron",
            "0 3 * * *",
            "--db",
            str(db),
            "--out",
            str(out),
            "--set",
            "k=6",
            PREFECT_RUNNER_POLL_FREQUENCY="1",
            **{KEY_ENV: "sk-serve-test"},
        )
        try:
            deployment = wait_for(
                lambda: api.deployment(DEPLOYMENT), 60, f"the served deployment\n{serve.output()}"
            )
            assert deployment["schedules"][0]["schedule"]["cron"] == "0 3 * * *"
            run = prefect_server.final(prefect_server.trigger(DEPLOYMENT), serve)
            assert run["state"]["type"] == "COMPLETED", serve.output()[-4000:]
            assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 6  # --set k=6
        finally:
            stopped = serve.stop(grace=60)  # on a loaded machine its shutdown can take >10 s
    output = " ".join(serve.output().split())
    assert (stopped.code, stopped.interrupts) == (0, 1), output  # one Ctrl-C is enough
    assert not stopped.leftovers
    assert f"serving {DEPLOYMENT} on cron '0 3 * * *' (UTC)" in output
    assert "press Ctrl-C to stop" in output
    assert f"stopped serving {DEPLOYMENT}" in output
    assert api.deployment(DEPLOYMENT)["paused"]  # no tick until it is served again
    with Store(db, read_only=True) as store:
        assert store.runs().status.tolist() == ["completed"]
    assert any(out.glob("*.html"))


@pytest.mark.slow
def test_serve_refuses_to_replace_a_deployment_of_the_work_pool(deployed):
    done = subprocess.run(
        [DBPA, "serve", str(REPO / "examples" / "personas.yaml"), "--cron", "0 3 * * *"],
        env=deployed.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "deployment dbpa-scheduled-audit/personas runs on the work pool 'dbpa'" in message
    assert "choose another --name" in message
    assert deployed.api.deployment("dbpa-scheduled-audit/personas")["work_pool_name"] == "dbpa"
