"""Generated paraphrases in the audit flow: generated once, stored with their generator,
filtered by embedding similarity, and the dropped ones kept in the run's config."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dbpa.config import parse_config
from dbpa.generation import GENERATION_EPOCH, dropped_paraphrases, generator_jobs
from dbpa.plan import plan_audit
from flows.audit import AuditIncomplete, audit
from storage import Store
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.scripted_server import Fault, Rule, ScriptedServer

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
    for _, p in dropped_paraphrases(stored):
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
