"""Structured prompts: each edit changes one field and nothing else in the text."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dbpa.perturbations import RecordSpec, base_prompt, expand
from dbpa.specs import Message

TEMPLATE = "Patient: {name}, age {age}. Annual review for {name}'s BP of {bp} mmHg. Plan?"
FIELDS = {"name": "Ann", "age": 70, "bp": 142}
AGE = {"field": "age", "value": 71}


def record(**changes) -> RecordSpec:
    return RecordSpec(template=TEMPLATE, fields=FIELDS, **changes)


def original(spec: RecordSpec) -> tuple[Message, ...]:
    return (Message(role="user", content=spec.base_prompt),)


def test_base_prompt_is_the_rendered_record():
    assert record(edits=[{"field": "age", "value": 71}]).base_prompt == (
        "Patient: Ann, age 70. Annual review for Ann's BP of 142 mmHg. Plan?"
    )


def test_a_name_edit_changes_the_name_and_not_annual():
    spec = record(edits=[{"field": "name", "value": "Mary", "label": "control"}])
    (p,) = expand(original(spec), [spec])
    assert p.messages == (
        Message(
            role="user",
            content="Patient: Mary, age 70. Annual review for Mary's BP of 142 mmHg. Plan?",
        ),
    )
    assert (p.id, p.label, p.kind) == ("record-name-mary", "control", "record")
    assert p.description == "name: Ann -> Mary"


def test_each_edit_changes_exactly_its_field():
    spec = record(
        label="target",
        edits=[
            {"field": "age", "value": 71, "label": "control"},
            {"field": "bp", "value": 165, "id": "bp-stage-2"},
        ],
    )
    age, bp = expand(original(spec), [spec])
    base = spec.base_prompt
    assert age.messages[0].content == base.replace("age 70", "age 71")
    assert bp.messages[0].content == base.replace("142 mmHg", "165 mmHg")
    assert [(p.id, p.label) for p in (age, bp)] == [
        ("record-age-71", "control"),
        ("bp-stage-2", "target"),
    ]


def test_other_messages_are_kept():
    spec = record(edits=[{"field": "age", "value": 71}])
    system = Message(role="system", content="Be careful.")
    (p,) = expand((system, *original(spec)), [spec])
    assert p.messages[0] == system


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"edits": [{"field": "weight", "value": 80}]}, r"edits\[0\]: no field 'weight'"),
        ({"edits": [{"field": "age", "value": 70}]}, r"edits\[0\]: age=70 does not change"),
        ({"edits": []}, "at least 1"),
        ({"edits": [{"field": "age", "value": True}]}, "valid string"),
    ],
)
def test_edit_errors_name_the_edit(changes, message):
    with pytest.raises(ValidationError, match=message):
        record(**changes)


def test_template_and_fields_must_match():
    with pytest.raises(ValidationError, match=r"placeholders \['bp'\] are not fields"):
        RecordSpec(template=TEMPLATE, fields={"name": "Ann", "age": 70}, edits=[AGE])
    with pytest.raises(ValidationError, match=r"fields \['sex'\] do not appear"):
        RecordSpec(template=TEMPLATE, fields={**FIELDS, "sex": "F"}, edits=[AGE])


def test_the_original_must_be_the_rendered_record():
    spec = record(edits=[{"field": "age", "value": 71}])
    other = (Message(role="user", content="Something else."),)
    with pytest.raises(ValueError, match=r"perturbations\[0\] \(record\): .*base_prompt"):
        expand(other, [spec])
    assert base_prompt([spec]) == spec.base_prompt
