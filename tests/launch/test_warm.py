"""What ``dbpa run`` reads from the record before its flow starts, and what it warms up."""

from __future__ import annotations

import re
import threading
import time

import pytest

import dbpa.embedding
from dbpa.config import parse_config
from dbpa.launch import PendingWork, embedder_warmed, pending_work, wait_for_warm_ups
from dbpa.launch import first_look as _first_look
from dbpa.plan import plan_audit
from dbpa.progress import Counter
from dbpa.specs import EmbedderSpec
from flows.audit import run_audit
from tests.pipeline.conftest import KEY_ENV, make_config
from tests.support.cli_process import run_dbpa

HEAVY = ("litellm", "torch", "sentence_transformers", "xllamacpp")


def test_a_new_record_needs_everything(tmp_path, provider):
    plan = plan_audit(parse_config(make_config(provider)))
    assert pending_work(plan, tmp_path / "none.duckdb") == PendingWork(
        frozenset({"openai/scripted"}), embedding=True
    )


def test_a_record_that_cannot_be_read_needs_everything(tmp_path, provider):
    plan = plan_audit(parse_config(make_config(provider)))
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(b"not a database" * 100)
    assert pending_work(plan, damaged).models == {"openai/scripted"}


@pytest.mark.usefixtures("prefect_harness")
def test_a_finished_audit_needs_nothing_and_more_outputs_need_the_model(tmp_path, provider):
    config = parse_config(make_config(provider))
    db = tmp_path / "done.duckdb"
    run_audit(config, str(db), str(tmp_path / "reports"))
    done = pending_work(plan_audit(config), db)
    assert done == PendingWork(frozenset(), embedding=False, tests=False)
    assert done.done
    other_b = parse_config(make_config(provider, n_permutations=299))  # new tests, no output
    assert pending_work(plan_audit(other_b), db) == PendingWork(frozenset(), embedding=False)
    more = parse_config(make_config(provider, k=10))
    assert pending_work(plan_audit(more), db) == PendingWork(
        frozenset({"openai/scripted"}), embedding=True
    )


@pytest.mark.usefixtures("prefect_harness")
def test_a_finished_sequential_audit_needs_no_model(tmp_path, provider):
    """Its arms stop short of k where their tests stopped: only the first look is sure."""
    sequential = {"first": 8, "looks": 2}
    config = parse_config(make_config(provider, k=16, n_permutations=999, sequential=sequential))
    db = tmp_path / "done.duckdb"
    run_audit(config, str(db), str(tmp_path / "reports"))
    plan = plan_audit(config)
    assert pending_work(plan, db).models == {"openai/scripted"}  # short of k=16: stopped early
    assert _first_look(plan, config).k == 8
    assert pending_work(_first_look(plan, config), db).models == frozenset()


def test_the_end_of_a_run_waits_for_a_warm_up_still_loading(monkeypatch):
    """A daemon thread stopped mid-import at exit would hang the interpreter's exit."""
    loaded = threading.Event()

    def slow(spec: EmbedderSpec) -> None:
        time.sleep(0.5)
        loaded.set()

    monkeypatch.setattr(dbpa.embedding, "get_embedder", slow)
    with embedder_warmed(EmbedderSpec(), PendingWork(frozenset(), embedding=True)):
        pass
    assert not loaded.is_set()
    wait_for_warm_ups()
    assert loaded.is_set()


def test_the_embedder_loads_once_the_first_output_is_stored(monkeypatch):
    loaded = threading.Event()
    monkeypatch.setattr(dbpa.embedding, "get_embedder", lambda spec: loaded.set())
    work = PendingWork(frozenset({"openai/scripted"}), embedding=True)
    with embedder_warmed(EmbedderSpec(), work):
        counter = Counter("sample", total=4, done=1)  # resumed: one output was stored
        Counter("embed", total=2).add(1)
        assert not loaded.wait(0.2)
        counter.add(1)
        assert loaded.wait(10)


def test_the_embedder_loads_at_once_when_nothing_is_to_be_sampled(monkeypatch):
    loaded = threading.Event()
    monkeypatch.setattr(dbpa.embedding, "get_embedder", lambda spec: loaded.set())
    with embedder_warmed(EmbedderSpec(), PendingWork(frozenset(), embedding=True)):
        assert loaded.wait(10)


def test_no_embedder_when_every_output_has_its_vector(monkeypatch):
    monkeypatch.setattr(dbpa.embedding, "get_embedder", lambda spec: pytest.fail("loaded"))
    with embedder_warmed(EmbedderSpec(), PendingWork(frozenset(), embedding=False)):
        Counter("sample", total=4).add(4)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    "overrides",
    [{}, {"k": 16, "sequential": {"first": 8, "looks": 2}}],
    ids=["fixed", "sequential"],
)
def test_the_rerun_of_a_finished_audit_loads_no_model_stack(
    tmp_path, provider, write_config, prefect_home, overrides
):
    """A sequential audit's arms stop short of k: its re-run has nothing to sample all the
    same (before, it warmed litellm and the local models up, and could hang at exit). The
    first run, which only finishes the record, runs here on the harness's server; the re-run
    is a fresh interpreter, as a user runs it: the fixed audit's decided from the record
    (Prefect not started), the sequential one's through the flow, here on the harness's
    server too (Prefect's temporary server, its own process, is not what is measured)."""
    from prefect.settings import PREFECT_API_URL

    from tests.cli.conftest import invoke

    config = str(write_config(make_config(provider, **overrides)))
    args = ["run", config, "--db", str(tmp_path / "a.duckdb")]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    requests = provider.counts.total
    assert requests > 0
    env = {KEY_ENV: "sk-pipeline-test", "PYTHONPROFILEIMPORTTIME": "1"}
    if "sequential" in overrides:
        env["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
    again = run_dbpa(args, prefect_home, cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout
    assert provider.counts.total == requests
    imported = re.findall(r"\|\s+([\w.]+)$", again.stdout, re.MULTILINE)
    assert "duckdb" in imported  # the check can fail: the re-run's imports are read
    assert [m for m in imported if m.split(".")[0] in HEAVY] == []


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_plans_its_config_once(tmp_path, provider, write_config, monkeypatch):
    """The config is loaded, bound and planned once; the warm-ups, the head start and the
    flow receive that plan (the flow used to plan it again)."""
    import dbpa.plan
    import flows.audit
    from tests.cli.conftest import invoke

    real, planned = dbpa.plan.plan_audit, []

    def counted(config):
        planned.append(config.name)
        return real(config)

    monkeypatch.setattr(dbpa.plan, "plan_audit", counted)
    monkeypatch.setattr(flows.audit, "plan_audit", counted)
    config = write_config(make_config(provider))
    result = invoke("run", str(config), "--db", str(tmp_path / "once.duckdb"))
    assert result.exit_code == 0, result.output
    assert planned == ["persona-test"]
