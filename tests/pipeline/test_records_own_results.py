"""A record's results are computed from that record's outputs, whatever Prefect's cache holds.

The provider ignores seeds (as most hosted APIs may), so two records of one config hold the
same arm and test ids over different texts; a cache keyed by ids alone replayed the first
record's statistics into the second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbpa.analysis import run_test
from dbpa.config import AuditConfig, parse_config
from dbpa.plan import plan_audit
from flows.audit import audit
from storage import Store
from tests.pipeline.conftest import RULES, make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _texts(db: Path) -> list[str]:
    with Store(db, read_only=True) as store:
        return store.samples().sort_values(["arm_id", "idx"]).text.tolist()


def _assert_own_results(db: Path, config: AuditConfig) -> dict[str, float]:
    """Every stored test equals the test recomputed from this record's own vectors."""
    plan = plan_audit(config)
    with Store(db, read_only=True) as store:
        stored = store.tests([t.test_id for t in plan.tests], nulls=False).set_index("test_id")
        vectors = store.arms_vectors([a.arm_id for a in plan.arms], plan.embedder, plan.k)
    statistics = {}
    for t in plan.tests:
        own = run_test(
            t.test_id,
            vectors[t.original.arm_id],
            vectors[t.perturbed.arm_id],
            original_arm=t.original.arm_id,
            perturbed_arm=t.perturbed.arm_id,
            embedder=plan.embedder,
            analysis=config.analysis,
        )
        row = stored.loc[t.test_id]
        assert (row.statistic, row.p_value) == pytest.approx((own.statistic, own.p_value))
        statistics[t.test_id] = float(row.statistic)
    return statistics


def test_two_records_of_one_config_each_hold_their_own_test_results(tmp_path):
    with ScriptedServer(rules=RULES, embedding_dimension=24, ignore_seed=True) as server:
        config = parse_config(make_config(server))
        first, second = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
        audit(config=config, db=str(first))
        audit(config=config, db=str(second))
        assert _texts(first) != _texts(second)  # the same ids over other outputs
        ours, theirs = _assert_own_results(second, config), _assert_own_results(first, config)
        assert ours != theirs
        second.unlink()  # start over: sampled again, tested again
        audit(config=config, db=str(second))
        assert _texts(second) != _texts(first)
        _assert_own_results(second, config)


def test_a_rerun_on_the_same_record_tests_nothing_again(tmp_path, monkeypatch):
    """The record is the first cache: its stored tests are read, not recomputed."""
    with ScriptedServer(rules=RULES, embedding_dimension=24, ignore_seed=True) as server:
        config = parse_config(make_config(server))
        db = tmp_path / "a.duckdb"
        audit(config=config, db=str(db))
        calls = []
        monkeypatch.setattr("tasks.permutation.run_test", lambda *a, **k: calls.append(a))
        audit(config=config, db=str(db))
        assert calls == []
        _assert_own_results(db, config)


def test_another_seed_on_the_same_record_samples_and_tests_anew(tmp_path):
    """The seed seeds every request, so it is part of every arm: ``--set seed=N`` on an
    existing record asks the model again (it reused the old seed's outputs)."""
    with ScriptedServer(rules=RULES, embedding_dimension=24) as server:
        db = tmp_path / "a.duckdb"
        first = parse_config(make_config(server, seed=7))
        audit(config=first, db=str(db))
        calls = server.counts.by_endpoint["/v1/chat/completions"]
        second = parse_config(make_config(server, seed=8))
        audit(config=second, db=str(db))
        assert server.counts.by_endpoint["/v1/chat/completions"] == 2 * calls
        arms = {a.arm_id for a in plan_audit(first).arms}
        assert arms.isdisjoint(a.arm_id for a in plan_audit(second).arms)
        _assert_own_results(db, second)
        seeds = {int(r["seed"]) for r in server.counts.requests}
        assert len(seeds) == 2 * calls  # every request of both runs under its own seed
