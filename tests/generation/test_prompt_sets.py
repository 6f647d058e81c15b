"""Paraphrases of every prompt of a set: one generator arm per prompt, each prompt's outputs
screened on their own, and the j-th perturbation of the set each prompt's j-th kept one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from dbpa.config import parse_config
from dbpa.generation import bind_generated, dropped_paraphrases, generator_jobs, missing_outputs
from dbpa.perturbations import GeneratedParaphrase, ParaphraseSpec

SKY, SEA, GRASS = "Is the sky blue?", "Is the sea salty?", "Is grass green?"


def raw(**spec: Any) -> dict[str, Any]:
    return {
        "name": "x",
        "models": [{"model": "openai/gpt-4o-mini"}],
        "prompts": [{"id": "sky", "prompt": SKY}, {"id": "sea", "prompt": SEA}, GRASS],
        "perturbations": [
            {"kind": "personas", "values": ["doctor"]},
            {"kind": "paraphrase", "n": 3, **spec},
        ],
    }


def set_config(**spec: Any):
    return parse_config(raw(**spec))


# Per prompt: 3 outputs; sky keeps 3, sea 2 (one is the original), grass 2 (one repeated).
OUTPUTS = {
    (1, "sky"): ["Sky blue?", "Is the heaven blue?", "Blue sky?"],
    (1, "sea"): ["Salty sea?", SEA, "Is seawater salty?"],
    (1, "p3"): ["Green grass?", "Green grass?", "Is the lawn green?"],
}


def test_every_prompt_has_its_own_generator_arm_the_same_as_its_audit_alone():
    jobs = generator_jobs(set_config())
    assert [(j.position, j.prompt) for j in jobs] == [(1, "sky"), (1, "sea"), (1, "p3")]
    for job, prompt in zip(jobs, (SKY, SEA, GRASS), strict=True):
        assert prompt in job.arm.messages[0].content
        assert f"for prompt {job.prompt!r}" in job.label
    assert len({j.arm.arm_id for j in jobs}) == 3
    alone = parse_config({**raw(), "prompts": None, "prompt": SKY})
    (single,) = generator_jobs(alone)
    assert (jobs[0].arm, jobs[0].seed) == (single.arm, single.seed)
    assert single.prompt is None


def test_missing_outputs_are_per_prompt():
    jobs = generator_jobs(set_config())

    class Stored:
        def sample_indices(self, arm_ids: Sequence[str]) -> dict[str, set[int]]:
            return {a: ({0, 1, 2} if a == jobs[1].arm.arm_id else {2}) for a in arm_ids}

    assert missing_outputs(jobs, Stored()) == {
        (1, "sky"): [0, 1],
        (1, "sea"): [],
        (1, "p3"): [0, 1],
    }


def test_the_set_keeps_as_many_as_the_prompt_keeping_fewest_the_jth_of_each():
    bound = bind_generated(set_config(), OUTPUTS)
    assert not bound.ungenerated
    assert [p.id for p in bound.family] == ["persona-doctor", "paraphrase-1", "paraphrase-2"]
    texts = [[p.messages[-1].content for p in family[1:]] for family in bound.set_family.per_prompt]
    assert texts == [
        ["Sky blue?", "Is the heaven blue?"],
        ["Salty sea?", "Is seawater salty?"],
        ["Green grass?", "Is the lawn green?"],
    ]
    dropped = [(pid, p.index, p.dropped) for _, pid, p in dropped_paraphrases(bound)]
    assert dropped == [
        ("sky", 2, "beyond the 2 kept of every prompt of the set"),
        ("sea", 1, "same as the original"),
        ("p3", 1, "same as paraphrase 1"),
    ]


def test_a_bound_set_config_is_stored_and_read_back_as_it_was():
    bound = bind_generated(set_config(), OUTPUTS)
    stored = bound.model_dump(mode="json")
    spec = stored["perturbations"][1]
    assert "generated" not in spec or spec["generated"] is None
    assert list(spec["generated_per_prompt"]) == ["sky", "sea", "p3"]
    again = parse_config(stored)
    assert again.set_family == bound.set_family
    assert again.fingerprint() == bound.fingerprint()


def test_a_prompt_keeping_no_paraphrase_is_an_error_naming_spec_and_prompt():
    outputs = {**OUTPUTS, (1, "sea"): [SEA, "", SEA]}
    with pytest.raises(
        ValueError, match=r"perturbations\[1\] \(paraphrase\): prompt 'sea': every one of its 3"
    ):
        bind_generated(set_config(), outputs)


def test_a_prompt_without_its_outputs_is_an_error_naming_it():
    outputs = {k: v for k, v in OUTPUTS.items() if k != (1, "p3")}
    with pytest.raises(ValueError, match=r"prompt 'p3': 0 of its 3 generated outputs"):
        bind_generated(set_config(), outputs)


def test_each_prompt_is_filtered_by_similarity_to_itself():
    vectors = {
        SKY: [1.0, 0.0, 0.0],
        "Sky blue?": [1.0, 0.1, 0.0],  # near the sky, far from the sea
        "Is the heaven blue?": [0.0, 1.0, 0.0],
        "Blue sky?": [1.0, 0.0, 0.2],
        SEA: [0.0, 0.0, 1.0],
        "Salty sea?": [0.0, 0.1, 1.0],
        "Is seawater salty?": [1.0, 0.0, 0.0],  # far from the sea
        GRASS: [0.0, 1.0, 0.0],
        "Green grass?": [0.0, 1.0, 0.1],
        "Is the lawn green?": [0.1, 1.0, 0.0],
    }

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.array([vectors[t] for t in texts])

    bound = bind_generated(set_config(min_similarity=0.9), OUTPUTS, embed)
    # sea keeps one (its second is far from it): the set keeps one of each.
    assert [p.id for p in bound.family][1:] == ["paraphrase-1"]
    firsts = [family[1].messages[-1].content for family in bound.set_family.per_prompt]
    assert firsts == ["Sky blue?", "Salty sea?", "Green grass?"]
    reasons = {(pid, p.index): str(p.dropped) for _, pid, p in dropped_paraphrases(bound)}
    assert reasons[("sky", 1)].startswith("similarity 0.000 below 0.9")
    assert reasons[("sea", 2)].startswith("similarity 0.000 below 0.9")
    assert reasons[("sky", 2)] == "beyond the 1 kept of every prompt of the set"


def paraphrase(index: int, dropped: str | None = None) -> dict[str, Any]:
    return {"index": index, "text": f"Rewritten {index}?", "dropped": dropped}


@pytest.mark.parametrize(
    ("where", "bound", "expected"),
    [
        (
            "set",
            {"generated": [paraphrase(0)]},
            "bound for one prompt, not per prompt of the set",
        ),
        (
            "set",
            {"generated_per_prompt": {"sky": [paraphrase(0)], "sea": [paraphrase(0)]}},
            "prompt 'p3': perturbations[1] (paraphrase): no paraphrases generated for prompt 'p3'",
        ),
        (
            "one",
            {"generated_per_prompt": {"sky": [paraphrase(0)]}},
            "bound per prompt of a set of prompts",
        ),
    ],
)
def test_a_binding_that_does_not_fit_the_prompts_is_refused(where, bound, expected):
    config = raw(**bound)
    if where == "one":
        config = {**config, "prompts": None, "prompt": SKY}
    with pytest.raises(ValueError, match=re.escape(expected)):
        parse_config(config)


def test_bind_set_numbers_the_kept_ones_and_refuses_a_prompt_with_none():
    spec = ParaphraseSpec(n=3)
    kept = GeneratedParaphrase(index=0, text="a?")
    gone = GeneratedParaphrase(index=1, text="b?", dropped="empty")
    later = GeneratedParaphrase(index=2, text="c?")
    bound = spec.bind_set({"x": (kept, gone, later), "y": (kept, gone)})
    assert bound.generated is None
    assert bound.generated_per_prompt is not None
    x, y = bound.generated_per_prompt["x"], bound.generated_per_prompt["y"]
    assert [p.dropped for p in x] == [None, "empty", "beyond the 1 kept of every prompt of the set"]
    assert [p.dropped for p in y] == [None, "empty"]
    with pytest.raises(ValueError, match="no paraphrase kept for prompt\\(s\\) 'y'"):
        spec.bind_set({"x": (kept,), "y": (gone,)})
    with pytest.raises(ValueError, match="per_prompt: no prompts"):
        spec.bind_set({})
