"""The paraphrase kind: cleaning and screening generator outputs, binding, expansion, and
the config checks that run before anything is generated."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dbpa.config import ConfigError, parse_config
from dbpa.perturbations import (
    DEFAULT_PARAPHRASE_MODEL,
    ParaphraseSpec,
    clean_paraphrase,
    expand,
    parse_specs,
    screen_paraphrases,
)
from dbpa.specs import Message

PROMPT = "Is the sky blue?"
ORIGINAL = (Message(role="system", content="Be brief."), Message(role="user", content=PROMPT))


@pytest.mark.parametrize(
    ("output", "cleaned"),
    [
        ("  Is the heaven blue?  ", "Is the heaven blue?"),
        ('"Is the heaven blue?"', "Is the heaven blue?"),
        ("\u201cIs the heaven blue?\u201d", "Is the heaven blue?"),
        ("'\"Is the heaven blue?\"'", "Is the heaven blue?"),
        ("1. Is the heaven blue?", "Is the heaven blue?"),
        ("- Is the heaven blue?", "Is the heaven blue?"),
        ("Here is the rewritten text:\nIs the heaven blue?", "Is the heaven blue?"),
        ("Is the heaven blue?\n\nI changed 'sky' to 'heaven'.", "Is the heaven blue?"),
        ("Is the\n heaven   blue?", "Is the heaven blue?"),
        ('"Is it blue?" he asked', '"Is it blue?" he asked'),  # quotes not around the whole
        ("2.5 billion years ago, was the sky blue?", "2.5 billion years ago, was the sky blue?"),
        ("", ""),
        ('""', ""),
    ],
)
def test_clean_paraphrase(output, cleaned):
    assert clean_paraphrase(output) == cleaned


def test_screening_drops_empty_original_and_repeated_outputs():
    screened = screen_paraphrases(
        PROMPT, ["Is the heaven blue?", "", "  Is the sky blue? ", '"Is the heaven blue?"', "Ok?"]
    )
    assert [p.dropped for p in screened] == [
        None,
        "empty",
        "same as the original",
        "same as paraphrase 1",
        None,
    ]
    assert [p.index for p in screened] == [0, 1, 2, 3, 4]


def spec(**fields: object) -> ParaphraseSpec:
    (parsed,) = parse_specs([{"kind": "paraphrase", "n": 3, **fields}])
    assert isinstance(parsed, ParaphraseSpec)
    return parsed


def test_defaults_are_the_embedded_model_and_control():
    s = spec()
    assert s.model.model == DEFAULT_PARAPHRASE_MODEL
    assert s.label == "control"
    assert s.seed == 0
    assert s.min_similarity is None
    assert s.generated is None
    assert spec(model="openai/gpt-4o-mini").model.model == "openai/gpt-4o-mini"
    # A bare string is sampled like the default; a model spec with its own parameters only.
    assert spec(model="openai/gpt-4o-mini").model.params == s.model.params
    assert s.model.params == {"temperature": 1.0, "max_tokens": 256}
    assert spec(model={"model": "openai/gpt-4o-mini"}).model.params == {}


def test_the_generator_is_asked_to_rewrite_the_user_prompt_only():
    (message,) = spec(instruction="Say differently: {prompt}").generation_messages(ORIGINAL)
    assert message == Message(role="user", content=f"Say differently: {PROMPT}")


def test_an_ungenerated_spec_does_not_expand():
    with pytest.raises(ValueError, match=r"perturbations\[0\] \(paraphrase\): its 3 paraphrases"):
        expand(ORIGINAL, [spec()])
    assert expand(ORIGINAL, [spec()], skip_ungenerated=True) == []


def test_a_bound_spec_expands_its_kept_paraphrases_with_stable_ids():
    screened = screen_paraphrases(PROMPT, ["Is the heaven blue?", PROMPT, "Is the sky azure?"])
    bound = spec(prefix="para").bind(screened)
    family = expand(ORIGINAL, [bound])
    assert [p.id for p in family] == ["para-1", "para-3"]
    assert family[1].messages == (ORIGINAL[0], Message(role="user", content="Is the sky azure?"))
    assert {p.label for p in family} == {"control"}
    assert "paraphrased by local/smollm2-135m" in family[0].description


def test_the_similarity_filter_records_every_similarity_and_drops_below():
    screened = screen_paraphrases(PROMPT, ["Is the heaven blue?", "Is the sky azure?", ""])
    bound = spec(min_similarity=0.8).bind(screened, {0: 0.79, 1: 0.8})
    assert [(p.similarity, p.dropped) for p in bound.generated or ()] == [
        (0.79, "similarity 0.790 below 0.8"),
        (0.8, None),
        (None, "empty"),
    ]
    with pytest.raises(ValueError, match=r"similarities: none for paraphrase indices \[1\]"):
        spec(min_similarity=0.8).bind(screened, {0: 0.9})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"n": 0}, r"perturbations\[0\]\.n: Input should be greater than or equal to 1"),
        ({"model": "nope/x"}, r"perturbations\[0\]\.model: 'nope/x': unknown provider"),
        ({"instruction": "Rewrite it."}, r"perturbations\[0\]: .*exactly one placeholder"),
        ({"min_similarity": 2}, r"perturbations\[0\]\.min_similarity: Input should be less"),
        ({"label": "maybe"}, r"perturbations\[0\]\.label: Input should be 'control'"),
    ],
)
def test_config_errors_name_the_field(fields, message):
    raw = {
        "name": "x",
        "models": [{"model": "openai/gpt-4o-mini"}],
        "prompt": PROMPT,
        "perturbations": [{"kind": "paraphrase", "n": 3, **fields}],
    }
    with pytest.raises(ConfigError, match=message):
        parse_config(raw)


def test_k_and_b_are_checked_against_the_paraphrases_asked_for():
    raw = {
        "name": "x",
        "models": [{"model": "openai/gpt-4o-mini"}],
        "prompt": PROMPT,
        "perturbations": [{"kind": "paraphrase", "n": 400}],
        "k": 20,
    }
    with pytest.raises(ConfigError, match=r"n_permutations: .* in a family of 400"):
        parse_config(raw)
    config = parse_config({**raw, "n_permutations": 20_000})
    assert [i for i, _ in config.ungenerated] == [0]
    with pytest.raises(ValueError, match="not generated yet"):
        _ = config.family


def test_a_config_needs_a_user_prompt_to_paraphrase():
    raw = {
        "name": "x",
        "models": [{"model": "openai/gpt-4o-mini"}],
        "prompt": [{"role": "system", "content": "Be brief."}],
        "perturbations": [{"kind": "paraphrase", "n": 3}],
    }
    with pytest.raises(ConfigError, match=r"perturbations\[0\] \(paraphrase\): the original"):
        parse_config(raw)


def test_the_spec_is_frozen_and_strict():
    with pytest.raises(ValidationError, match="extra"):
        parse_specs([{"kind": "paraphrase", "n": 3, "temperature": 1}])
