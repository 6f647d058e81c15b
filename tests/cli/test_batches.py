"""``batch: true``: an audit's outputs through provider batches (the scripted server's
Files + Batches API, through litellm), resumed from the record, re-sent when they fail."""

from __future__ import annotations

import json
import time

import pytest

import flows._batches as batches_module
from dbpa.config import load_config
from dbpa.plan import plan_audit
from flows._batches import BatchedSampling, BatchesPending
from storage import Store
from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import make_config
from tests.support.scripted_server import BatchScript, Fault

pytestmark = pytest.mark.usefixtures("wide_console")


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches_module, "FIRST_POLL_S", 0.05)
    monkeypatch.setattr(batches_module, "MOST_POLL_S", 0.2)


IN, OUT = 1e-6, 1e-5


def _batched(server, **overrides):
    config = make_config(server, **overrides)
    config["models"][0]["batch"] = True
    return config


def _priced(server, **overrides):
    config = _batched(server, **overrides)
    config["models"][0].update(
        input_cost_per_token=IN, output_cost_per_token=OUT, params={"max_tokens": 20}
    )
    return config


def _asked(server) -> list[tuple[str, int]]:
    return [(json.dumps(b["messages"]), b["seed"]) for b in server.counts.batch_requests]


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_samples_by_batches_and_sends_failed_requests_again(tmp_path, provider, write_config):
    provider.push_batch_script(BatchScript(delay_s=0.1, fail_every=3))
    db = tmp_path / "batched.duckdb"
    config = write_config(_priced(provider, max_cost_usd=1.0))
    result = invoke("run", str(config), "--db", str(db))
    assert result.exit_code == 0, result.output
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 0  # nothing sent one by one
    assert provider.counts.by_endpoint["/v1/batches"] == 2  # the first batch, then its failures
    with Store(db, read_only=True) as store:
        stored = store.samples()
        kept = store.batches()
    assert len(stored) == 40
    asked = _asked(provider)
    assert len(asked) == len(set(asked)) == 40  # every answered request asked once
    assert set(stored.seed) == {seed for _, seed in asked}
    assert [len(b.requests) for b in kept] == [40, 13]  # every third of 40 failed
    assert all(b.collected for b in kept)
    at_batch_price = (stored.prompt_tokens * IN + stored.completion_tokens * OUT) / 2
    assert stored.cost_usd.to_numpy() == pytest.approx(at_batch_price.to_numpy())
    shown = text(result)
    assert f"cost: ${at_batch_price.sum():.4f} for 40 outputs" in shown
    assert "in provider batches, at the batch price: openai/scripted" in shown
    listed = invoke("runs", "--db", str(db))
    assert listed.exit_code == 0, listed.output
    assert f"${at_batch_price.sum():.4f}" in listed.output  # dbpa runs: its cost column


@pytest.mark.usefixtures("prefect_harness")
def test_a_sequential_audit_sends_one_batch_per_look(tmp_path, rotating_provider, write_config):
    # Answers in turn: the targets' splits are certain at the first look and the controls'
    # arms equal (p = 1), which, without futility stops, stay open to the last look, whatever
    # seeds the server's random port gives the arms.
    provider = rotating_provider
    db = tmp_path / "looks.duckdb"
    config = write_config(_batched(provider, k=20, sequential={"futility": False}))
    result = invoke("run", str(config), "--db", str(db))
    assert result.exit_code == 0, result.output
    with Store(db, read_only=True) as store:
        kept = store.batches()
        stored = store.samples()
        looks = store._rows("SELECT DISTINCT k FROM sequential_looks ORDER BY k")
    assert len(kept) == len(looks) == 4  # one batch per look
    for batch, (k,) in zip(kept, looks, strict=True):
        assert max(i for r in batch.requests for i in r.indices) == k - 1
    assert len(stored) == sum(len(b.requests) for b in kept) == len(_asked(provider)) < 5 * 20


def test_a_restarted_run_collects_the_same_batches(tmp_path, provider, write_config):
    provider.push_batch_script(BatchScript(delay_s=1.5))
    config = load_config(write_config(_batched(provider)))
    plan = plan_audit(config)
    db = tmp_path / "resumed.duckdb"
    with Store(db) as store:
        store.add_arms(plan.arms)
        first = BatchedSampling(plan, store, config.name)
        assert first.submit() == 40
        with pytest.raises(BatchesPending, match="waiting for 1 provider batch"):
            first.wait(0.0)  # the run stops while the provider works
    with Store(db) as store:  # the next start: the batch completed meanwhile
        again = BatchedSampling(plan, store, config.name)
        assert again.submit() == 0  # its requests are in the open batch
        assert again.wait(None) == {}
        assert len(store.samples()) == 40
    assert provider.counts.by_endpoint["/v1/batches"] == 1
    assert len(_asked(provider)) == 40


def test_a_batch_past_its_deadline_is_cancelled_and_its_requests_sent_again(
    tmp_path, provider, write_config
):
    provider.push_batch_script(BatchScript(delay_s=60.0, window_s=0))  # never done in time
    config = load_config(write_config(_batched(provider)))
    plan = plan_audit(config)
    with Store(tmp_path / "late.duckdb") as store:
        store.add_arms(plan.arms)
        batched = BatchedSampling(plan, store, config.name)
        batched.submit()
        assert batched.wait(None) == {}
        assert len(store.samples()) == 40
        assert [(b.status, len(b.requests)) for b in store.batches()] == [
            ("cancelled", 40),
            ("completed", 40),
        ]
    assert len(_asked(provider)) == 40  # the cancelled batch answered none of them


@pytest.mark.usefixtures("prefect_harness")
def test_a_provider_refusing_the_batch_exits_1_naming_it(tmp_path, provider, write_config):
    provider.push_faults(Fault("400", endpoint="/v1/batches"))
    db = tmp_path / "refused.duckdb"
    result = invoke("run", str(write_config(_batched(provider))), "--db", str(db))
    assert result.exit_code == 1, result.output
    shown = text(result)
    assert "model 'openai/scripted': create_batch: BadRequestError (HTTP 400)" in shown
    assert "Every output sampled so far is kept" in shown
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 0


def test_batch_true_on_a_provider_without_a_batch_api_exits_2(provider, write_config):
    config = make_config(provider)
    config["models"][0].update(model="anthropic/claude-3-5-haiku-20241022", batch=True)
    config["models"][0].pop("api_base")
    result = invoke("validate", str(write_config(config)))
    assert result.exit_code == 2, result.output
    assert "models[0].batch" in text(result)
    assert "'anthropic', which has no batch API" in text(result)


@pytest.mark.usefixtures("prefect_harness")
def test_a_tick_hands_over_while_its_batches_run_and_its_rerun_collects_them(
    tmp_path, provider, write_config, monkeypatch
):
    from datetime import UTC, datetime

    import flows.scheduled as scheduled
    from tests.drift.test_ticks import run_tick

    monkeypatch.setattr(scheduled, "TICK_BATCH_WAIT_S", 0.3)
    provider.push_batch_script(BatchScript(delay_s=2.0))
    when = datetime(2026, 11, 1, 3, tzinfo=UTC)
    params = {"config_path": str(write_config(_batched(provider))), "db": str(tmp_path / "t")}
    state, _ = run_tick(when, **params)
    assert state.is_completed(), state
    assert state.name == "AwaitingBatches"
    assert "waiting for 1 provider batch(es) of 40 request(s)" in state.message
    epoch = when.isoformat()
    assert f"run the tick again with overrides epoch={epoch}" in state.message
    with Store(tmp_path / "t", read_only=True) as store:
        assert [r["status"] for r in store.runs().to_dict("records")] == ["waiting"]
    time.sleep(2.0)
    again, _ = run_tick(datetime(2026, 11, 1, 4, tzinfo=UTC), **params, overrides={"epoch": epoch})
    assert again.is_completed(), again
    assert again.name == "Completed"
    assert provider.counts.by_endpoint["/v1/batches"] == 1  # the same batch, collected
    assert len(_asked(provider)) == 40


def test_a_worker_sets_how_long_a_tick_waits_for_its_batches(monkeypatch):
    from flows.scheduled import TICK_BATCH_WAIT_S, tick_batch_wait_s

    monkeypatch.delenv("DBPA_TICK_BATCH_WAIT_S", raising=False)
    assert tick_batch_wait_s() == TICK_BATCH_WAIT_S == 120.0
    monkeypatch.setenv("DBPA_TICK_BATCH_WAIT_S", " 30.5 ")
    assert tick_batch_wait_s() == 30.5
    monkeypatch.setenv("DBPA_TICK_BATCH_WAIT_S", "0")
    assert tick_batch_wait_s() == 0.0


@pytest.mark.parametrize("value", ["-1", "two", "nan", "inf"])
def test_a_bad_tick_batch_wait_names_the_variable(monkeypatch, value):
    from dbpa.config import ConfigError
    from flows.scheduled import tick_batch_wait_s

    monkeypatch.setenv("DBPA_TICK_BATCH_WAIT_S", value)
    with pytest.raises(ConfigError, match=f"DBPA_TICK_BATCH_WAIT_S must be seconds.*{value!r}"):
        tick_batch_wait_s()
