"""An audit over a set of prompts against the scripted provider: one pooled test per
perturbation, the drill-down to the prompts that moved, resumable with no call asked twice."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dbpa.config import parse_config
from dbpa.plan import plan_audit
from flows._sampling import arm_labels
from flows.audit import audit
from storage import Store
from tests.pipeline.conftest import make_config
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
    one_answer_provider: ScriptedServer, tmp_path
):
    """The doctor answers as the original on every prompt, the comedian never does: with a
    margin far above the noise, equivalent and changed. On the one-answer provider, so the
    decisions are certain: under ``RULES`` the arms' seeds follow the server's random port,
    and on some ports the doctor's pooled test rejected (a true null, rejected at its level:
    two failures in about a dozen runs)."""
    raw = make_config(
        one_answer_provider,
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


def test_a_running_set_counts_every_prompts_arms_and_tests(provider: ScriptedServer, tmp_path):
    """A run's progress (``dbpa runs``) counts the arms and tests of every prompt."""
    from flows import _record as record

    config = _config(provider)
    plan = plan_audit(config)
    with Store(tmp_path / "p.duckdb") as store:
        record.start_run(store, plan, config, "r1", None, lambda _: None)
        run = store.runs().set_index("run_id").loc["r1"]
    assert run.outputs_planned == 15 * 8  # 5 prompts x 3 arms
    assert run.tests_planned == 2 + 10  # pooled + per prompt
    assert run.outputs_stored == 0
