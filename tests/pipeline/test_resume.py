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
from tests.cli.conftest import invoke
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


def _run_here(config: Path, db: Path) -> None:
    """The same command run to its end in this process, on the same server: the re-run of a
    killed one (a process of its own would only add its imports: it resumes from the
    record) and, on a record of its own, the reference of what a resumed run should hold."""
    result = invoke("run", str(config), "--db", str(db))
    assert result.exit_code == 0, result.output


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
        server.latency = 0.0  # the runs here are not killed: they need not wait

        with Store(db, read_only=True) as store:
            stored = store.samples()
            assert store.run("latest")["status"] == "running"  # nobody could mark it
        assert 0 < len(stored) < 40
        stored_seeds = set(stored.seed)
        before = len(server.counts.requests)

        _run_here(config, db)  # the same command again
        asked = [r["seed"] for r in server.counts.requests[before:] if "messages" in r]
        assert len(asked) == 40 - len(stored)  # exactly the missing outputs
        assert not stored_seeds & set(asked)  # nothing stored was requested again

        with Store(db, read_only=True) as store:
            samples = store.samples()
            runs = store.runs()
        assert len(samples) == 40
        assert not samples.duplicated(["arm_id", "idx"]).any()
        assert sorted(runs.status) == ["completed", "crashed"]

        _run_here(config, tmp_path / "uninterrupted.duckdb")
    pd.testing.assert_frame_equal(_results(db), _results(tmp_path / "uninterrupted.duckdb"))


def _samples(db: Path) -> pd.DataFrame:
    with Store(db, read_only=True) as store:
        return store.samples()


def test_a_sequential_audit_killed_in_its_second_look_resumes_to_the_same_stops(
    tmp_path, write_config
):
    """Looks at 8 and 16 without futility: the controls' tests stay open after the first
    look, so the second look samples; killed there, the re-run asks only for outputs it
    never received and stops every test where an uninterrupted run does."""
    columns = [*COLUMNS, "stopped_at", "stop_reason", "test_id"]
    sequential = {"first": 8, "looks": 2, "futility": False}
    with ScriptedServer(rules=RULES, latency=0.25, embedding_dimension=24) as server:
        settings = make_config(server, k=16, n_permutations=999, sequential=sequential)
        settings["models"][0]["max_concurrency"] = 2
        config = write_config(settings)
        db = tmp_path / "killed.duckdb"

        first = _run(config, db)
        deadline = time.monotonic() + 120
        while server.counts.by_endpoint["/v1/chat/completions"] < 5 * 8 + 6:  # in look 2
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the run never reached its second look"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        server.latency = 0.0  # the runs here are not killed: they need not wait
        stored = _samples(db)
        assert (stored.idx >= 8).any()  # the second look had begun
        before = len(server.counts.requests)

        _run_here(config, db)  # the same command again
        asked = [r["seed"] for r in server.counts.requests[before:] if "messages" in r]
        assert not set(stored.seed) & set(asked)  # nothing stored was requested again

        _run_here(config, tmp_path / "uninterrupted.duckdb")
        wanted = _samples(tmp_path / "uninterrupted.duckdb")
    assert len(asked) == len(wanted) - len(stored)  # exactly the outputs it never received
    resumed = _samples(db)
    key = ["arm_id", "idx"]
    assert sorted(map(tuple, resumed[key].to_numpy())) == sorted(map(tuple, wanted[key].to_numpy()))

    def results(path: Path) -> pd.DataFrame:
        with Store(path, read_only=True) as store:
            df = store.results(store.run("latest")["run_id"])
        return df[columns].reset_index(drop=True)

    pd.testing.assert_frame_equal(results(db), results(tmp_path / "uninterrupted.duckdb"))


def test_a_sequential_set_audit_killed_in_its_second_look_resumes_to_the_same_stops(
    tmp_path, write_config
):
    """A set of 3 prompts, looks at 8 and 16 without futility: the control's pooled test
    stays open after the first look, so the second look samples every prompt's original and
    control arms; killed there, the re-run asks only for outputs it never received and stops
    every pooled test where an uninterrupted run does, with the same drill-down."""
    columns = [*COLUMNS, "stopped_at", "stop_reason", "test_id", "prompts_moved"]
    sequential = {"first": 8, "looks": 2, "futility": False}
    personas = {
        "kind": "personas",
        "values": [
            {"value": "doctor", "label": "control"},
            {"value": "comedian", "label": "target"},
        ],
    }
    prompts = ["My flu has lasted two days.", "I have a cough.", "My child has a fever."]
    with ScriptedServer(rules=RULES, latency=0.25, embedding_dimension=24) as server:
        settings = make_config(
            server,
            k=16,
            n_permutations=999,
            sequential=sequential,
            prompts=prompts,
            perturbations=[personas],
        )
        del settings["prompt"]
        settings["models"][0]["max_concurrency"] = 2
        config = write_config(settings)
        db = tmp_path / "killed.duckdb"

        first = _run(config, db)
        deadline = time.monotonic() + 120
        while server.counts.by_endpoint["/v1/chat/completions"] < 9 * 8 + 6:  # in look 2
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the run never reached its second look"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        server.latency = 0.0  # the runs here are not killed: they need not wait
        stored = _samples(db)
        assert (stored.idx >= 8).any()  # the second look had begun
        before = len(server.counts.requests)

        _run_here(config, db)  # the same command again
        asked = [r["seed"] for r in server.counts.requests[before:] if "messages" in r]
        assert not set(stored.seed) & set(asked)  # nothing stored was requested again

        _run_here(config, tmp_path / "uninterrupted.duckdb")
        wanted = _samples(tmp_path / "uninterrupted.duckdb")
    assert len(asked) == len(wanted) - len(stored)  # exactly the outputs it never received
    resumed = _samples(db)
    key = ["arm_id", "idx"]
    assert sorted(map(tuple, resumed[key].to_numpy())) == sorted(map(tuple, wanted[key].to_numpy()))

    def record(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
        with Store(path, read_only=True) as store:
            run_id = store.run("latest")["run_id"]
            prompt_rows = store.prompt_results(run_id)
            results = store.results(run_id)
        moved = ["perturbation_id", "prompt_id", "p_value", "adjusted_p", "moved"]
        return results[columns].reset_index(drop=True), prompt_rows[moved]

    killed, uninterrupted = record(db), record(tmp_path / "uninterrupted.duckdb")
    assert (killed[0].stopped_at == 16).any()  # the control ran to its second look
    pd.testing.assert_frame_equal(killed[0], uninterrupted[0])
    pd.testing.assert_frame_equal(killed[1], uninterrupted[1])
