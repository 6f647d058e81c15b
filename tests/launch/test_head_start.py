"""The head start: outputs sampled while Prefect starts, never asked again by the flow."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import storage
from dbpa.config import AuditConfig
from dbpa.launch._head_start import ARMS_AT_ONCE, OUTPUTS_PER_CHUNK, HeadStart, chunks
from dbpa.plan import plan_audit
from tests.cli.conftest import invoke
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.cli_process import ROOT
from tests.support.scripted_server import Fault, Rule, ScriptedServer

CHAT = "/v1/chat/completions"


def _plan(server: ScriptedServer, k: int = 10):
    return plan_audit(AuditConfig.model_validate(make_config(server, k=k)))


def test_one_chunk_per_arm_of_whole_requests_skipping_stored_outputs(provider):
    plan = _plan(provider, k=10)  # one choice per request: chunks of 4 outputs
    first, second = plan.arms[0].arm_id, plan.arms[1].arm_id
    work = chunks(plan, {first: {0, 1, 2, 3, 5}})

    by_arm: dict[str, list[tuple[int, ...]]] = {}
    for chunk in work:
        by_arm.setdefault(chunk.arm.arm_id, []).append(chunk.indices)
    # One chunk per arm, its first missing outputs in whole requests; the rest is the flow's.
    assert by_arm[first] == [(4, 6, 7)]
    assert by_arm[second] == [(0, 1, 2, 3)]
    assert [c.arm for c in work] == list(plan.arms)
    assert all(c.seed == plan.arm_seed(c.arm) for c in work)


def test_chunks_of_a_finished_arm_are_none(provider):
    plan = _plan(provider, k=6)
    stored = {a.arm_id: set(range(6)) for a in plan.arms}
    assert chunks(plan, stored) == []


def _wait_for(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_stop_leaves_whole_outputs_in_the_record(tmp_path, make_server):
    with make_server(rules=RULES, latency=0.05) as server:
        plan = _plan(server, k=10)
        db = tmp_path / "a.duckdb"
        head_start = HeadStart(plan, db)
        _wait_for(lambda: head_start.stored >= 8)
        stored = head_start.stop()
        asked = server.counts.by_endpoint[CHAT]
    with storage.Store(db, read_only=True) as store:
        indices = store.sample_indices([a.arm_id for a in plan.arms])
    assert sum(len(i) for i in indices.values()) == stored
    assert stored == asked  # every answered request was stored, none after stop
    assert stored < 10 * len(plan.arms)  # stopped before the end


ENDS_UNSTOPPED = """
import sys
from dbpa.launch._head_start import HeadStart
from dbpa.config import AuditConfig
from dbpa.plan import plan_audit
from tests.pipeline.conftest import RULES, make_config
from tests.support.scripted_server import ScriptedServer

server = ScriptedServer(rules=RULES).__enter__()  # serves until the very end
HeadStart(plan_audit(AuditConfig.model_validate(make_config(server, k=10))), sys.argv[1])
raise SystemExit(143)  # as a signal inside HeadStart's constructor: its caller never stops it
"""


def test_a_run_that_ends_before_stopping_it_still_stops_it_at_exit(tmp_path):
    db = tmp_path / "a.duckdb"
    env = os.environ | {"PYTHONPATH": str(ROOT), KEY_ENV: "sk-x"}
    done = subprocess.run(
        [sys.executable, "-c", ENDS_UNSTOPPED, str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Not stopped, its thread was killed by the interpreter's exit while it opened the record
    # (inside DuckDB): the process aborted.
    assert done.returncode == 143, done.stderr
    with storage.Store(db, read_only=True) as store:  # closed by the head start, not damaged
        assert store.schema_version > 0


@pytest.mark.usefixtures("prefect_harness")
def test_the_flow_asks_only_for_what_the_head_start_did_not_get(
    tmp_path, make_server, write_config
):
    with make_server(rules=RULES, latency=0.05) as server:
        config = make_config(server, k=6)
        plan = plan_audit(AuditConfig.model_validate(config))
        db = tmp_path / "a.duckdb"
        head_start = HeadStart(plan, db)
        _wait_for(lambda: head_start.stored >= 6)
        early = head_start.stop()
        result = invoke("run", str(write_config(config)), "--db", str(db), "--out", str(tmp_path))
        asked = server.counts.by_endpoint[CHAT]
    assert result.exit_code == 0, result.output
    assert early >= 6
    assert asked == 6 * len(plan.arms)  # no output asked twice


def test_a_rejected_key_ends_the_head_start_quietly(tmp_path, make_server):
    with make_server(rules=RULES, script=[Fault("401")] * 100) as server:
        head_start = HeadStart(_plan(server), tmp_path / "a.duckdb")
        _wait_for(lambda: server.counts.total >= 1)
        assert head_start.stop() == 0
        asked = server.counts.total
    # Its model is left alone after the first rejection: only the first chunks were asked.
    assert asked <= ARMS_AT_ONCE * OUTPUTS_PER_CHUNK


@pytest.mark.usefixtures("prefect_harness")
def test_a_first_run_with_paraphrases_starts_the_arms_that_need_none(
    tmp_path, make_server, write_config
):
    from tests.pipeline.test_paraphrase import GENERATED, INSTRUCTION

    with make_server(rules=(Rule("Paraphrase this question", GENERATED), *RULES)) as server:
        generator = {"model": "openai/scripted", "name": "generator", "max_n": 1}
        generator |= {"api_base": server.api_base, "api_key_env": KEY_ENV}
        spec = {"kind": "paraphrase", "n": 6, "model": generator, "instruction": INSTRUCTION}
        config = make_config(server, perturbations=[spec], n_permutations=999, k=6)
        db = tmp_path / "a.duckdb"
        result = invoke("run", str(write_config(config)), "--db", str(db), "--out", str(tmp_path))
        asked = server.counts.by_endpoint[CHAT]
    assert result.exit_code == 0, result.output
    with storage.Store(db, read_only=True) as store:
        stored = len(store.samples())
    assert asked == stored  # 6 generated, k=6 for the original and each kept paraphrase: once
