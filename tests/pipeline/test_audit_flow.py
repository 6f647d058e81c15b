"""The audit flow against the scripted provider: resumable, incremental, fault tolerant."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)

import flows._progress
import flows.audit
from dbpa.config import parse_config
from dbpa.llm import SamplingStopped, _runner, stop_requests
from flows.audit import AuditIncomplete, audit, run_audit
from storage import Store
from tests.pipeline.conftest import make_config
from tests.support.scripted_server import Fault, ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

RESULT_COLUMNS = ["perturbation_id", "statistic", "p_value", "adjusted_p", "reject", "null_mean"]


def _results(db, run_id) -> pd.DataFrame:
    with Store(db, read_only=True) as store:
        return store.results(run_id)[RESULT_COLUMNS].reset_index(drop=True)


def _table_sizes(db) -> dict[str, int]:
    with Store(db, read_only=True) as store:
        return {
            t: len(store.export(t, db.parent / f"{t}.csv", "csv").read_text().splitlines())
            for t in ("samples", "embeddings", "tests")
        }


def test_a_run_samples_every_arm_and_decides(one_answer_provider: ScriptedServer, tmp_path):
    """On the one-answer provider, so the decisions are certain (under RULES a target at k=8
    and B=199 missed Holm's level on some ports: a CI flake)."""
    provider = one_answer_provider
    config = parse_config(make_config(provider, n_permutations=999))
    outcome = audit(config=config, db=str(tmp_path / "a.duckdb"))
    assert outcome.status == "completed"
    # 5 arms (original + 4 personas) x k=8, one choice per request; one embedding request
    # per batch of distinct texts.
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 8
    df = _results(tmp_path / "a.duckdb", outcome.run_id).set_index("perturbation_id")
    assert df.loc["persona-comedian", "reject"]
    assert df.loc["persona-child", "reject"]
    assert not df.loc["persona-doctor", "reject"]
    assert set(outcome.reports) == {"html", "md", "json"}
    for path in outcome.reports.values():  # no directory named: reports/ next to the database
        assert Path(path).parent == (tmp_path / "reports").resolve()


def test_a_rerun_of_a_finished_audit_makes_no_model_call(provider, tmp_path):
    config = parse_config(make_config(provider))
    db = str(tmp_path / "a.duckdb")
    first = audit(config=config, db=db)
    calls = provider.counts.total
    second = audit(config=config, db=db)
    assert provider.counts.total == calls
    pd.testing.assert_frame_equal(
        _results(tmp_path / "a.duckdb", first.run_id),
        _results(tmp_path / "a.duckdb", second.run_id),
    )


def test_a_stop_made_before_a_run_holds_through_it_and_ends_with_it(
    provider, tmp_path, monkeypatch
):
    """A signal's stop made before the flow starts (``dbpa run``'s handler during its head
    start, the exception dropped on its way) holds: the flow sends no request, fails, and
    records no arm as failed; once that run has ended, the process's next run samples."""
    monkeypatch.setattr(_runner, "_stopped", [])  # the process's flag, for this test only
    stop_requests()
    config = parse_config(make_config(provider))
    db = tmp_path / "a.duckdb"
    with pytest.raises(SamplingStopped):
        audit(config=config, db=str(db))
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 0
    with Store(db, read_only=True) as store:
        run = store.run("latest")
        assert run["status"] == "failed"
        assert store.arm_failures(run["run_id"]).empty
    assert audit(config=config, db=str(db)).status == "completed"
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 8


def _progress(db: Path, run_id: str, key: str = "persona-test-progress") -> list:
    with Store(db, read_only=True) as store:
        flow_run_id = store.run(run_id)["flow_run_id"]
    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[key]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
            )
        )


def test_the_sampling_progress_artifact_ends_at_100_percent(provider, tmp_path, monkeypatch):
    """One key per audit; the card's description holds the counts."""
    monkeypatch.setattr(flows._progress, "UPDATE_INTERVAL_S", 3600.0)  # the final update only
    outcome = audit(config=parse_config(make_config(provider)), db=str(tmp_path / "a.duckdb"))
    (artifact,) = _progress(tmp_path / "a.duckdb", outcome.run_id)
    assert artifact.type == "progress"
    assert float(artifact.data) == 100.0
    assert artifact.description.startswith("40 of 40 outputs (100.0%) sampled for run ")


def test_a_failed_progress_write_is_tried_again_and_the_final_figure_written(
    provider, tmp_path, monkeypatch
):
    monkeypatch.setattr(flows._progress, "UPDATE_INTERVAL_S", 0.05)
    real, calls = flows._progress.update_progress_artifact, []

    def flaky(artifact_id, progress, description=None):
        calls.append(progress)
        if len(calls) <= 3:  # the first writes fail, as under memory pressure
            raise RuntimeError("HTTP 503")
        return real(artifact_id, progress, description)

    monkeypatch.setattr(flows._progress, "update_progress_artifact", flaky)
    outcome = audit(config=parse_config(make_config(provider)), db=str(tmp_path / "a.duckdb"))
    (artifact,) = _progress(tmp_path / "a.duckdb", outcome.run_id)
    assert float(artifact.data) == 100.0
    assert len(calls) > 3


def test_added_perturbations_sample_and_test_only_the_new_ones(provider, tmp_path):
    db = str(tmp_path / "a.duckdb")
    base = make_config(provider)
    audit(config=parse_config(base), db=db)
    before = dict(provider.counts.by_endpoint)
    more = make_config(provider)
    more["perturbations"] = [
        *base["perturbations"],
        {"kind": "prompt", "variants": [{"text": "Flu for two days: doctor or not?"}]},
    ]
    outcome = audit(config=parse_config(more), db=db)
    new_chat = provider.counts.by_endpoint["/v1/chat/completions"] - before["/v1/chat/completions"]
    assert new_chat == 8  # one new arm of k=8
    assert len(_results(tmp_path / "a.duckdb", outcome.run_id)) == 5


def test_changing_only_the_analysis_reuses_samples_and_embeddings(provider, tmp_path):
    db = tmp_path / "a.duckdb"
    audit(config=parse_config(make_config(provider)), db=str(db))
    calls = provider.counts.total
    sizes = _table_sizes(db)
    changed = make_config(
        provider, omega="energy_l2", n_permutations=499, alpha=0.01, correction="bh"
    )
    outcome = audit(config=parse_config(changed), db=str(db))
    assert provider.counts.total == calls  # no chat and no embedding request
    after = _table_sizes(db)
    assert after["samples"] == sizes["samples"]
    assert after["embeddings"] == sizes["embeddings"]
    assert after["tests"] == sizes["tests"] + 4  # new tests under the new settings
    assert (_results(db, outcome.run_id).p_value > 0).all()


def test_thirty_percent_transient_faults_and_the_audit_completes(tmp_path):
    from tests.pipeline.conftest import RULES

    faults = {"429": 0.1, "500": 0.1, "503": 0.1}
    with ScriptedServer(
        rules=RULES, fault_rates=faults, fault_seed=3, embedding_dimension=24
    ) as flaky:
        config = parse_config(make_config(flaky))
        outcome = audit(config=config, db=str(tmp_path / "f.duckdb"))
        assert outcome.status == "completed"
        first_faults = sum(flaky.counts.faults.values())
        assert first_faults >= 5
        # Faults fall on other requests the second time; the same seeds give the same outputs.
        again = audit(config=config, db=str(tmp_path / "g.duckdb"))
        assert sum(flaky.counts.faults.values()) > first_faults
    pd.testing.assert_frame_equal(
        _results(tmp_path / "f.duckdb", outcome.run_id),
        _results(tmp_path / "g.duckdb", again.run_id),
    )


@dataclass(frozen=True)
class _PrefectView:
    """The latest run's flow run as Prefect's API shows it."""

    states: dict[str, str]
    """Task run name -> state type."""
    ended: dict[str, datetime]
    """Task run name -> end time."""
    logs: list[tuple[str, str, datetime]]
    """Level name, message and time of its log lines, its task runs' included."""


def _prefect_view(db: Path) -> _PrefectView:
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()  # the logs are sent in batches
    with Store(db, read_only=True) as store:
        flow_run_id = store.run("latest")["flow_run_id"]
    with get_client(sync_client=True) as client:
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return _PrefectView(
        states={t.name: t.state.type.value for t in task_runs if t.state is not None},
        ended={t.name: t.end_time for t in task_runs if t.end_time is not None},
        logs=[(logging.getLevelName(log.level), log.message, log.timestamp) for log in logs],
    )


def _swap_to(api_base: str, **fields) -> dict:
    """A model perturbation to a model named ``broken`` at ``api_base``."""
    model = {
        "model": "openai/scripted",
        "name": "broken",
        "api_base": api_base,
        "api_key_env": "DBPA_PIPELINE_TEST_KEY",
        "max_n": 1,
        **fields,
    }
    return {"kind": "model", "models": [model]}


def test_a_permanent_error_ends_the_run_and_keeps_the_rest(tmp_path):
    from tests.pipeline.conftest import RULES

    with (
        ScriptedServer(rules=RULES, embedding_dimension=24) as good,
        ScriptedServer(rules=RULES, script=[Fault("401")] * 50) as bad,
    ):
        config = make_config(good)
        config["perturbations"].append(_swap_to(bad.api_base))
        with pytest.raises(AuditIncomplete, match=r"model .broken.: AuthenticationError") as raised:
            audit(config=parse_config(config), db=str(tmp_path / "p.duckdb"))
        assert "sk-pipeline-test" not in str(raised.value)
        # Failed fast: the arm's requests were in flight together, none was retried.
        seeds = [r["seed"] for r in bad.counts.requests]
        assert len(seeds) == len(set(seeds)) <= 8
    with Store(tmp_path / "p.duckdb", read_only=True) as store:
        run = store.run("latest")
        assert run["status"] == "incomplete"
        df = store.results(run["run_id"])
        assert len(store.arm_failures(run["run_id"])) == 1
        assert store.samples().groupby("arm_id").size().tolist() == [8] * 5
    assert df.tested.sum() == 4
    assert not df.set_index("perturbation_id").loc["model-broken", "tested"]
    # Prefect shows the task run that met the error Failed (once: not retried), the others
    # Completed.
    states = _prefect_view(tmp_path / "p.duckdb").states
    sampling = {name: state for name, state in states.items() if name.startswith("sample ")}
    assert sampling.pop("sample model-broken (openai/scripted)") == "FAILED"
    assert len(sampling) == 5
    assert set(sampling.values()) == {"COMPLETED"}


def test_a_refused_connection_fails_the_audit_after_its_budget_saying_so_once(tmp_path):
    from tests.pipeline.conftest import RULES

    budget = 3.0
    with ScriptedServer() as gone:  # closed at once: its port refuses connections
        refused = gone.api_base
    with ScriptedServer(rules=RULES, embedding_dimension=24) as good:
        config = make_config(good)
        config["perturbations"].append(_swap_to(refused, connect_budget_s=budget))
        start = time.perf_counter()
        with pytest.raises(AuditIncomplete) as raised:
            audit(config=parse_config(config), db=str(tmp_path / "c.duckdb"))
        elapsed = time.perf_counter() - start
    reason = (
        f"model 'broken': connection refused by {refused}; gave up after 3 s (connect_budget_s)"
    )
    assert str(raised.value).startswith(f"1 of 6 arms could not be sampled: {reason}. ")
    # The whole audit (5 other arms sampled, embedded and tested, reports) takes 5-20 s more
    # on a loaded 2-core machine (a real server took 7.6 minutes to fail before the budget).
    assert budget <= elapsed < budget + 60, elapsed
    with Store(tmp_path / "c.duckdb", read_only=True) as store:
        assert store.samples().groupby("arm_id").size().tolist() == [8] * 5
    view = _prefect_view(tmp_path / "c.duckdb")
    broken = "sample model-broken (openai/scripted)"
    assert view.states[broken] == "FAILED"
    about = [(level, message, at) for level, message, at in view.logs if refused in message]
    warnings = [(message, at) for level, message, at in about if level == "WARNING"]
    assert [message for message, _ in warnings] == [
        f"model 'broken': connection refused by {refused}; retrying for up to 3 s "
        "(connect_budget_s)"
    ]
    # From the first refusal (the warning) to the arm's task run failing: the budget.
    given_up = (view.ended[broken] - warnings[0][1]).total_seconds()
    assert budget - 0.5 <= given_up < budget + 5, given_up
    # The warning, the task run's end, the arm, the model, the flow's exception and end.
    assert len(about) <= 6, about


def test_results_do_not_depend_on_concurrency(provider, tmp_path):
    a = audit(config=parse_config(make_config(provider)), db=str(tmp_path / "a.duckdb"))
    serial = make_config(provider)
    serial["models"][0]["max_concurrency"] = 1
    b = audit(config=parse_config(serial), db=str(tmp_path / "b.duckdb"))
    ra, rb = _results(tmp_path / "a.duckdb", a.run_id), _results(tmp_path / "b.duckdb", b.run_id)
    np.testing.assert_array_equal(ra.p_value, rb.p_value)


def test_arms_are_embedded_and_tested_while_other_arms_still_sample(tmp_path, monkeypatch):
    from tests.pipeline.conftest import RULES

    monkeypatch.setattr(flows.audit, "TESTS_PER_TASK_RUN", 1)  # test as soon as one is ready
    # Every request of the child persona's arm; the other arms answer at once. At 4 s, a run
    # under a profiler on a loaded machine tested one other arm after the child's last output.
    slow = 8.0

    def latency(body: dict) -> float:
        return slow if "child" in str(body.get("messages")) else 0.0

    with ScriptedServer(rules=RULES, embedding_dimension=24, latency=latency) as provider:
        config = make_config(provider)
        config["models"][0]["max_concurrency"] = 64  # the slow requests hold no one up
        outcome = audit(config=parse_config(config), db=str(tmp_path / "a.duckdb"))
    with Store(tmp_path / "a.duckdb", read_only=True) as store:
        family = store.results(outcome.run_id).set_index("perturbation_id")
        samples = store.samples().set_index("arm_id")
        tests = store.tests(family.test_id.tolist()).set_index("test_id")
    child_arm = family.loc["persona-child", "perturbed_arm"]
    last_child_output = samples.loc[child_arm, "created_at"].max()
    early = family.drop(index="persona-child").test_id
    assert (tests.loc[early, "created_at"] < last_child_output).all()
    assert tests.loc[family.loc["persona-child", "test_id"], "created_at"] > last_child_output


def test_an_embedder_failing_while_arms_sample_fails_the_run_after_every_sample(
    tmp_path, monkeypatch
):
    from dbpa.llm import PermanentModelError
    from tests.pipeline.conftest import RULES

    # One sampling task run at a time: the first one's arm is embedded (and fails) while the
    # others still wait to start; they must all run before the run fails.
    monkeypatch.setattr(flows.audit, "SAMPLING_THREADS", 1)
    with (
        ScriptedServer(rules=RULES, embedding_dimension=24) as provider,
        ScriptedServer(script=[Fault("401", endpoint="/v1/embeddings")] * 50) as embedder,
    ):
        config = make_config(provider)
        config["embedder"]["api_base"] = embedder.api_base
        with pytest.raises(PermanentModelError, match="litellm/openai/scripted"):
            audit(config=parse_config(config), db=str(tmp_path / "e.duckdb"))
        assert embedder.counts.by_endpoint["/v1/embeddings"] >= 1
    with Store(tmp_path / "e.duckdb", read_only=True) as store:
        assert store.run("latest")["status"] == "failed"
        assert store.samples().groupby("arm_id").size().tolist() == [8] * 5


def test_run_audit_tags_the_flow_run_and_not_its_task_runs(provider, tmp_path):
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    config = parse_config(make_config(provider))
    outcome = run_audit(config, str(tmp_path / "a.duckdb"))
    with Store(tmp_path / "a.duckdb", read_only=True) as store:
        flow_run_id = store.run(outcome.run_id)["flow_run_id"]
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(flow_run_id)
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    assert set(flow_run.tags) == {"audit:persona-test", "model:openai/scripted"}
    names = {t.name.split()[0] for t in task_runs}
    assert {"sample", "embed", "test", "correct", "report"} <= names
    assert all(t.tags == [] for t in task_runs)
    # Embedding task runs say which arms they embed, so no two share a name.
    embeds = [t.name for t in task_runs if t.name.startswith("embed ")]
    assert len(set(embeds)) == len(embeds)
    assert all("original (openai/scripted)" in name or "persona-" in name for name in embeds), (
        embeds
    )


def test_progress_reports_sampling_then_embedding_and_testing_to_the_end(provider, tmp_path):
    from dbpa import progress

    updates: list[progress.Progress] = []
    with progress.listen(updates.append):
        audit(config=parse_config(make_config(provider)), db=str(tmp_path / "a.duckdb"))
    phases = list(dict.fromkeys(u.phase for u in updates))
    assert phases == ["sample", "embed", "test"]  # the order of the CLI's bars
    last = {u.phase: u for u in updates}
    assert (last["sample"].done, last["sample"].total, last["sample"].unit) == (40, 40, "outputs")
    assert (last["embed"].done, last["embed"].total, last["embed"].unit) == (5, 5, "arms")
    assert (last["test"].done, last["test"].total, last["test"].unit) == (4, 4, "tests")
