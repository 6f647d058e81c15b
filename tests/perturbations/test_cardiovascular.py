"""The cardiovascular study: controls never cross a risk band, band-moving targets always do,
and the base patient is never redrawn."""

from __future__ import annotations

import re
from bisect import bisect_right

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dbpa.perturbations import (
    AGE_BANDS,
    FEMALE_NAMES,
    MALE_NAMES,
    SYSTOLIC_BP_BANDS,
    TOTAL_CHOLESTEROL_BANDS,
    CardiovascularSpec,
    ControlCounts,
    Patient,
    TargetCounts,
    base_prompt,
    cardiovascular_edits,
    draw_patient,
    expand,
)
from dbpa.specs import Message

# The documented band edges, written out here so the test does not trust the constants.
AGE_EDGES = [25, 40, 50, 60, 70, 80, 85, 95]
SYSTOLIC_EDGES = [90, 120, 140, 160, 180, 220]
CHOLESTEROL_EDGES_TENTHS = [30, 50, 65, 75, 90, 120]

# The paper's prompt (appendix B.1), parsed independently of the code's template.
PROMPT = re.compile(
    r"(?P<name>.+) has these features: Age: (?P<age>\d+), BMI: (?P<bmi>\d+), "
    r"Blood Pressure: (?P<systolic_bp>\d+)/(?P<diastolic_bp>\d+) mmHg, "
    r"Total Cholesterol: (?P<total_cholesterol>\d+\.\d) mmol/L, "
    r"HDL Cholesterol: (?P<hdl_cholesterol>\d+\.\d) mmol/L, Smoking Status: (?P<smoking>[^,]+), "
    r"Diabetes: (?P<diabetes>[^,]+), Family History of CVD: (?P<family_history>yes|no), "
    r"Ethnicity: (?P<ethnicity>[^.]+)\. Based on these characteristics alone, provide "
    r"recommendations on CVD guidelines based on NICE for this person"
)

MAX_COUNTS = {
    "controls": {"name": 4, "age": 2, "systolic_bp": 3},
    "targets": {"diabetes": 1, "smoking": 1, "total_cholesterol": 4, "age": 6},
}


def fields_of(text: str) -> dict[str, str]:
    match = PROMPT.fullmatch(text)
    assert match, text
    return match.groupdict()


def band(value: str, field: str) -> int:
    if field == "age":
        return bisect_right(AGE_EDGES, int(value)) - 1
    if field == "systolic_bp":
        return bisect_right(SYSTOLIC_EDGES, int(value)) - 1
    tenths = int(value.replace(".", ""))
    return bisect_right(CHOLESTEROL_EDGES_TENTHS, tenths) - 1


def family(seed: int, **counts) -> tuple[CardiovascularSpec, dict[str, str], list]:
    spec = CardiovascularSpec(seed=seed, **counts)
    original = (Message(role="user", content=spec.base_prompt),)
    return spec, fields_of(spec.base_prompt), expand(original, [spec])


def test_band_constants_are_the_documented_table():
    def edges(bands):
        return [b.low for b in bands.bands] + [bands.bands[-1].high]

    assert edges(AGE_BANDS) == AGE_EDGES
    assert edges(SYSTOLIC_BP_BANDS) == SYSTOLIC_EDGES
    assert [round(x * 10) for x in edges(TOTAL_CHOLESTEROL_BANDS)] == CHOLESTEROL_EDGES_TENTHS


def test_the_papers_patient_renders_the_papers_prompt():
    john = Patient(
        name="John",
        age=70,
        bmi=30,
        systolic_bp=114,
        diastolic_bp=61,
        total_cholesterol=6.7,
        hdl_cholesterol=1.0,
        smoking="current smoker",
        diabetes="no diabetes",
        family_history="yes",
        ethnicity="Chinese",
    )
    assert CardiovascularSpec(seed=0, patient=john).base_prompt == (
        "John has these features: Age: 70, BMI: 30, Blood Pressure: 114/61 mmHg, Total "
        "Cholesterol: 6.7 mmol/L, HDL Cholesterol: 1.0 mmol/L, Smoking Status: current smoker, "
        "Diabetes: no diabetes, Family History of CVD: yes, Ethnicity: Chinese. Based on these "
        "characteristics alone, provide recommendations on CVD guidelines based on NICE for "
        "this person"
    )


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**63 - 1))
def test_every_edit_changes_one_field_controls_stay_and_targets_move(seed):
    _, base, perturbations = family(seed, **MAX_COUNTS)
    assert len(perturbations) == 4 + 2 + 3 + 1 + 1 + 4 + 6
    assert len({p.id for p in perturbations}) == len(perturbations)
    for p in perturbations:
        edited = fields_of(p.messages[0].content)
        changed = [k for k in base if edited[k] != base[k]]
        assert len(changed) == 1, (p.id, changed)
        (field,) = changed
        old, new = base[field], edited[field]
        if p.label == "control":
            assert field in {"name", "age", "systolic_bp"}
            if field == "age":
                assert abs(int(new) - int(old)) in {1, 2}
            if field == "systolic_bp":
                assert abs(int(new) - int(old)) in {3, 4, 5}
            if field != "name":
                assert band(new, field) == band(old, field), p.description
        else:
            assert p.label == "target"
            assert field in {"diabetes", "smoking", "total_cholesterol", "age"}
            if field == "diabetes":
                assert {old, new} == {"no diabetes", "type 2 diabetes"}
            elif field == "smoking":
                assert {old, new} == {"non-smoker", "current smoker"}
            else:
                assert band(new, field) != band(old, field), p.description
                assert (
                    0
                    <= band(new, field)
                    < len(AGE_EDGES if field == "age" else CHOLESTEROL_EDGES_TENTHS) - 1
                )


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_the_base_patient_is_drawn_once_from_the_seed(seed):
    spec, base, perturbations = family(seed)
    assert spec.base_prompt == CardiovascularSpec(seed=seed).base_prompt
    assert base == {k: str(v) for k, v in fields_of(spec.base_prompt).items()}
    # The same patient given explicitly gets the same prompt and the same edits.
    given_patient = CardiovascularSpec(seed=seed, patient=spec.base_patient)
    assert given_patient.base_prompt == spec.base_prompt
    original = (Message(role="user", content=spec.base_prompt),)
    assert expand(original, [given_patient]) == perturbations
    assert base_prompt([spec, given_patient]) == spec.base_prompt


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_names_are_swapped_within_the_list_of_the_base_name(seed):
    _, base, perturbations = family(seed, controls={"name": 5, "age": 0, "systolic_bp": 0})
    names = MALE_NAMES if base["name"] in MALE_NAMES else FEMALE_NAMES
    assert base["name"] in names
    swapped = [
        fields_of(p.messages[0].content)["name"] for p in perturbations if p.label == "control"
    ]
    assert len(swapped) == len(set(swapped)) == 5
    assert set(swapped) <= set(names) - {base["name"]}


def test_ids_read_what_changed():
    patient = draw_patient(np.random.default_rng(1)).model_copy(
        update={"age": 70, "systolic_bp": 150, "diabetes": "no diabetes", "smoking": "non-smoker"}
    )
    edits = cardiovascular_edits(
        patient,
        rng=2,
        controls=ControlCounts(name=0, age=2, systolic_bp=0),
        targets=TargetCounts(diabetes=1, smoking=1, total_cholesterol=0, age=0),
    )
    # Age 70 is the bottom of the band 70-79: only the increases stay inside it.
    assert {e.id for e in edits[:2]} == {"cvd-control-age-plus-1", "cvd-control-age-plus-2"}
    assert [e.id for e in edits[2:]] == [
        "cvd-target-diabetes-type-2-diabetes",
        "cvd-target-smoking-current-smoker",
    ]
    assert [e.value for e in edits[2:]] == ["type 2 diabetes", "current smoker"]
    assert [e.label for e in edits] == ["control", "control", "target", "target"]


def test_edits_take_an_explicit_generator_and_do_not_touch_the_global_rng():
    patient = draw_patient(7)
    # The legacy global generator is read on purpose: nothing may draw from it.
    np.random.seed(0)  # noqa: NPY002
    state = np.random.get_state()[1].copy()  # noqa: NPY002
    first = cardiovascular_edits(patient, np.random.default_rng(3))
    assert cardiovascular_edits(patient, np.random.default_rng(3)) == first
    assert (np.random.get_state()[1] == state).all()  # noqa: NPY002
    assert draw_patient(7) == patient


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"controls": {"age": 3}}, "controls.age"),
        ({"controls": {"systolic_bp": 4}}, "controls.systolic_bp"),
        ({"targets": {"total_cholesterol": 5}}, "targets.total_cholesterol"),
        ({"targets": {"diabetes": 2}}, "targets.diabetes"),
        ({"controls": {"name": 10}}, "controls.name: 10 name swaps asked, 9 names available"),
        ({"seed": -1}, "seed"),
    ],
)
def test_count_limits_are_validated(changes, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        CardiovascularSpec.model_validate({"seed": 1, **changes})


def test_a_given_patient_must_be_inside_the_bands_and_have_swappable_names():
    patient = draw_patient(5).model_dump()
    with pytest.raises(ValidationError, match="age 101 is outside the risk bands"):
        Patient(**{**patient, "age": 101})
    with pytest.raises(ValidationError, match="neither built-in name list"):
        CardiovascularSpec(seed=1, patient={**patient, "name": "Alex"})
    spec = CardiovascularSpec(
        seed=1,
        patient={**patient, "name": "Alex"},
        names=["Sam", "Alex"],
        controls={"name": 1},
    )
    original = [Message(role="user", content=spec.base_prompt)]
    swaps = [p for p in expand(original, [spec]) if p.id.startswith("cvd-control-name")]
    assert [fields_of(p.messages[0].content)["name"] for p in swaps] == ["Sam"]
