"""Prompt variants, templates, personas, system prompts, model and sampling swaps."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from dbpa.perturbations import (
    ModelSwapSpec,
    PersonasSpec,
    PromptSpec,
    SamplingSpec,
    SystemPromptSpec,
    TemplateSpec,
    expand,
    parse_specs,
)
from dbpa.specs import Message, ModelSpec

QUESTION = "A 70-year-old smoker asks whether he should take a statin."
SYSTEM = Message(role="system", content="You are a helpful assistant.")
ORIGINAL = (SYSTEM, Message(role="user", content=QUESTION))


def only(specs: list) -> list:
    return expand(ORIGINAL, specs)


def test_prompt_variants_replace_the_user_prompt_and_keep_the_rest():
    text = "Should a seventy-year-old man who smokes be prescribed a statin by his doctor?"
    spec = PromptSpec(variants=[text, {"text": "Statin at 70?", "id": "short", "label": "target"}])
    long, short = only([spec])
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    assert long.id == f"prompt-should-a-seventy-year-old-man-who-smokes-{digest}"
    assert long.messages == (SYSTEM, Message(role="user", content=text))
    assert long.label is None
    assert long.kind == "prompt"
    assert long.model is None
    assert long.params == {}
    assert (short.id, short.label) == ("short", "target")
    assert short.messages[1].content == "Statin at 70?"


def test_the_user_prompt_is_the_last_user_message():
    history = (
        Message(role="user", content="Hello."),
        Message(role="assistant", content="Hi, how can I help?"),
        Message(role="user", content=QUESTION),
    )
    (p,) = expand(history, [PromptSpec(variants=["Other question?"])])
    assert p.messages == (*history[:2], Message(role="user", content="Other question?"))


def test_a_family_label_applies_where_items_set_none():
    spec = PromptSpec(label="control", variants=["A?", {"text": "B?", "label": "target"}])
    assert [p.label for p in only([spec])] == ["control", "target"]


@pytest.mark.parametrize(
    ("placement", "template", "expected"),
    [
        ("prefix", "Act as a {role}.", f"Act as a pirate. {QUESTION}"),
        ("suffix", "Answer as a {role}.", f"{QUESTION} Answer as a pirate."),
        ("full", "{prompt}\nReply like a {role}!", f"{QUESTION}\nReply like a pirate!"),
    ],
)
def test_template_placement(placement, template, expected):
    spec = TemplateSpec(template=template, values=["pirate"], placement=placement)
    (p,) = only([spec])
    assert p.messages == (SYSTEM, Message(role="user", content=expected))
    assert p.id == "role-pirate"


def test_derived_ids_do_not_repeat_the_prefix():
    values = ["style number 0", "Style number 1", "number 2", "style", "a style"]
    spec = TemplateSpec(template="Answer in {style}.", values=values)
    assert [p.id for p in only([spec])] == [
        "style-number-0",
        "style-number-1",
        "style-number-2",
        "style-style",  # a repeat that is the whole slug stays
        "style-a-style",
    ]
    (persona,) = only([PersonasSpec(values=["persona non grata"])])
    assert persona.id == "persona-non-grata"
    (swap,) = only([ModelSwapSpec(models=[{"model": "openai/gpt-4o", "name": "model-b"}])])
    assert swap.id == "model-b"


def test_ids_that_meet_once_the_prefix_is_not_repeated_are_duplicates():
    spec = TemplateSpec(template="Answer in {style}.", values=["style number 0", "number 0"])
    with pytest.raises(ValueError, match=r"duplicate perturbation ids: 'style-number-0'"):
        only([spec])


def test_template_separator_and_prompt_with_braces_is_inserted_verbatim():
    original = (Message(role="user", content="Explain {x} and }{ in JSON."),)
    spec = TemplateSpec(template="You are a {role}.", values=["tutor"], separator="\n\n")
    (p,) = expand(original, [spec])
    assert p.messages[0].content == "You are a tutor.\n\nExplain {x} and }{ in JSON."


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"template": "Act as a {role} {tone}.", "values": ["x"]}, "exactly one placeholder"),
        ({"template": "Act now.", "values": ["x"]}, "exactly one placeholder"),
        ({"template": "{prompt} {role}", "values": ["x"]}, "only filled with placement 'full'"),
        ({"template": "{role}", "values": ["x"], "placement": "full"}, "needs a {prompt}"),
        ({"template": "Act as {0}.", "values": ["x"]}, "plain name"),
        ({"template": "Act as {role.name}.", "values": ["x"]}, "plain name"),
        ({"template": "Act as {role.", "values": ["x"]}, "malformed template"),
        ({"template": "Act as {role}.", "values": []}, "at least 1"),
    ],
)
def test_template_errors_name_the_problem(fields, message):
    with pytest.raises(ValidationError, match=message.replace("{", r"\{").replace("(", r"\(")):
        TemplateSpec(**fields)


def test_personas_default_to_the_papers_eight_labelled_roles():
    family = only([PersonasSpec()])
    expected = [
        ("persona-doctor", "control", "doctor"),
        ("persona-nurse", "control", "nurse"),
        ("persona-medical-practitioner", "control", "medical practitioner"),
        ("persona-medical-supervisor", "control", "medical supervisor"),
        ("persona-comedian", "target", "comedian"),
        ("persona-robot-from-the-future", "target", "robot from the future"),
        ("persona-neurips-reviewer", "target", "NeurIPS reviewer"),
        ("persona-child", "target", "child"),
    ]
    assert [(p.id, p.label) for p in family] == [(i, label) for i, label, _ in expected]
    for p, (_, _, role) in zip(family, expected, strict=True):
        assert p.kind == "personas"
        assert p.messages == (SYSTEM, Message(role="user", content=f"Act as a {role}. {QUESTION}"))


def test_personas_from_yaml_shapes():
    (spec,) = parse_specs(
        [{"kind": "personas", "values": [{"value": "surgeon", "label": "control"}]}]
    )
    (p,) = only([spec])
    assert (p.id, p.label, p.messages[1].content) == (
        "persona-surgeon",
        "control",
        f"Act as a surgeon. {QUESTION}",
    )


def test_system_prompt_replaces_the_system_message():
    (p,) = only([SystemPromptSpec(variants=["You are terse."])])
    assert p.messages == (Message(role="system", content="You are terse."), ORIGINAL[1])
    assert p.id == "system-you-are-terse"
    assert "replaced" in p.description


def test_system_prompt_is_added_in_front_when_there_is_none():
    original = (Message(role="user", content=QUESTION),)
    (p,) = expand(original, [SystemPromptSpec(variants=["You are terse."])])
    assert p.messages == (Message(role="system", content="You are terse."), original[0])
    assert "added" in p.description


def test_two_system_messages_are_ambiguous():
    original = (SYSTEM, SYSTEM.model_copy(update={"content": "Be brief."}), ORIGINAL[1])
    with pytest.raises(ValueError, match=r"perturbations\[0\] \(system_prompt\): .*2 system"):
        expand(original, [SystemPromptSpec(variants=["X"])])


def test_model_swaps_carry_their_own_model_spec():
    (spec,) = parse_specs(
        [
            {
                "kind": "model",
                "models": [
                    "openai/gpt-4o",
                    {"model": "local/smollm2-135m", "label": "target", "id": "smol"},
                    {"model": "openai/gpt-4o-mini", "params": {"temperature": 0.2}},
                ],
            }
        ]
    )
    big, smol, mini = only([spec])
    assert big.id == "model-openai-gpt-4o"
    assert big.model == ModelSpec(model="openai/gpt-4o")
    assert big.messages == ORIGINAL
    assert (smol.id, smol.label, smol.model.model) == ("smol", "target", "local/smollm2-135m")
    assert mini.id.startswith("model-openai-gpt-4o-mini-")  # parameters: a digest is added
    assert len(mini.id) == len("model-openai-gpt-4o-mini-") + 6
    audited = ModelSpec(model="openai/gpt-4", params={"temperature": 1.0, "top_p": 0.5})
    assert mini.arm_model(audited) == ModelSpec(
        model="openai/gpt-4o-mini", params={"temperature": 0.2}
    )


def test_model_variant_keys_are_checked():
    with pytest.raises(ValidationError, match="bogus"):
        ModelSwapSpec.model_validate({"models": [{"model": "x/y", "bogus": 1}]})


def test_sampling_swaps_override_the_audited_models_parameters():
    spec = SamplingSpec(variants=[{"params": {"temperature": 1.2}}, {"params": {"top_p": 0.9}}])
    hot, nucleus = only([spec])
    assert (hot.id, nucleus.id) == ("sampling-temperature-1.2", "sampling-top-p-0.9")
    assert hot.messages == ORIGINAL
    assert hot.model is None
    audited = ModelSpec(model="openai/gpt-4o", params={"temperature": 0.7, "max_tokens": 300})
    assert hot.arm_model(audited) == ModelSpec(
        model="openai/gpt-4o", params={"temperature": 1.2, "max_tokens": 300}
    )
    assert audited.params == {"temperature": 0.7, "max_tokens": 300}


@pytest.mark.parametrize("params", [{}, {"n": 3}, {"model": "x"}])
def test_sampling_params_must_be_accepted_by_a_model_spec(params):
    with pytest.raises(ValidationError, match="params"):
        SamplingSpec(variants=[{"params": params}])


def test_user_ids_must_be_slug_like():
    with pytest.raises(ValidationError, match="pattern"):
        PromptSpec(variants=[{"text": "x", "id": "has space"}])


def test_unknown_keys_and_kinds_are_refused():
    with pytest.raises(ValidationError, match="Extra inputs"):
        parse_specs([{"kind": "prompt", "variants": ["x"], "colour": "red"}])
    with pytest.raises(ValidationError, match="kind"):
        parse_specs([{"kind": "paraphrase", "variants": ["x"]}])


def test_specs_and_perturbations_are_frozen():
    spec = PersonasSpec()
    with pytest.raises(ValidationError):
        spec.template = "x {role}"
    p = only([spec])[0]
    with pytest.raises(AttributeError):
        p.id = "other"
