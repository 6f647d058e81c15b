"""A sequential audit over a set of prompts against the scripted provider: each look fills
every prompt's arms of the open pooled tests, the pooled test of the look stops or goes on,
and the record keeps the looks, the stops and the drill-down."""

from __future__ import annotations

import dataclasses
import itertools

import duckdb
import numpy as np
import pandas as pd
import pytest

from dbpa.config import parse_config
from dbpa.plan import plan_audit
from dbpa.set_analysis import set_equivalence_p
from flows.audit import audit
from storage import Store
from tests.pipeline.conftest import follows_the_rule, make_config
from tests.pipeline.test_prompt_sets import PERSONAS, PROMPTS, THREE, _margin_by_hand, _shown
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

K_MAX = 16
SEQUENTIAL = {"first": 8, "looks": 2, "futility": 0.2}
"""Looks at 8 and 16 outputs per arm; weights 0.3 and 0.7."""


def _config(provider: ScriptedServer, **overrides):
    settings = {"sequential": SEQUENTIAL, "prompts": PROMPTS} | overrides
    raw = make_config(provider, n_permutations=999, perturbations=[PERSONAS], k=K_MAX, **settings)
    del raw["prompt"]
    return parse_config(raw)


def test_a_set_stops_each_pooled_test_at_its_look_and_saves_calls(
    one_answer_provider: ScriptedServer, tmp_path, capsys, monkeypatch
):
    """One answer per arm: the comedian's pooled test crosses at the first look (changed at
    8), the doctor's (its answers the original's on every prompt: no prompt varies over its
    relabellings, look p-value 1) stops there as futile; so every arm of the 5 prompts is
    sampled to 8, half the fixed design's calls. ``dbpa results`` says so."""
    from dbpa.cli._record import print_results

    provider = one_answer_provider
    db = tmp_path / "s.duckdb"
    outcome = audit(config=_config(provider), db=str(db))
    assert outcome.status == "completed"
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 3 * 8
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
        looks = store.sequential_looks(outcome.run_id)
        run = store.run(outcome.run_id)
        prompts = store.prompt_results(outcome.run_id)
    comedian, doctor = results.loc["persona-comedian"], results.loc["persona-doctor"]
    assert (comedian.stop_reason, comedian.stopped_at) == ("changed", 8)
    assert (doctor.stop_reason, doctor.stopped_at) == ("futile", 8)
    assert comedian.reject
    assert not doctor.reject
    assert doctor.p_value == 1.0
    # the family row points at the pooled test of the look: 5 prompts of 8 outputs per arm
    assert (results.n_prompts == 5).all()
    assert (results.k_a == 5 * 8).all()
    assert list(looks.k) == [8, 8]
    assert set(looks.test_id) == set(results.test_id)
    assert (run["outputs_used"], run["outputs_fixed"]) == (15 * 8, 15 * K_MAX)
    # the drill-down reads the prompts of the look it stopped at (min_j p_j / w_j: 1 look)
    moved = prompts[prompts.perturbation_id == "persona-comedian"]
    assert len(moved) == 5
    assert moved.moved.all()
    assert (moved.set_test_id == comedian.test_id).all()
    assert (moved.adjusted_p >= moved.p_value / 0.3 - 1e-12).all()
    assert not prompts[prompts.perturbation_id == "persona-doctor"].moved.any()
    from dbpa.cli._common import out

    monkeypatch.setattr(out, "width", 160)  # one line per perturbation (set at import)
    capsys.readouterr()
    print_results(db, outcome.run_id)
    shown = capsys.readouterr().out
    assert "stopped" in shown
    assert "8 changed" in next(x for x in shown.splitlines() if "persona-comedian" in x)
    assert "8 futile" in next(x for x in shown.splitlines() if "persona-doctor" in x)
    assert f"sequential: 120 outputs sampled against 240 at a fixed k={K_MAX}: 50% fewer" in shown


def test_an_open_pooled_test_samples_every_prompt_at_the_next_look(
    rotating_provider: ScriptedServer, tmp_path
):
    """Without futility the doctor's test stays open after the first look: its arms and the
    originals of all 5 prompts are filled to 16, the comedian's (stopped at 8) are not. A
    re-run asks for nothing and reaches the same stops. The rotating provider gives the
    doctor's arms exactly the original's texts (under ``RULES`` they are random draws, whose
    first look once called the doctor changed)."""
    provider = rotating_provider
    db = tmp_path / "s.duckdb"
    config = _config(provider, sequential={**SEQUENTIAL, "futility": False})
    outcome = audit(config=config, db=str(db))
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
        samples = store.samples()
    assert results.loc["persona-comedian", "stopped_at"] == 8
    assert results.loc["persona-doctor", "stopped_at"] == K_MAX
    assert results.loc["persona-doctor", "k_a"] == 5 * K_MAX
    per_arm = samples.groupby("arm_id").idx.max() + 1
    assert sorted(per_arm.value_counts().items()) == [(8, 5), (K_MAX, 10)]
    calls = provider.counts.total
    again = audit(config=config, db=str(db))
    assert provider.counts.total == calls
    columns = ["perturbation_id", "p_value", "adjusted_p", "stopped_at", "stop_reason", "test_id"]
    with Store(db, read_only=True) as store:
        pd.testing.assert_frame_equal(
            store.results(outcome.run_id)[columns], store.results(again.run_id)[columns]
        )


def _by_hand_equivalence_p(db, run_id: str) -> dict[str, float]:
    """perturbation id -> min_j p_eq,j / w_j over its stored looks, p_eq,j the set-level
    equivalence p-value of the intervals of the prompts of look j's pooled test (read from
    ``set_prompts``) at the stored margin."""
    with Store(db, read_only=True) as store:
        looks = store.sequential_looks(run_id)
        margin = store.results(run_id).set_index("perturbation_id").margin
    with duckdb.connect(str(db), read_only=True) as con:
        members = con.execute(
            "SELECT set_test_id, test_id FROM set_prompts ORDER BY set_test_id, position"
        ).fetchall()
    prompts: dict[str, list[str]] = {}
    for set_id, test_id in members:
        prompts.setdefault(set_id, []).append(test_id)
    found = {}
    for pid, taken in looks.groupby("perturbation_id"):
        with Store(db, read_only=True) as store:
            intervals = store.effect_intervals([i for s in taken.test_id for i in prompts[s]])
        p = [
            set_equivalence_p([intervals.get(i) for i in prompts[s]], margin[pid]) / w
            for s, w in zip(taken.test_id, taken.weight, strict=True)
        ]
        found[str(pid)] = min(min(p), 1.0)
    return found


def test_with_a_margin_no_pooled_test_stops_for_futility_and_the_looks_combine(
    rotating_provider: ScriptedServer, tmp_path, caplog
):
    """A margin of 0.5 over 5 prompts, the comedian answering one text and the original and
    the doctor two in turn: the comedian's pooled test crosses at 8 (changed); the
    doctor's (its answers the original's on every prompt) would stop as futile at 8 without
    a margin but samples to 16, and its equivalence p-value is min_j p_eq,j / w_j over its
    two looks, each the set-level test of its prompts' intervals at that look's k. A re-run
    asks for nothing and decides the same."""
    provider = rotating_provider
    db = tmp_path / "m.duckdb"
    config = _config(provider, equivalence={"margin": 0.5})
    with caplog.at_level("INFO"):
        outcome = audit(config=config, db=str(db))
    assert outcome.status == "completed"
    assert "sequential: no futility stops with an equivalence margin" in caplog.text
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
        looks = store.sequential_looks(outcome.run_id)
    comedian, doctor = results.loc["persona-comedian"], results.loc["persona-doctor"]
    assert (comedian.stop_reason, comedian.stopped_at, comedian.decision) == (
        "changed",
        8,
        "changed",
    )
    assert (doctor.stop_reason, doctor.stopped_at) == ("k_max", K_MAX)
    assert list(looks[looks.perturbation_id == "persona-doctor"].k) == [8, K_MAX]
    # 5 prompts: the original and the doctor's arms to 16, the comedian's to 8
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * (2 * K_MAX + 8)
    assert (results.margin == 0.5).all()
    by_hand = _by_hand_equivalence_p(db, outcome.run_id)
    for pid, p in by_hand.items():
        assert results.loc[pid, "equivalence_p"] == pytest.approx(p, rel=1e-12), pid
    assert doctor.equivalence_p < 1  # the second look's p_eq / 0.7, not 1
    assert doctor.adjusted_equivalence_p <= 0.05
    assert doctor.decision == "equivalent"
    assert not doctor.reject

    calls = provider.counts.total
    again = audit(config=config, db=str(db))
    assert provider.counts.total == calls
    columns = ["p_value", "stopped_at", "stop_reason", "equivalence_p", "margin", "decision"]
    with Store(db, read_only=True) as store:
        pd.testing.assert_frame_equal(
            store.results(again.run_id).set_index("perturbation_id")[columns], results[columns]
        )


def test_a_set_margin_is_calibrated_at_the_originals_final_k(provider: ScriptedServer, tmp_path):
    """Replicates over 3 prompts: each prompt's 2 replicate arms follow its original (the
    same outputs), the margin is the 0.95 quantile of the pairs' mean distances over the
    prompts at that k, and each decision follows from the combined equivalence p-value. Under
    ``RULES`` the stops vary with the server's port, so the test reads k from the record."""
    config = _config(provider, prompts=THREE, equivalence={"replicates": 2})
    plan = plan_audit(config)
    db = tmp_path / "r.duckdb"
    outcome = audit(config=config, db=str(db))
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
    assert set(results.stop_reason) <= {"changed", "k_max"}  # no futility stop
    originals = [t.original for t in plan.prompt_tests if t.perturbation.id == "persona-doctor"]
    arms = [[o.arm_id, *(a.arm_id for a in plan.replicates_of(o))] for o in originals]
    with duckdb.connect(str(db), read_only=True) as con:
        counts = dict(
            con.execute("SELECT arm_id, count(*) FROM samples GROUP BY arm_id").fetchall()
        )
    k = counts[arms[0][0]]
    assert k in (8, K_MAX)
    assert k == results.stopped_at.max()  # the original samples while any test is open
    assert [counts[a] for of_prompt in arms for a in of_prompt] == [k] * 9
    at_k = dataclasses.replace(plan, k=k)
    margin = _margin_by_hand(db, at_k, [list(itertools.combinations(a, 2)) for a in arms])
    np.testing.assert_allclose(results.margin, margin, rtol=1e-6)
    assert (results.margin_source == "replicates").all()
    assert (results.margin_pairs == 3).all()
    for pid, p in _by_hand_equivalence_p(db, outcome.run_id).items():
        r = results.loc[pid]
        assert r.equivalence_p == pytest.approx(p, rel=1e-12), pid
    follows_the_rule(results, 0.05)
    basis = "the 95th percentile of the distances between 3 pairs of samples of the unperturbed"
    assert f"{basis} model, each the mean over the 3 prompts" in _shown(db, outcome.run_id)
