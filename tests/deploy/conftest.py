"""A real Prefect server for the session, the deployments of deployments/prefect.yaml on it,
and process workers that run them; everything started here is stopped here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.deploy._processes import PREFECT, REPO, Api, Started, free_port, start, wait_for
from tests.pipeline.conftest import KEY_ENV

POOL = "dbpa"
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@dataclass(frozen=True)
class PrefectServer:
    """A ``prefect server start`` on 127.0.0.1 with a temporary PREFECT_HOME."""

    url: str
    """The API URL."""
    env: dict[str, str]
    """Environment of processes that use it."""
    api: Api
    logs: Path

    def cli(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``prefect ARGS`` against this server; fails the test if it fails."""
        done = subprocess.run(
            [PREFECT, *args], env=self.env, cwd=cwd, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    def start(self, name: str, *args: str, **env: str) -> Started:
        """Start a long-running process against this server (output in logs/NAME.log)."""
        return start(args, {**self.env, **env}, self.logs / f"{name}.log", cwd=REPO)

    def trigger(self, deployment: str, *params: str) -> str:
        """``prefect deployment run DEPLOYMENT -p KEY=VALUE ...``; returns the flow run id."""
        done = self.cli("deployment", "run", deployment, *(x for p in params for x in ("-p", p)))
        found = re.search(r"UUID: ([0-9a-f-]{36})", done.stdout)
        assert found, done.stdout
        return found.group(1)

    def final(self, flow_run_id: str, runner: Started, timeout: float = 240) -> dict[str, Any]:
        """The flow run once it is in a final state (``runner``'s output if it never is).

        Asked once a second: a run takes 10 s or more, and each request costs the server
        about 7 ms of CPU.
        """

        def probe() -> dict[str, Any] | None:
            run = self.api.flow_run(flow_run_id)
            return run if run["state"]["type"] in FINAL else None

        what = f"flow run {flow_run_id}:\n{runner.output()[-4000:]}"
        return wait_for(probe, timeout, what, every=1.0)


def stop(started: Started, what: str) -> None:
    """Stop ``started``; fails the test if it left processes behind."""
    stopped = started.stop()
    assert not stopped.leftovers, f"{what} left processes behind: {stopped.leftovers}"


@pytest.fixture(scope="session")
def prefect_server(
    tmp_path_factory: pytest.TempPathFactory, migrated_database: Path
) -> Iterator[PrefectServer]:
    home = tmp_path_factory.mktemp("prefect-home")
    shutil.copyfile(migrated_database, home / "prefect.db")  # no migrations at its start
    logs = tmp_path_factory.mktemp("prefect-logs")
    # The server's, workers' and flow runs' temporary files: a killed worker leaves its run's
    # prefect-workspace-attempt-* directory behind, here rather than in the system's /tmp.
    temporary = tmp_path_factory.mktemp("prefect-tmp")
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env = {
        **inherited,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "TMPDIR": str(temporary),
    }
    # Services the tests never need: scheduled runs (every run is triggered), marking runs
    # late, workers offline, pauses expired, children of cancelled runs cancelled. The loops
    # cost the idle server about 1% of a core (task runs, events, automations stay on).
    idle = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "CANCELLATION_CLEANUP")
    server_env = {**env, **{f"PREFECT_SERVER_SERVICES_{s}_ENABLED": "false" for s in idle}}
    server = start(
        [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        server_env,
        logs / "server.log",
    )
    api = Api(url)
    try:
        wait_for(api.healthy, 120, f"the Prefect server on port {port}\n{server.output()}")
        yield PrefectServer(url, env, api, logs)
    finally:
        api.close()
        stop(server, "the Prefect server")


@pytest.fixture(scope="session")
def deployed(prefect_server: PrefectServer) -> PrefectServer:
    """The process pool (one run at a time) and every deployment of deployments/prefect.yaml."""
    prefect_server.cli("work-pool", "create", POOL, "--type", "process")
    prefect_server.cli("work-pool", "set-concurrency-limit", POOL, "1")
    prefect_server.cli("--no-prompt", "deploy", "--all", cwd=REPO / "deployments")
    return prefect_server


def start_worker(server: PrefectServer, name: str = "worker") -> Started:
    """A process worker of the pool polling every second, with the scripted provider's key."""
    return server.start(
        name,
        PREFECT,
        "worker",
        "start",
        "--pool",
        POOL,
        PREFECT_WORKER_QUERY_SECONDS="1",
        PREFECT_WORKER_PREFETCH_SECONDS="1",
        **{KEY_ENV: "sk-deploy-test"},
    )
