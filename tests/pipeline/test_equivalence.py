"""Equivalence decisions through the audit flow: intervals, margins, replicate arms."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dbpa.cli import app
from dbpa.config import parse_config
from flows.audit import audit
from storage import Store
from tests.pipeline.conftest import follows_the_rule, make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

CONTROLS = ["persona-doctor", "persona-nurse"]
TARGETS = ["persona-comedian", "persona-child"]
ALPHA = 0.05
"""The arms' seeds depend on the scripted server's port, so the draws differ between runs: a
control is now and then rejected by chance, and at k=8 (p >= 1/200, two components of auto)
a target now and then misses Holm's level; so decisions are checked against the rule, and
only what the distances make certain is named (a target is never within these margins)."""


def _results(db, run_id) -> pd.DataFrame:
    with Store(db, read_only=True) as store:
        return store.results(run_id).set_index("perturbation_id")


def test_every_test_carries_an_interval_and_no_margin_means_no_three_way_decision(
    one_answer_provider: ScriptedServer, tmp_path
):
    """On the one-answer provider: under ``RULES`` a control's effect at k=8 is now and then
    as large as a target's (the arms' seeds depend on the server's port)."""
    provider = one_answer_provider
    outcome = audit(config=parse_config(make_config(provider)), db=str(tmp_path / "a.duckdb"))
    df = _results(tmp_path / "a.duckdb", outcome.run_id)
    assert df.decision.isna().all()
    assert df.margin.isna().all()
    assert (df.interval_confidence == 0.90).all()
    assert (df.effect_low <= df.effect_high).all()
    # the targets' answers differ entirely from the original's: their interval excludes 0;
    # the controls repeat the original's one text: no outputs seen bound the distance
    assert (df.loc[TARGETS, "effect_low"] > 0).all()
    assert (df.loc[CONTROLS, "effect_high"] == np.inf).all()
    assert df.loc[CONTROLS, "effect_low"].max() < df.loc[TARGETS, "effect_low"].min()


def test_replicate_arms_calibrate_the_margin(provider: ScriptedServer, tmp_path):
    config = parse_config(make_config(provider, equivalence={"replicates": 3}))
    outcome = audit(config=config, db=str(tmp_path / "a.duckdb"))
    # 5 arms of the family and 3 replicates of the original, k=8 each
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 8 * 8
    df = _results(tmp_path / "a.duckdb", outcome.run_id)
    assert (df.margin_source == "replicates").all()
    assert (df.margin_pairs == 6).all()  # every two of the original and its 3 replicates
    assert (df.margin_quantile == 0.95).all()
    assert df.margin.nunique() == 1
    assert df.margin.iloc[0] > 0
    assert (df.loc[TARGETS, "decision"] != "equivalent").all()
    follows_the_rule(df, ALPHA)
    # the replicates are sampled with seeds of their own: their texts are not the original's
    with duckdb.connect(str(tmp_path / "a.duckdb"), read_only=True) as con:
        arms = con.execute("SELECT count(DISTINCT arm_id) FROM samples").fetchone()
    assert arms == (8,)


def test_a_multiple_scales_the_calibrated_margin_without_a_model_call(
    provider: ScriptedServer, tmp_path
):
    db = tmp_path / "a.duckdb"
    once = audit(config=parse_config(make_config(provider, equivalence=True)), db=str(db))
    calls = provider.counts.by_endpoint["/v1/chat/completions"]
    config = make_config(provider, equivalence={"multiple": 2.5})
    twice = audit(config=parse_config(config), db=str(db))
    assert provider.counts.by_endpoint["/v1/chat/completions"] == calls
    before, after = _results(db, once.run_id), _results(db, twice.run_id)
    np.testing.assert_allclose(after.margin, 2.5 * before.margin)
    assert (after.margin_multiple == 2.5).all()
    assert (before.margin_multiple == 1.0).all()
    follows_the_rule(after, ALPHA)
    assert "2.5 x the 95th percentile" in Path(twice.reports["md"]).read_text()
    shown = CliRunner().invoke(app, ["results", twice.run_id, "--db", str(db)]).output
    assert "2.5 x the 95th percentile" in " ".join(shown.split())


def test_outputs_that_never_vary_calibrate_a_margin_of_0_and_nothing_is_equivalent(
    one_answer_provider, tmp_path, caplog
):
    """A deterministic model's replicates all say the same: the margin is 0, no distance can be
    shown below it, and the audit still decides every change (a warning says why)."""
    db = tmp_path / "a.duckdb"
    config = make_config(one_answer_provider, n_permutations=999, equivalence={"replicates": 2})
    with caplog.at_level("WARNING"):
        outcome = audit(config=parse_config(config), db=str(db))
    assert "calibrate a margin of 0" in caplog.text
    df = _results(db, outcome.run_id)
    assert (df.margin == 0).all()
    assert (df.equivalence_p == 1).all()
    assert (df.loc[CONTROLS, "decision"] == "inconclusive").all()
    assert (df.loc[TARGETS, "decision"] == "changed").all()
    assert "nothing can be shown equivalent" in Path(outcome.reports["md"]).read_text()
    shown = CliRunner().invoke(app, ["results", outcome.run_id, "--db", str(db)]).output
    shown = " ".join(shown.split())
    assert "equivalence margin: 0 on the distance scale" in shown
    assert "nothing can be shown equivalent" in shown
    assert "would likely settle" not in shown


def test_arms_of_one_text_each_show_no_margin_however_wide(
    one_answer_provider: ScriptedServer, tmp_path
):
    """Each arm repeats one text: no reweighting of the outputs seen puts the arms a margin of
    5 apart (nor does any other), so nothing can be told about a margin that wide and
    nothing is shown equivalent; the targets' change tests still reject (on the one-answer
    provider, whatever the server's port). Equivalence outranking a change is
    ``tests/stats/test_equivalence.py``'s."""
    provider = one_answer_provider
    config = parse_config(make_config(provider, equivalence={"margin": 5.0}))
    outcome = audit(config=config, db=str(tmp_path / "a.duckdb"))
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 8  # no replicate arm
    df = _results(tmp_path / "a.duckdb", outcome.run_id)
    assert (df.loc[TARGETS, "decision"] == "changed").all()
    assert (df.loc[CONTROLS, "decision"] == "inconclusive").all()
    assert (df.margin == 5.0).all()
    assert (df.margin_source == "fixed").all()
    assert df.margin_pairs.isna().all()
    np.testing.assert_allclose(df.equivalence_p, 1.0)
    shown = CliRunner().invoke(app, ["results", outcome.run_id, "--db", str(tmp_path / "a.duckdb")])
    assert "would likely settle" not in " ".join(shown.output.split())


def test_a_margin_below_every_effect_makes_nothing_equivalent(provider: ScriptedServer, tmp_path):
    config = parse_config(make_config(provider, equivalence={"margin": 1e-9}))
    outcome = audit(config=config, db=str(tmp_path / "a.duckdb"))
    df = _results(tmp_path / "a.duckdb", outcome.run_id)
    assert (df.decision != "equivalent").all()
    follows_the_rule(df, ALPHA)


def test_controls_calibrate_the_margin(provider: ScriptedServer, tmp_path):
    config = parse_config(make_config(provider, equivalence={"margin": "controls"}))
    outcome = audit(config=config, db=str(tmp_path / "a.duckdb"))
    df = _results(tmp_path / "a.duckdb", outcome.run_id)
    assert (df.margin_source == "controls").all()
    assert (df.margin_pairs == len(CONTROLS)).all()
    assert (df.loc[TARGETS, "decision"] != "equivalent").all()
    follows_the_rule(df, ALPHA)


@pytest.mark.parametrize(
    "as_before",
    [
        "DELETE FROM effect_intervals",  # a record written before intervals were
        "UPDATE effect_intervals SET noise = NULL, directions = NULL, plug_in = NULL, "
        "guard_margins = NULL, guard_p = NULL, "
        "high = 99, method = 'upper: percentile bootstrap'",  # before the boundary test
        "UPDATE effect_intervals SET guard_margins = NULL, guard_p = NULL, high = 99",
        "UPDATE effect_intervals SET distances = NULL, high = 99",
    ],
    ids=[
        "no interval",
        "bootstrap-era interval",
        "interval without the guard",
        "interval without distances",
    ],
)
def test_tests_stored_without_a_current_interval_get_one_without_a_model_call(
    provider: ScriptedServer, tmp_path, as_before: str
):
    """The interval is computed again from the stored embeddings, with the same result as
    in a fresh run, and the decisions rest on it."""
    db = tmp_path / "a.duckdb"
    config = parse_config(make_config(provider, equivalence={"margin": "replicates"}))
    first = audit(config=config, db=str(db))
    before = _results(db, first.run_id)
    with duckdb.connect(str(db)) as con:
        con.execute(as_before)
    calls = provider.counts.by_endpoint["/v1/chat/completions"]
    second = audit(config=config, db=str(db))
    assert provider.counts.by_endpoint["/v1/chat/completions"] == calls
    after = _results(db, second.run_id)
    for column in ("p_value", "effect_high", "equivalence_p"):
        pd.testing.assert_series_equal(after[column], before[column])
    with duckdb.connect(str(db), read_only=True) as con:
        methods = {m for (m,) in con.execute("SELECT method FROM effect_intervals").fetchall()}
    assert all("least-favourable" in m for m in methods), methods
