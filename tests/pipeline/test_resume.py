"""Kill -9 in the middle of a run, run the same command again: it resumes, exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from storage import Store
from tests.pipeline.conftest import RULES, make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

DBPA = str(Path(sys.executable).with_name("dbpa"))
COLUMNS = ["perturbation_id", "statistic", "p_value", "adjusted_p", "reject", "null_mean"]


def _env() -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    # The CLI uses a configured API (here the test harness's server) instead of starting one.
    return {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}


def _run(config: Path, db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [DBPA, "run", str(config), "--db", str(db)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _results(db: Path) -> pd.DataFrame:
    with Store(db, read_only=True) as store:
        return store.results(store.run("latest")["run_id"])[COLUMNS].reset_index(drop=True)


def test_kill_minus_9_then_rerun_requests_only_what_is_missing(tmp_path, write_config):
    with ScriptedServer(rules=RULES, latency=0.25, embedding_dimension=24) as server:
        settings = make_config(server)
        settings["models"][0]["max_concurrency"] = 2
        config = write_config(settings)
        db = tmp_path / "killed.duckdb"

        first = _run(config, db)
        deadline = time.monotonic() + 120
        # Past the head start (at most 4 outputs of each of the 5 arms, before the flow
        # starts), so the kill lands in the flow's sampling.
        while server.counts.by_endpoint["/v1/chat/completions"] < 24:
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the run never got going"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # the CLI and anything it started
        first.wait(timeout=30)

        with Store(db, read_only=True) as store:
            stored = store.samples()
            assert store.run("latest")["status"] == "running"  # nobody could mark it
        assert 0 < len(stored) < 40
        stored_seeds = set(stored.seed)
        before = len(server.counts.requests)

        second = _run(config, db)
        output = second.communicate(timeout=300)[0]
        assert second.returncode == 0, output
        asked = [r["seed"] for r in server.counts.requests[before:] if "messages" in r]
        assert len(asked) == 40 - len(stored)  # exactly the missing outputs
        assert not stored_seeds & set(asked)  # nothing stored was requested again

        with Store(db, read_only=True) as store:
            samples = store.samples()
            runs = store.runs()
        assert len(samples) == 40
        assert not samples.duplicated(["arm_id", "idx"]).any()
        assert sorted(runs.status) == ["completed", "crashed"]

        reference = _run(config, tmp_path / "uninterrupted.duckdb")
        assert reference.wait(timeout=300) == 0
    pd.testing.assert_frame_equal(_results(db), _results(tmp_path / "uninterrupted.duckdb"))
