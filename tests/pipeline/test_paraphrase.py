"""Generated paraphrases in the audit flow: generated once, stored with their generator,
filtered by embedding similarity, and the dropped ones kept in the run's config."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from dbpa.config import parse_config
from dbpa.generation import GENERATION_EPOCH, dropped_paraphrases, generator_jobs
from dbpa.plan import plan_audit
from flows.audit import AuditIncomplete, audit
from storage import Store
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.scripted_server import Fault, Rule, ScriptedServer

pytestmark = pytest.mark.usefixtures("prefect_harness")  # not a temporary server of its own

PROMPT = "My flu has lasted two days. Should I see a doctor?"
INSTRUCTION = "Paraphrase this question: {prompt}"
# What the scripted generator writes, with equal chances: two paraphrases (one quoted, one
# numbered) and the original itself.
GENERATED = (
    ('"After two days of flu, should I visit a doctor?"', 1),
    ("1. Two days of flu now: do I need a doctor?", 1),
    (PROMPT, 1),
)
CLEANED = (
    "After two days of flu, should I visit a doctor?",
    "Two days of flu now: do I need a doctor?",
)


@pytest.fixture
def generator() -> Iterator[ScriptedServer]:
    rules = (Rule("Paraphrase this question", GENERATED), *RULES)
    with ScriptedServer(rules=rules, embedding_dimension=24) as server:
        yield server


def _config(server: ScriptedServer, **spec: object) -> dict:
    generator = {
        "model": "openai/scripted",
        "name": "generator",
        "api_base": server.api_base,
        "api_key_env": KEY_ENV,
        "max_n": 1,
    }
    paraphrase = {"kind": "paraphrase", "n": 6, "model": generator, "instruction": INSTRUCTION}
    return make_config(server, perturbations=[{**paraphrase, **spec}], n_permutations=999)


def _config_of(store: Store, run_id: str) -> dict:
    config = store.run(run_id)["config"]
    return json.loads(config) if isinstance(config, str) else config


def _generation_requests(server: ScriptedServer) -> int:
    return sum(n for p, n in server.counts.by_prompt.items() if p.startswith("Paraphrase this"))


def test_paraphrases_are_generated_once_and_stored_with_their_generator(generator, tmp_path):
    config = parse_config(_config(generator, seed=3))
    db = tmp_path / "a.duckdb"
    first = audit(config=config, db=str(db))
    assert first.status == "completed"
    assert _generation_requests(generator) == 6
    with Store(db, read_only=True) as store:
        family = store.results(first.run_id)
        (job,) = generator_jobs(config)
        arm = store.arms([job.arm.arm_id]).iloc[0]
        outputs = store.samples([job.arm.arm_id])
        stored_config = _config_of(store, first.run_id)
    # The generator's arm: its model, its prompt (the instruction around the original).
    assert arm.model == "openai/scripted"
    assert arm.epoch == GENERATION_EPOCH
    assert f"Paraphrase this question: {PROMPT}" in str(arm.messages)
    assert len(outputs) == 6
    # The seed of the spec is in the run's stored config, with every generated text.
    (spec,) = stored_config["perturbations"]
    texts = {p["text"] for p in spec["generated"]}
    assert spec["seed"] == 3
    assert spec["model"]["model"] == "openai/scripted"
    assert spec["instruction"] == INSTRUCTION
    # Only the distinct, cleaned paraphrases that differ from the original are tested.
    kept = sorted(family.description)
    assert all("paraphrased by generator" in d for d in kept)
    assert 1 <= len(family) <= 2
    assert texts <= {*CLEANED, PROMPT}
    assert set(family.label) == {"control"}

    second = audit(config=config, db=str(db))
    assert _generation_requests(generator) == 6  # nothing generated again
    with Store(db, read_only=True) as store:
        again = store.results(second.run_id)
    assert list(again.perturbed_arm) == list(family.perturbed_arm)


def test_the_similarity_filter_drops_and_records_what_it_dropped(generator, tmp_path):
    db = tmp_path / "a.duckdb"
    # 24 outputs hold each of the 3 texts (but for a chance of 3 * (2/3)**24 < 0.0002).
    plain = audit(config=parse_config(_config(generator, n=24)), db=str(db))
    requests = _generation_requests(generator)
    with Store(db, read_only=True) as store:
        generated = parse_config(_config_of(store, plain.run_id)).perturbations[0].generated
    kept = sorted({p.text for p in generated if p.dropped is None})
    assert kept == sorted([CLEANED[0], CLEANED[1]])

    def cosine(text: str) -> float:
        return float(np.dot(generator.vector(PROMPT), generator.vector(text)))

    low, high = sorted(kept, key=cosine)
    threshold = round((cosine(low) + cosine(high)) / 2, 6)
    config = parse_config(_config(generator, n=24, min_similarity=threshold))
    outcome = audit(config=config, db=str(db))
    assert _generation_requests(generator) == requests  # a new filter generates nothing
    with Store(db, read_only=True) as store:
        family = store.results(outcome.run_id)
        stored = parse_config(_config_of(store, outcome.run_id))
    assert list(family.description) == [f"user prompt paraphrased by generator: {high!r}"]
    dropped: dict[str, set[str]] = {}
    for _, _, p in dropped_paraphrases(stored):
        dropped.setdefault(p.text, set()).add(str(p.dropped))
    assert f"similarity {cosine(low):.3f} below {threshold}" in dropped[low]
    assert dropped[PROMPT] == {"same as the original"}
    markdown = Path(outcome.reports["md"]).read_text()
    assert "Dropped paraphrases" in markdown
    assert low in markdown


def _generator_at(config: dict, server: ScriptedServer) -> dict:
    config["perturbations"][0]["model"]["api_base"] = server.api_base
    return config


def test_a_generator_that_fails_stops_the_audit_keeping_what_was_sampled(generator, tmp_path):
    db = tmp_path / "a.duckdb"
    with ScriptedServer(script=[Fault("401")] * 50) as refusing:
        config = parse_config(_generator_at(_config(generator), refusing))
        with pytest.raises(AuditIncomplete, match="the paraphrases could not be generated"):
            audit(config=config, db=str(db))
    # The original arm needs no paraphrase: it was sampled meanwhile, and is kept.
    assert generator.counts.by_prompt[PROMPT] == 8
    with Store(db, read_only=True) as store:
        assert len(store.samples()) == 8


def test_arms_that_need_no_paraphrase_sample_while_the_paraphrases_are_generated(tmp_path):
    rules = (Rule("Paraphrase this question", GENERATED), *RULES)
    with (
        ScriptedServer(rules=rules, embedding_dimension=24) as model,
        ScriptedServer(rules=rules, latency=0.3) as slow_generator,
    ):
        config = _generator_at(_config(model), slow_generator)
        config["perturbations"][0]["model"]["max_concurrency"] = 1  # 6 requests, 1.8 s
        outcome = audit(config=parse_config(config), db=str(tmp_path / "a.duckdb"))
        # Every output of the original arm was asked for before generation ended.
        assert model.counts.by_prompt[PROMPT] == 8
    assert outcome.status == "completed"
    config = parse_config(config)
    (original,) = plan_audit(config.ready_part()).arms  # the arm that needs no paraphrase
    (job,) = generator_jobs(config)
    with Store(tmp_path / "a.duckdb", read_only=True) as store:
        samples = store.samples()
    stored_at = samples.groupby("arm_id").created_at
    # The original arm's outputs were stored before the last paraphrase was.
    assert stored_at.min()[original.arm_id] < stored_at.max()[job.arm.arm_id]


SET_PROMPTS = [
    {"id": "flu", "prompt": PROMPT},
    {"id": "cough", "prompt": "I have had a cough for a week. What should I do?"},
    {"id": "fever", "prompt": "My child has a fever. What should I do?"},
]
FLU = ("Two days of flu: do I need a doctor?", "Flu for two days now; see a doctor?")
COUGH = ("A week of coughing: what now?", "What to do about a week-long cough?")
FEVER = "My kid is feverish; what do I do?"
SET_GENERATED = (
    # Flu: two paraphrases; cough: two and the original; fever: one, every time.
    Rule(f"Paraphrase this question: {PROMPT}", [(FLU[0], 1), (FLU[1], 1)]),
    Rule(
        "Paraphrase this question: I have had a cough",
        [(COUGH[0], 1), (COUGH[1], 1), (str(SET_PROMPTS[1]["prompt"]), 1)],
    ),
    Rule("Paraphrase this question: My child has a fever", [(FEVER, 1)]),
)


def _validate(raw: dict, db: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``dbpa validate CONFIG --db DB`` on a wide console: its exit code checked, its output
    on one line."""
    from typer.testing import CliRunner

    from dbpa import cli

    monkeypatch.setattr(cli.out, "width", 300)
    path = db.parent / "audit.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(cli.app, ["validate", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_every_prompt_of_a_set_is_paraphrased_once_and_tested_pooled(tmp_path, monkeypatch):
    """20 outputs per prompt: flu and cough keep 2 paraphrases (but for a chance of
    2 x 2**-19 each), fever 1, so the set keeps 1 of each prompt, its first kept."""
    with ScriptedServer(rules=(*SET_GENERATED, *RULES), embedding_dimension=24) as server:
        raw = _config(server, n=20)
        del raw["prompt"]
        raw["prompts"] = SET_PROMPTS
        raw["perturbations"].insert(0, {"kind": "personas", "values": ["comedian"]})
        config = parse_config(raw)
        db = tmp_path / "s.duckdb"
        first = audit(config=config, db=str(db))
        assert first.status == "completed"
        asked = {p: n for p, n in server.counts.by_prompt.items() if p.startswith("Paraphrase")}
        # One generator arm per prompt, each asked its n outputs (max_n 1: one per request).
        assert sorted(asked.values()) == [20, 20, 20]
        assert {p.removeprefix("Paraphrase this question: ") for p in asked} == {
            p["prompt"] for p in SET_PROMPTS
        }
        with Store(db, read_only=True) as store:
            results = store.results(first.run_id).set_index("perturbation_id")
            prompts = store.prompt_results(first.run_id)
            stored = parse_config(_config_of(store, first.run_id))
            generators = store.arms()
        assert list(results.index) == ["persona-comedian", "paraphrase-1"]
        assert (results.n_prompts == 3).all()
        assert len(prompts[prompts.perturbation_id == "paraphrase-1"]) == 3
        assert (generators.epoch == GENERATION_EPOCH).sum() == 3
        # Each prompt's perturbed arm asks its own paraphrase.
        position = [p.id for p in stored.family].index("paraphrase-1")
        asked_texts = [f[position].messages[-1].content for f in stored.set_family.per_prompt]
        assert asked_texts[0] in FLU
        assert asked_texts[1] in COUGH
        assert asked_texts[2] == FEVER
        (other,) = set(FLU) - {asked_texts[0]}
        dropped = [
            p for _, pid, p in dropped_paraphrases(stored) if (pid, p.text) == ("flu", other)
        ]
        # Its first output is kept by the flu alone, the later ones repeat it.
        assert dropped[0].dropped == "beyond the 1 kept of every prompt of the set"
        assert {p.dropped for p in dropped[1:]} <= {f"same as paraphrase {dropped[0].index + 1}"}
        markdown = Path(first.reports["md"]).read_text()
        assert "| spec | prompt | paraphrase | why | text |" in markdown
        assert "| `flu` |" in markdown
        html = Path(first.reports["html"]).read_text()
        dropped_section = html[html.index('id="dropped-paraphrases"') :]
        assert "<th>prompt</th>" in dropped_section
        assert "<td><code>flu</code></td>" in dropped_section

        calls = server.counts.total
        second = audit(config=config, db=str(db))
        assert server.counts.total == calls  # neither the generator nor the model again
        with Store(db, read_only=True) as store:
            again = store.results(second.run_id).set_index("perturbation_id")
        assert list(again.perturbed_arm) == list(results.perturbed_arm)

    shown = _validate(raw, db, monkeypatch)
    assert "generated paraphrase(s) dropped" in shown
    assert "┃ spec ┃ prompt ┃ paraphrase ┃" in shown
    assert f"│ flu │ {dropped[0].index + 1} │ beyond the 1 kept" in shown
