"""A run whose processes are killed does not stay Running: the automation shipped in
deployments/automations marks it Crashed once its heartbeats stop."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from tests.deploy._processes import REPO, wait_for
from tests.deploy.conftest import start_worker
from tests.pipeline.conftest import RULES, make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.xdist_group("prefect-server")  # one session server per worker

AUTOMATION = REPO / "deployments" / "automations" / "crash-silent-runs.yaml"
HEARTBEAT = 30
"""Seconds between heartbeats in the dbpa pool (the smallest Prefect allows)."""
WITHIN = HEARTBEAT + 10
"""Silence after which the test's copy of the automation fires (the shipped one: 90 s)."""
ATTEMPTS = "prefect-workspace-attempt-*"
"""Prefect's per-run directory of a process worker, removed only when the worker ends well."""


@pytest.fixture
def shipped(deployed) -> Iterator[dict[str, Any]]:
    """The shipped automation, installed with the documented command, and a quicker copy
    (so that the test waits WITHIN seconds instead of 90) created and removed through the
    API (no CLI process for them)."""
    automation = yaml.safe_load(AUTOMATION.read_text())
    deployed.cli("automation", "create", "--from-file", str(AUTOMATION))
    quick = {**automation, "name": f"{automation['name']}-quick"}
    quick["trigger"] = {**automation["trigger"], "within": WITHIN}
    quick_id = deployed.api.create_automation(quick)
    yield automation
    deployed.api.delete_automation(quick_id)


@pytest.mark.slow
def test_a_killed_run_is_marked_crashed_when_its_heartbeats_stop(deployed, shipped, tmp_path):
    assert shipped["trigger"]["within"] > 2 * HEARTBEAT
    installed = deployed.api.automations()[shipped["name"]]
    assert installed["trigger"]["posture"] == "Proactive"
    assert installed["actions"][0]["state"] == "CRASHED"

    system_tmp = set(Path(tempfile.gettempdir()).glob(ATTEMPTS))
    with ScriptedServer(rules=RULES, latency=120, embedding_dimension=24) as provider:
        config = tmp_path / "slow.yaml"
        config.write_text(yaml.safe_dump(make_config(provider)))
        worker = start_worker(deployed, "crash-worker")
        try:
            run_id = deployed.api.run_deployment(
                "dbpa-scheduled-audit/personas",
                config_path=str(config),
                db=str(tmp_path / "x.db"),
                out=str(tmp_path / "reports"),  # not the deployment's reports/ in the checkout
            )
            beat = f"prefect.flow-run.{run_id}"
            wait_for(
                lambda: deployed.api.events("prefect.flow-run.heartbeat", beat) or None,
                120,
                f"a heartbeat of {run_id}\n{worker.output()[-3000:]}",
                every=1.0,
            )
            wait_for(lambda: provider.counts.requests or None, 60, "the first model request")
            assert deployed.api.flow_run(run_id)["state"]["type"] == "RUNNING"
            assert subflows_of(deployed, run_id) == []  # the audit runs inline in the tick
            processes = [psutil.Process(worker.process.pid)]
            processes += processes[0].children(recursive=True)
            for p in processes:  # the worker and the flow run's process: nobody left to report
                p.kill()
            killed = time.monotonic()
        finally:
            stopped = worker.stop()
    assert not stopped.leftovers
    # The killed worker's run files stay in the server's TMPDIR, not in the system's /tmp.
    assert set(Path(tempfile.gettempdir()).glob(ATTEMPTS)) <= system_tmp
    assert list(Path(deployed.env["TMPDIR"]).glob(ATTEMPTS))
    time.sleep(max(0.0, killed + HEARTBEAT / 2 - time.monotonic()))
    assert deployed.api.flow_run(run_id)["state"]["type"] == "RUNNING"  # nobody reports the kill
    run = deployed.final(run_id, worker, timeout=WITHIN + 90)
    assert run["state"]["type"] == "CRASHED"
    assert run["state"]["message"] == shipped["actions"][0]["message"]
    elapsed = time.monotonic() - killed
    assert elapsed < WITHIN + 30, elapsed  # the last heartbeat + WITHIN + evaluation (5 s)


def subflows_of(deployed, run_id: str) -> list[dict[str, Any]]:
    return deployed.api.flow_runs(parent_flow_run_id={"any_": [run_id]})
