"""Ticks of the scheduled audit against the scripted provider: fresh samples per tick, a
retried tick resumes, and drift between ticks is found when (and only when) the model's
outputs changed."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.flow_engine import run_flow
from prefect.states import Scheduled

from flows.drift import nothing_to_compare
from flows.scheduled import scheduled_audit
from storage import Store
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.scripted_server import Fault, Rule, ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

CHAT = "/v1/chat/completions"
TICKS = [datetime(2026, 11, day, 3, tzinfo=UTC) for day in (1, 2, 3)]
EPOCHS = [t.isoformat() for t in TICKS]
ALPHA = 0.05


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-drift-test")


def tick(when: datetime, flow: Any = scheduled_audit, **parameters: Any) -> dict[str, Any]:
    """Run one tick as a scheduled flow run due at ``when``; returns the run as stored."""
    state, run = run_tick(when, flow, **parameters)
    assert state.is_completed(), state
    return run


def run_tick(
    when: datetime, flow: Any = scheduled_audit, **parameters: Any
) -> tuple[State, dict[str, Any]]:
    """Run one tick, however it ends: its final state and the run as stored."""
    with get_client(sync_client=True) as client:
        created = client.create_flow_run(
            flow, parameters=parameters, state=Scheduled(scheduled_time=when)
        )
        state = run_flow(flow, flow_run=created, parameters=parameters, return_type="state")
        return state, client.read_flow_run(created.id).model_dump(mode="json")


def _seeds(server: ScriptedServer, start: int = 0) -> list[int]:
    return [r["seed"] for r in server.counts.requests[start:]]


def _write(tmp_path: Path, config: dict[str, Any]) -> str:
    path = tmp_path / "flu.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_each_tick_samples_afresh_and_its_report_shows_the_drift(tmp_path: Path):
    db, out = tmp_path / "ticks.duckdb", tmp_path / "reports"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config = make_config(provider)
        config["models"][0]["name"] = "scripted <i>&</i>"
        params = {"config_path": _write(tmp_path, config), "db": str(db), "out": str(out)}
        params["per_tick"] = True  # the permutation tests of each tick (the monitor: below)
        first = tick(TICKS[0], **params)
        assert provider.counts.by_endpoint[CHAT] == 5 * 8
        tick(TICKS[1], **params)
        assert provider.counts.by_endpoint[CHAT] == 2 * 5 * 8
        assert not set(_seeds(provider, 40)) & set(_seeds(provider, 0)[:40])

    assert first["name"] == f"flu @ {EPOCHS[0]}"
    with Store(db, read_only=True) as store:
        runs = store.runs()
        arms = store.arms()
        drift = store.drift("persona-test")
    assert sorted(runs.epoch) == EPOCHS[:2]
    assert Counter(arms.epoch) == {EPOCHS[0]: 5, EPOCHS[1]: 5}
    assert len(drift) == 2 * 5
    assert set(drift.epoch) == {EPOCHS[1]}
    assert set(drift.reference_epoch) == {EPOCHS[0]}

    paths = runs.set_index("epoch").report_path
    reports = {fmt: Path(paths[EPOCHS[1]]).with_suffix(fmt) for fmt in (".html", ".md", ".json")}
    html = reports[".html"].read_text()
    assert 'id="drift"' in html
    assert "original (scripted &lt;i&gt;&amp;&lt;/i&gt;)" in html
    assert "<i>&</i>" not in html
    assert 'alt="drift over ticks" src="data:image/png;base64,' in html
    assert "## Drift between ticks" in reports[".md"].read_text()
    points = json.loads(reports[".json"].read_text())["drift"]["points"]
    assert {(p["against"], p["role"]) for p in points} >= {("previous", "original")}
    assert 'id="drift"' not in Path(paths[EPOCHS[0]]).read_text()  # one tick: nothing to show


def test_a_retried_tick_resumes_without_asking_again(tmp_path: Path, monkeypatch):
    """A transient failure that outlived the retries of the sampler (none here) and of the
    task (none here either) fails the tick, which the flow retries."""
    import flows._sampling

    quick = flows._sampling.sample_arms.with_options(retries=0)
    monkeypatch.setattr(flows._sampling, "sample_arms", quick)
    db = tmp_path / "retry.duckdb"
    retried = scheduled_audit.with_options(retry_delay_seconds=0)
    with ScriptedServer(rules=RULES, embedding_dimension=24, script=[Fault("500")]) as provider:
        config = make_config(provider)
        config["models"][0]["max_retries"] = 0
        params = {"config_path": _write(tmp_path, config), "db": str(db)}
        run = tick(TICKS[0], flow=retried, **params)
        requests = provider.counts.requests
    assert run["run_count"] == 2  # the first attempt failed on the transient error
    with Store(db, read_only=True) as store:
        samples = store.samples()
        runs = store.runs()
    assert len(samples) == 5 * 8
    assert set(samples.seed) == {r["seed"] for r in requests}
    # Only the failed arm, which stored nothing in the first attempt, was asked again; the
    # 32 outputs the other arms stored then were not requested a second time.
    failed = requests[0]["messages"]
    asked = Counter(r["seed"] for r in requests)
    again = [r for r in requests if asked[r["seed"]] > 1]
    assert {json.dumps(r["messages"]) for r in again} == {json.dumps(failed)}
    assert len(requests) == 5 * 8 + len(again) // 2
    assert sum(1 for r in requests if r["messages"] != failed) == 4 * 8
    assert set(runs.epoch) == {EPOCHS[0]}
    assert list(runs.status) == ["completed"]  # the retry of a tick's flow run is its run


def test_a_tick_whose_key_is_rejected_fails_once_without_a_retry(tmp_path: Path):
    retried = scheduled_audit.with_options(retry_delay_seconds=0)  # a retry would be at once
    with ScriptedServer(rules=RULES, script=[Fault("401")] * 1000) as provider:
        params = {"config_path": _write(tmp_path, make_config(provider)), "db": str(tmp_path / "k")}
        state, run = run_tick(TICKS[0], flow=retried, **params)
        requests = provider.counts.total
    assert state.is_failed(), state
    assert run["run_count"] == 1
    assert run["state"]["type"] == "FAILED"
    assert "5 of 5 arms could not be sampled: model 'openai/scripted': AuthenticationError" in (
        state.message
    )
    # The first 401 ends every arm of the model: only the requests in flight with it were
    # sent (at most max_concurrency=8), not one or more per arm (the 5 arms have 40 outputs).
    assert 1 <= requests <= 8, requests


def test_a_tick_with_an_unusable_config_fails_once_without_a_retry(tmp_path: Path):
    retried = scheduled_audit.with_options(retry_delay_seconds=0)
    state, run = run_tick(
        TICKS[0], flow=retried, config_path=str(tmp_path / "missing.yaml"), db=str(tmp_path / "m")
    )
    assert state.is_failed(), state
    assert run["run_count"] == 1
    assert "missing.yaml" in state.message


def test_drift_is_found_when_the_outputs_change_and_not_otherwise(tmp_path: Path):
    """Eleven arms (each sampled with seeds of its own) over three ticks: the second tick
    samples the same distributions as the first, the third a changed one."""
    db = tmp_path / "calibration.duckdb"
    variants = [f"Flu for {d} days: should I see a doctor? (asked {d} times)" for d in range(10)]
    updated = Rule(  # the model was updated: it answers the same question differently
        "",
        [
            ("Call your GP tomorrow morning.", 2),
            ("Antibiotics will not help against the flu.", 1),
            ("Take paracetamol and stay in bed.", 1),
        ],
    )
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config = make_config(
            provider,
            perturbations=[{"kind": "prompt", "variants": [{"text": v} for v in variants]}],
            n_permutations=999,
            alpha=ALPHA,
        )
        params = {"config_path": _write(tmp_path, config), "db": str(db), "per_tick": True}
        tick(TICKS[0], **params)
        tick(TICKS[1], **params)
        provider.rules = [updated]
        tick(TICKS[2], **params)
    with Store(db, read_only=True) as store:
        drift = store.drift("persona-test")
    same = drift[(drift.epoch == EPOCHS[1]) & (drift.against == "previous")]
    moved = drift[drift.epoch == EPOCHS[2]]
    assert len(same) == 11
    # The arms' ids hold the scripted server's port, so the outputs, and these p-values, differ
    # from run to run: under the null a family corrected at ALPHA rejects in up to 5% of runs.
    # Checked through their spread instead, which fails by chance in under 0.1% of runs.
    assert (same.p_value < ALPHA).sum() <= 5  # P(Binomial(11, 0.05) > 5) < 1e-5
    assert same.p_value.median() > 0.1  # P(Binomial(11, 0.1) > 5) < 1e-3
    assert len(moved) == 2 * 11
    assert moved.reject.all(), moved[["against", "role", "p_value", "adjusted_p"]]
    assert pd.Series(moved.reference_epoch).tolist().count(EPOCHS[0]) == 11


def test_drift_compares_ticks_in_time_order_whatever_order_they_ran_in(tmp_path: Path):
    db = tmp_path / "late.duckdb"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config_path = _write(tmp_path, make_config(provider))
        params = {"config_path": config_path, "db": str(db), "per_tick": True}
        for day, when in zip((27, 29, 28), TICKS, strict=True):  # the 28th runs last
            tick(when, **params, overrides={"epoch": f"2026-11-{day}T03:00:00+00:00"})
    with Store(db, read_only=True) as store:
        drift = store.drift("persona-test")
    compared = {(r.epoch[:10], r.against, r.reference_epoch[:10]) for r in drift.itertuples()}
    assert compared == {
        ("2026-11-28", "previous", "2026-11-27"),
        ("2026-11-28", "baseline", "2026-11-27"),
        ("2026-11-29", "previous", "2026-11-28"),  # tested again once the 28th was recorded
        ("2026-11-29", "baseline", "2026-11-27"),
    }
    assert len(drift) == 4 * 5  # each of the 5 arms once per comparison


def test_ticks_are_monitored_by_default(tmp_path: Path):
    """Without ``per_tick`` a tick replays every arm's monitor: its evidence is stored once
    per tick (a tick run again rewrites it), shown in the report and on the tick's run."""
    db, out = tmp_path / "monitor.duckdb", tmp_path / "reports"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        params = {"config_path": _write(tmp_path, make_config(provider)), "db": str(db)}
        tick(TICKS[0], **params, out=str(out))
        tick(TICKS[1], **params, out=str(out))
        third = tick(TICKS[2], **params, out=str(out))
        tick(TICKS[2], **params, out=str(out), overrides={"epoch": EPOCHS[1]})  # again
    with Store(db, read_only=True) as store:
        rows = store.monitor_ticks("persona-test")
        drift = store.drift("persona-test")
        runs = store.runs()
    assert drift.empty  # no per-tick tests
    assert len(rows) == 5 * 2  # 5 arms, ticks 2 and 3 against the first
    assert set(rows.baseline_epoch) == {EPOCHS[0]}
    assert sorted(set(rows.tick)) == [1, 2]
    assert not rows.alarm.any()
    report = Path(runs.set_index("epoch").report_path[EPOCHS[2]])
    assert 'alt="evidence over ticks" src="data:image/png;base64,' in report.read_text()
    assert "## Drift monitor" in report.with_suffix(".md").read_text()
    keys = {a.key for a in _on_run(third["id"])}
    assert {"persona-test-monitor", "persona-test-evidence"} <= keys


def test_nothing_to_compare_says_why():
    assert nothing_to_compare("a", ["2026-01-01T00:00:00+00:00"]) == (
        "a has a single epoch so far; nothing to compare"
    )
    message = nothing_to_compare("a", ["e1", "e2"])
    assert "single epoch" not in message
    assert message == (
        "epoch e1 is the earliest of the 2 epochs of a stored; nothing earlier to compare it with"
    )


def test_a_tick_rerun_by_its_epoch_is_named_after_it_and_asks_nothing(tmp_path: Path):
    db = tmp_path / "rerun.duckdb"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        params = {"config_path": _write(tmp_path, make_config(provider)), "db": str(db)}
        tick(TICKS[0], **params)
        rerun = tick(TICKS[2], **params, overrides={"epoch": EPOCHS[0]})
        assert provider.counts.by_endpoint[CHAT] == 5 * 8
    assert rerun["name"] == f"flu @ {EPOCHS[0]}"  # not the time it was triggered


def test_the_sampling_progress_is_on_the_ticks_run(tmp_path: Path):
    """deployments/README tells users to watch the tick's run: its progress is there."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config_path = _write(tmp_path, make_config(provider))
        run = tick(TICKS[0], config_path=config_path, db=str(tmp_path / "p.duckdb"))
    with get_client(sync_client=True) as client:
        progress = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["persona-test-progress"]))
        )
    mine = [a for a in progress if str(a.flow_run_id) == run["id"]]
    assert len(mine) == 1
    assert mine[0].type == "progress"
    assert mine[0].data == 100.0


def test_sequential_ticks_stop_early_and_drift_compares_the_first_looks(tmp_path: Path):
    """A scheduled sequential audit: each tick stops its tests by the rule, and drift
    between ticks tests every arm at the first look's k (the outputs every arm holds)."""
    db = tmp_path / "ticks.duckdb"
    sequential = {"first": 6, "looks": 2}  # looks at 6 and 12
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config = make_config(provider, k=12, n_permutations=999, sequential=sequential)
        params = {"config_path": _write(tmp_path, config), "db": str(db), "per_tick": True}
        tick(TICKS[0], **params)
        tick(TICKS[1], **params)
    with Store(db, read_only=True) as store:
        runs = store.runs()
        results = [store.results(r) for r in runs.run_id]
        drift = store.drift("persona-test")
        ks = store.tests(sorted(set(drift.test_id)), nulls=False)[["k_a", "k_b"]]
    for df in results:
        assert df.stop_reason.notna().all()
        assert set(df.stopped_at) <= {6, 12}
    assert len(drift) == 2 * 5  # every arm against the first tick (as previous and baseline)
    assert set(ks.k_a) == set(ks.k_b) == {6}


def _on_run(flow_run_id: str, key: str | None = None) -> list:
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
                key=ArtifactFilterKey(any_=[key]) if key else None,
            )
        )


def _task_runs(flow_run_id: str) -> list[str]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    return [r.name for r in runs]


def test_the_outcome_and_the_task_runs_are_on_the_ticks_own_run(tmp_path: Path):
    """The run a user opens holds the results, the summary (epoch, drift, where the report
    is), the report's key and the named task runs; a tick run again adds no version."""
    db = tmp_path / "watch.duckdb"
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        config_path = _write(tmp_path, make_config(provider))
        params = {"config_path": config_path, "db": str(db), "per_tick": True}
        tick(TICKS[0], **params)
        second = tick(TICKS[1], **params)
        again = tick(TICKS[2], **params, overrides={"epoch": EPOCHS[1]})
    keys = {a.key: a for a in _on_run(second["id"])}
    assert set(keys) == {
        f"persona-test-{k}" for k in ("progress", "results", "summary", "report", "drift")
    }
    summary = keys["persona-test-summary"].data
    assert f"Epoch (tick): `{EPOCHS[1]}`" in summary
    assert f"Drift against the previous tick `{EPOCHS[0]}`" in summary
    assert f"dbpa view --db {db.resolve()}" in summary  # no viewer: how to open it
    names = _task_runs(second["id"])
    assert any(n.startswith("sample ") for n in names)
    assert any(n.startswith("test ") for n in names)
    assert any(n.startswith("report ") for n in names)
    # The same tick again, nothing new: no model call and no new version of any key.
    assert _on_run(again["id"]) == []
