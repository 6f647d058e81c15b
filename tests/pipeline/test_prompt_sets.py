"""An audit over a set of prompts against the scripted provider: one pooled test per
perturbation, the drill-down to the prompts that moved, resumable with no call asked twice."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dbpa.cli import app
from dbpa.config import parse_config
from dbpa.plan import AuditPlan, plan_audit
from dbpa.set_analysis import set_equivalence_p
from flows._sampling import arm_labels
from flows.audit import audit
from storage import Store
from tests.pipeline.conftest import follows_the_rule, make_config
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")

PROMPTS = [
    {"id": "flu", "prompt": "My flu has lasted two days. Should I see a doctor?"},
    {"id": "cough", "prompt": "I have had a cough for a week. What should I do?"},
    "My child has a fever. What should I do?",
    "I sprained my ankle. Should I rest it?",
    "I feel dizzy when I stand up. Is it serious?",
]
PERSONAS = {
    "kind": "personas",
    "values": [
        {"value": "doctor", "label": "control"},
        {"value": "comedian", "label": "target"},
    ],
}


def _config(provider: ScriptedServer):
    raw = make_config(provider, n_permutations=999, prompts=PROMPTS, perturbations=[PERSONAS])
    del raw["prompt"]
    return parse_config(raw)


def test_a_prompt_set_is_one_pooled_test_per_perturbation_with_its_drilldown(
    one_answer_provider: ScriptedServer, tmp_path
):
    provider = one_answer_provider
    config = _config(provider)
    db = tmp_path / "s.duckdb"
    outcome = audit(config=config, db=str(db))
    assert outcome.status == "completed"
    # 5 prompts x (original + 2 personas) arms x k=8, one choice per request
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 5 * 3 * 8
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
        prompts = store.prompt_results(outcome.run_id)
    assert list(results.index) == ["persona-doctor", "persona-comedian"]
    assert (results.n_prompts == 5).all()
    assert results.loc["persona-comedian", "reject"]
    assert not results.loc["persona-doctor", "reject"]
    assert results.loc["persona-comedian", "prompts_moved"] == 5
    assert results.loc["persona-doctor", "prompts_moved"] == 0
    assert len(prompts) == 10
    assert list(prompts.prompt_id[:5]) == ["flu", "cough", "p3", "p4", "p5"]
    comedian = prompts[prompts.perturbation_id == "persona-comedian"]
    assert comedian.moved.all()
    assert (comedian.adjusted_p <= 0.05).all()
    doctor = prompts[prompts.perturbation_id == "persona-doctor"]
    assert not doctor.moved.any()
    assert doctor.adjusted_p.isna().all()  # not selected: its prompts are not tested
    assert comedian.effect_estimate.notna().all()  # each prompt's own interval
    _check_reports(outcome.reports)


def _check_reports(reports: dict[str, str]) -> None:
    """The heatmap (10 cells, the comedian's 5 framed as moved) and the movers, in HTML,
    Markdown and JSON; the HTML under the report's strict CSP."""
    html = Path(reports["html"]).read_text()
    assert "Content-Security-Policy" in html
    assert "default-src &#39;none&#39;" in html
    heatmap = html[
        html.index('<table class="heatmap">') : html.index(
            "</table>", html.index('<table class="heatmap">')
        )
    ]
    assert heatmap.count('class="num heat') == 10
    assert heatmap.count(' moved"') == 5
    assert heatmap.count('data-moved="1"') == 5
    assert 'id="prompt-filter"' in html
    assert "persona-comedian (openai/scripted): 5 of 5 prompts moved" in html
    assert "Knock knock" in html  # an answer that moved, under the prompt that moved
    assert "the pooled test over 5 prompts" in html  # its figure: not the first prompt's
    md = Path(reports["md"]).read_text()
    assert "## Prompts x perturbations" in md
    assert "| `flu` |" in md
    assert md.count("*") >= 5
    data = json.loads(Path(reports["json"]).read_text())["prompt_set"]
    assert [p["prompt_id"] for p in data["prompts"]] == ["flu", "cough", "p3", "p4", "p5"]
    by_id = {p["perturbation_id"]: p for p in data["perturbations"]}
    assert by_id["persona-comedian"]["prompts_moved"] == 5
    assert by_id["persona-doctor"]["prompts_moved"] == 0
    assert all(c["moved"] for c in by_id["persona-comedian"]["cells"])
    assert by_id["persona-comedian"]["movers"][0]["after"][0]["text"] == "Knock knock, it's flu."


def test_a_rerun_of_a_prompt_set_asks_nothing_and_decides_the_same(
    provider: ScriptedServer, tmp_path
):
    config = _config(provider)
    db = tmp_path / "s.duckdb"
    first = audit(config=config, db=str(db))
    calls = provider.counts.total
    second = audit(config=config, db=str(db))
    assert provider.counts.total == calls
    with Store(db, read_only=True) as store:
        columns = ["perturbation_id", "p_value", "adjusted_p", "reject", "prompts_moved"]
        pd.testing.assert_frame_equal(
            store.results(first.run_id)[columns], store.results(second.run_id)[columns]
        )
        a = store.prompt_results(first.run_id)[["prompt_id", "p_value", "moved"]]
        b = store.prompt_results(second.run_id)[["prompt_id", "p_value", "moved"]]
    pd.testing.assert_frame_equal(a, b)


def test_every_arm_is_named_by_its_prompt(provider: ScriptedServer):
    labels = set(arm_labels(plan_audit(_config(provider))).values())
    assert "original on flu (openai/scripted)" in labels
    assert "persona-comedian on p5 (openai/scripted)" in labels


def test_a_margin_decides_each_perturbation_over_the_set(
    rotating_provider: ScriptedServer, tmp_path
):
    """The doctor answers as the original on every prompt (two texts in turn), the comedian
    never does: with a margin far above the noise, equivalent and changed. On the rotating
    provider the decisions are certain: under ``RULES`` the arms' seeds follow the server's
    random port, and on some ports the doctor's pooled test rejected (a true null, rejected
    at its level: two failures in about a dozen runs)."""
    raw = make_config(
        rotating_provider,
        n_permutations=999,
        prompts=PROMPTS,
        perturbations=[PERSONAS],
        equivalence={"margin": 0.5},
        k=12,
    )
    del raw["prompt"]
    db = tmp_path / "e.duckdb"
    outcome = audit(config=parse_config(raw), db=str(db))
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
    assert results.loc["persona-comedian", "decision"] == "changed"
    assert results.loc["persona-doctor", "decision"] == "equivalent"
    assert (results.margin == 0.5).all()
    assert results.loc["persona-doctor", "equivalence_p"] <= 0.05
    _check_set_decisions(db, plan_audit(parse_config(raw)), results)


def test_answers_that_never_vary_are_not_shown_equivalent_over_a_set(
    one_answer_provider: ScriptedServer, tmp_path
):
    """The doctor answers the original's one text every time on every prompt: answers that
    never vary show nothing about their noise, so the set is not shown equivalent however
    wide the margin, as one such prompt is not (its interval's upper bound is infinite).
    The pooled test alone showed such a set equivalent; the joint guard cannot tilt arms
    whose outputs all coincide."""
    raw = make_config(
        one_answer_provider,
        n_permutations=199,
        prompts=PROMPTS[:3],
        perturbations=[PERSONAS],
        equivalence={"margin": 0.5},
        k=8,
    )
    del raw["prompt"]
    outcome = audit(config=parse_config(raw), db=str(tmp_path / "c.duckdb"))
    with Store(tmp_path / "c.duckdb", read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
    assert results.loc["persona-comedian", "decision"] == "changed"
    assert results.loc["persona-doctor", "decision"] == "inconclusive"
    assert results.loc["persona-doctor", "equivalence_p"] == 1.0


def test_a_running_set_counts_every_prompts_arms_and_tests(provider: ScriptedServer, tmp_path):
    """A run's progress (``dbpa runs``) counts the arms and tests of every prompt."""
    from flows import record

    config = _config(provider)
    plan = plan_audit(config)
    with Store(tmp_path / "p.duckdb") as store:
        record.start_run(store, plan, config, "r1", None, lambda _: None)
        run = store.runs().set_index("run_id").loc["r1"]
    assert run.outputs_planned == 15 * 8  # 5 prompts x 3 arms
    assert run.tests_planned == 2 + 10  # pooled + per prompt
    assert run.outputs_stored == 0


THREE = PROMPTS[:3]
TWO_CONTROLS = {
    "kind": "personas",
    "values": [
        {"value": "doctor", "label": "control"},
        {"value": "nurse", "label": "control"},
        {"value": "comedian", "label": "target"},
    ],
}


def _three_prompts(provider: ScriptedServer, **overrides):
    raw = make_config(provider, n_permutations=999, prompts=THREE, **overrides)
    del raw["prompt"]
    return parse_config(raw)


def _plug_in(a: np.ndarray, b: np.ndarray) -> float:
    """The plug-in energy distance by its definition: 2 mean|a - b| - mean|a - a'| -
    mean|b - b'|, self-pairs included, Euclidean."""

    def mean(x: np.ndarray, y: np.ndarray) -> float:
        return float(np.linalg.norm(x[:, None, :] - y[None, :, :], axis=2).mean())

    a, b = a.astype(np.float64), b.astype(np.float64)
    return max(2 * mean(a, b) - mean(a, a) - mean(b, b), 0.0)


def _margin_by_hand(
    db: Path, plan: AuditPlan, prompts: Sequence[Sequence[tuple[str, str]]]
) -> float:
    """The 0.95 quantile over the pairs of each pair's mean distance over the prompts, from
    the stored vectors (pair j of every prompt is one set-level distance)."""
    ids = sorted({a for pairs in prompts for pair in pairs for a in pair})
    with Store(db, read_only=True) as store:
        vectors = store.arms_vectors(ids, plan.embedder, plan.k)
    assert set(vectors) == set(ids)
    distances = np.array(
        [[_plug_in(vectors[a], vectors[b]) for a, b in pairs] for pairs in prompts]
    )
    return float(np.quantile(distances.mean(axis=0), 0.95))


def _check_set_decisions(db: Path, plan: AuditPlan, results: pd.DataFrame) -> None:
    """Each perturbation's equivalence p-value is the set-level test of its prompts'
    stored intervals at the stored margin, and its decision follows the rule."""
    with Store(db, read_only=True) as store:
        intervals = store.effect_intervals([t.test_id for t in plan.prompt_tests])
    for t in plan.tests:
        r = results.loc[t.perturbation.id]
        members = plan.set_members[t.test_id]
        p = set_equivalence_p([intervals.get(m.test_id) for m in members], r.margin)
        assert r.equivalence_p == pytest.approx(p)
    follows_the_rule(results, 0.05)


def _shown(db: Path, run_id: str) -> str:
    result = CliRunner().invoke(app, ["results", run_id, "--db", str(db)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_replicate_arms_of_every_prompt_calibrate_the_set_margin(
    provider: ScriptedServer, tmp_path
):
    config = _three_prompts(provider, perturbations=[PERSONAS], equivalence={"replicates": 2})
    plan = plan_audit(config)
    db = tmp_path / "r.duckdb"
    outcome = audit(config=config, db=str(db))
    # 3 prompts x (original, 2 personas, 2 replicates of the original) x k=8
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 3 * 5 * 8
    originals = [t.original for t in plan.prompt_tests if t.perturbation.id == "persona-doctor"]
    arms = [[o.arm_id, *(a.arm_id for a in plan.replicates_of(o))] for o in originals]
    with duckdb.connect(str(db), read_only=True) as con:
        counts = dict(
            con.execute("SELECT arm_id, count(*) FROM samples GROUP BY arm_id").fetchall()
        )
    assert len(counts) == 15
    for of_prompt in arms:  # each prompt's original and its own 2 replicate arms, k each
        assert len(set(of_prompt)) == 3
        assert [counts[a] for a in of_prompt] == [8, 8, 8]
    margin = _margin_by_hand(db, plan, [list(itertools.combinations(a, 2)) for a in arms])
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
    assert margin > 0
    np.testing.assert_allclose(results.margin, margin, rtol=1e-6)
    assert (results.margin_source == "replicates").all()
    assert (results.margin_pairs == 3).all()  # every two of the original and its 2 replicates
    assert (results.margin_quantile == 0.95).all()
    assert results.loc["persona-comedian", "decision"] == "changed"
    _check_set_decisions(db, plan, results)
    basis = "the 95th percentile of the distances between 3 pairs of samples of the unperturbed"
    assert f"{basis} model, each the mean over the 3 prompts" in _shown(db, outcome.run_id)
    md = " ".join(Path(outcome.reports["md"]).read_text().split())
    assert "the original and its replicates), each the mean over the 3 prompts, over 3 pairs" in md

    calls = provider.counts.total
    again = audit(config=config, db=str(db))
    assert provider.counts.total == calls
    with Store(db, read_only=True) as store:
        rerun = store.results(again.run_id).set_index("perturbation_id")
    columns = ["margin", "margin_pairs", "equivalence_p", "decision"]
    pd.testing.assert_frame_equal(rerun[columns], results[columns])


def test_controls_of_every_prompt_calibrate_the_set_margin(provider: ScriptedServer, tmp_path):
    config = _three_prompts(
        provider, perturbations=[TWO_CONTROLS], equivalence={"margin": "controls"}
    )
    plan = plan_audit(config)
    db = tmp_path / "c.duckdb"
    outcome = audit(config=config, db=str(db))
    # 3 prompts x (original and 3 personas) x k=8: no replicate arm
    assert provider.counts.by_endpoint["/v1/chat/completions"] == 3 * 4 * 8
    assert plan.replicates == {}
    controls = [
        [(t.original.arm_id, t.perturbed.arm_id) for t in plan.set_members[pooled.test_id]]
        for pooled in plan.tests
        if pooled.perturbation.label == "control"
    ]
    prompts = [list(pairs) for pairs in zip(*controls, strict=True)]  # per prompt: its 2 controls
    margin = _margin_by_hand(db, plan, prompts)
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
    np.testing.assert_allclose(results.margin, margin, rtol=1e-6)
    assert (results.margin_source == "controls").all()
    assert (results.margin_pairs == 2).all()
    assert results.loc["persona-comedian", "decision"] == "changed"
    _check_set_decisions(db, plan, results)
    assert "the original and 2 control(s), each the mean over the 3 prompts" in _shown(
        db, outcome.run_id
    )
    calls = provider.counts.total
    audit(config=config, db=str(db))
    assert provider.counts.total == calls


def test_outputs_that_never_vary_calibrate_a_set_margin_of_0(
    one_answer_provider: ScriptedServer, tmp_path, caplog
):
    config = _three_prompts(
        one_answer_provider, perturbations=[PERSONAS], equivalence={"replicates": 2}
    )
    db = tmp_path / "z.duckdb"
    with caplog.at_level("WARNING"):
        outcome = audit(config=config, db=str(db))
    assert "calibrate a margin of 0" in caplog.text
    with Store(db, read_only=True) as store:
        results = store.results(outcome.run_id).set_index("perturbation_id")
    assert (results.margin == 0).all()
    assert (results.equivalence_p == 1).all()
    assert results.loc["persona-comedian", "decision"] == "changed"
    assert results.loc["persona-doctor", "decision"] == "inconclusive"
    assert "nothing can be shown equivalent" in Path(outcome.reports["md"]).read_text()
    assert "nothing can be shown equivalent" in _shown(db, outcome.run_id)


def test_a_replicate_missing_on_one_prompt_leaves_its_pairs_out_on_every_prompt(
    provider: ScriptedServer,
):
    """Replicate 2 of the second prompt has no outputs (its model failed): the pairs with
    replicate 2 are left out of the set-level distances (every prompt's), the one of the
    original and replicate 1 remains, its mean over the three prompts the margin."""
    from flows import record

    config = _three_prompts(provider, perturbations=[PERSONAS], equivalence={"replicates": 2})
    plan = plan_audit(config)
    originals = [t.original for t in plan.prompt_tests if t.perturbation.id == "persona-doctor"]
    rng = np.random.default_rng(3)
    vectors = {a.arm_id: rng.normal(size=(plan.k, 4)).astype(np.float32) for a in plan.arms}
    del vectors[plan.replicates_of(originals[1])[1].arm_id]

    class Stored:
        def arms_vectors(self, arm_ids, embedder, k):
            assert (embedder, k) == (plan.embedder, plan.k)
            return {a: vectors[a] for a in arm_ids if a in vectors}

    assert config.equivalence is not None
    margin = record._margin(
        plan, Stored(), config.equivalence, plan.families[0], list(plan.tests), print, plan.k
    )
    first = [vectors[plan.replicates_of(o)[0].arm_id] for o in originals]
    want = np.mean([_plug_in(vectors[o.arm_id], r) for o, r in zip(originals, first, strict=True)])
    assert margin.pairs == 1
    assert margin.value == pytest.approx(want, rel=1e-6)
    assert margin.source == "replicates"
