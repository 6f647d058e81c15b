"""A sequential audit over a set of prompts against the scripted provider: each look fills
every prompt's arms of the open pooled tests, the pooled test of the look stops or goes on,
and the record keeps the looks, the stops and the drill-down."""

from __future__ import annotations

import pandas as pd
import pytest

from dbpa.config import parse_config
from flows.audit import audit
from storage import Store
from tests.pipeline.conftest import make_config
from tests.pipeline.test_prompt_sets import PERSONAS, PROMPTS
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

K_MAX = 16
SEQUENTIAL = {"first": 8, "looks": 2, "futility": 0.2}
"""Looks at 8 and 16 outputs per arm; weights 0.3 and 0.7."""


def _config(provider: ScriptedServer, **overrides):
    settings = {"sequential": SEQUENTIAL} | overrides
    raw = make_config(
        provider, n_permutations=999, prompts=PROMPTS, perturbations=[PERSONAS], k=K_MAX, **settings
    )
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
    provider: ScriptedServer, tmp_path
):
    """Without futility the doctor's test stays open after the first look: its arms and the
    originals of all 5 prompts are filled to 16, the comedian's (stopped at 8) are not. A
    re-run asks for nothing and reaches the same stops."""
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
