"""``--runner dask=ADDRESS``: embedding and testing run on the workers of a Dask cluster,
sampling stays in the flow's process (the only DuckDB writer), results equal a threads run."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from distributed import Client, LocalCluster, get_task_stream
from typer.testing import CliRunner

from dbpa.cli import app
from dbpa.config import parse_config
from flows.audit import TESTS_PER_TASK_RUN, audit
from storage import Store
from tests.deploy._processes import DBPA, REPO
from tests.docs.test_tutorials import _commands, _write_files
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.xdist_group("prefect-server")  # one session server per worker

COLUMNS = ["perturbation_id", "statistic", "p_value", "adjusted_p", "reject", "null_mean"]
COLUMNS += ["stopped_at", "stop_reason"]


def _results(db: Path) -> pd.DataFrame:
    with Store(db, read_only=True) as store:
        return store.results(store.run("latest")["run_id"])[COLUMNS].reset_index(drop=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[LocalCluster, Client]]:
    """A cluster of one worker process on 127.0.0.1 for the module (a process apart from the
    flow's is what the test needs; each imports dbpa and Prefect, about 7 s of CPU); it
    embeds through the scripted provider, so the key is in its environment from its start."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, "sk-dask-test")
        with (
            LocalCluster(
                host="127.0.0.1",
                n_workers=1,
                threads_per_worker=1,
                dashboard_address=None,
                processes=True,
            ) as local,
            Client(local) as client,
        ):
            yield local, client


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    "sequential", [None, {"first": 4, "looks": 2}], ids=["fixed", "sequential"]
)
def test_the_compute_runs_on_the_cluster_and_gives_the_same_results(
    tmp_path, monkeypatch, sequential, cluster
):
    from prefect.settings import PREFECT_API_URL

    monkeypatch.setenv(KEY_ENV, "sk-dask-test")  # the audit in this process samples too
    local, client = cluster
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config = make_config(provider, **({"sequential": sequential} if sequential else {}))
        path = tmp_path / "flu.yaml"
        path.write_text(yaml.safe_dump(config))
        runner = f"dask={local.scheduler_address}"
        with get_task_stream(client) as stream:
            done = subprocess.run(
                [DBPA, "run", str(path), "--db", str(tmp_path / "dask.duckdb"), "--runner", runner],
                env={**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())},
                capture_output=True,
                text=True,
                timeout=300,
            )
        assert done.returncode == 0, done.stdout + done.stderr
        workers = set(client.scheduler_info()["workers"])
        audit(config=parse_config(config), db=str(tmp_path / "threads.duckdb"))
    ran = [(t["key"].rsplit("-", 1)[0], t["worker"]) for t in stream.data]
    assert {name for name, _ in ran} == {"embed_texts", "run_tests"}  # no sampling, no writes
    tests = len(_results(tmp_path / "dask.duckdb"))
    if not sequential:  # a sequential audit tests once per look
        assert sum(name == "run_tests" for name, _ in ran) == -(-tests // TESTS_PER_TASK_RUN)
    assert {worker for _, worker in ran} <= workers
    pd.testing.assert_frame_equal(
        _results(tmp_path / "dask.duckdb"), _results(tmp_path / "threads.duckdb")
    )


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_dask_guide_runs_as_written(tmp_path, monkeypatch, cluster):
    """docs/how-to/dask.md's commands, in order, on the first tutorial's audit (the scripted
    provider for its model and embedder), both on this module's cluster: its address stands
    for the one the guide shows, and the first command's local cluster is this process's
    client's (prefect-dask takes the process's Dask client when there is one; the reader's
    ``dbpa`` process has none and starts the two workers)."""
    local, client = cluster
    monkeypatch.setenv(KEY_ENV, "sk-dask-test")
    monkeypatch.chdir(tmp_path)
    commands = _commands(REPO / "docs" / "how-to" / "dask.md")
    assert [args[:3] for args, _ in commands] == [["run", "first.yaml", "--runner"]] * 2
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        _write_files(REPO / "docs" / "tutorials" / "first-audit.md", provider, tmp_path)
        streams = []
        for args, _ in commands:
            args = [f"dask={local.scheduler_address}" if a.startswith("dask=") else a for a in args]
            with get_task_stream(client) as stream:
                result = CliRunner().invoke(app, args, catch_exceptions=False)
            assert result.exit_code == 0, (args, result.output)
            streams.append(stream.data)
    assert provider.counts.by_endpoint["/v1/chat/completions"] > 0
    assert {t["key"].rsplit("-", 1)[0] for t in streams[0]} == {"embed_texts", "run_tests"}
    assert streams[1] == []  # as the guide says: every vector and result found stored
    assert len(_results(tmp_path / "dbpa.duckdb")) == 2
