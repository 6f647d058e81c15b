"""The ``equivalence`` key: its forms, its errors, and what it adds to the plan."""

from __future__ import annotations

from typing import Any

import pytest

from dbpa.analysis import EquivalenceSpec
from dbpa.config import ConfigError, parse_config
from dbpa.plan import plan_audit
from tests.config.test_config import CONFIG, DUMPED_KEYS, FINGERPRINT, FIRST_TEST_ID

CONTROLLED = {
    **CONFIG,
    "perturbations": [{"kind": "personas", "values": [{"value": "doctor", "label": "control"}]}],
}


def test_without_equivalence_the_config_and_its_plan_are_as_before():
    config = parse_config(CONFIG)
    assert config.equivalence is None
    assert list(config.model_dump()) == DUMPED_KEYS
    assert config.fingerprint() == FINGERPRINT
    plan = plan_audit(config)
    assert plan.replicates == {}
    assert plan.tests[0].test_id == FIRST_TEST_ID


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, EquivalenceSpec(margin="replicates", replicates=3, quantile=0.95)),
        ({}, EquivalenceSpec()),
        ({"margin": 0.02}, EquivalenceSpec(margin=0.02)),
        ({"margin": 1}, EquivalenceSpec(margin=1.0)),
        ({"margin": "controls", "quantile": 0.9}, EquivalenceSpec(margin="controls", quantile=0.9)),
        (False, None),
        (None, None),
    ],
)
def test_forms(value: Any, expected: EquivalenceSpec | None):
    assert parse_config({**CONTROLLED, "equivalence": value}).equivalence == expected


def test_replicate_arms_are_planned_per_model_with_ids_of_their_own():
    two_models = [{"model": "openai/gpt-4o-mini"}, {"model": "openai/gpt-4o", "name": "big"}]
    config = parse_config({**CONFIG, "models": two_models, "equivalence": {"replicates": 2}})
    plan = plan_audit(config)
    without = plan_audit(parse_config({**CONFIG, "models": two_models}))
    assert set(plan.replicates) == {"openai/gpt-4o-mini", "big"}  # the models' labels
    replicate_ids = {a.arm_id for arms in plan.replicates.values() for a in arms}
    assert len(replicate_ids) == 4
    assert {a.arm_id for a in plan.arms} == {a.arm_id for a in without.arms} | replicate_ids
    for family in plan.families:
        original = next(t.original for t in plan.tests if t.family == family)
        for r, arm in enumerate(plan.replicates[family], start=1):
            assert (arm.replicate, arm.messages, arm.model) == (
                r,
                original.messages,
                original.model,
            )
    # the tests and their ids do not change: replicates are never tested
    assert [t.test_id for t in plan.tests] == [t.test_id for t in without.tests]


def test_a_fixed_margin_plans_no_replicate_arm():
    config = parse_config({**CONFIG, "equivalence": {"margin": 0.1}})
    assert len(plan_audit(config).arms) == len(plan_audit(parse_config(CONFIG)).arms)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"margin": 0}, "equivalence.margin: must be a positive number, replicates or controls"),
        ({"margin": "wide"}, "equivalence.margin: must be a positive number, replicates or"),
        ({"margin": float("inf")}, "equivalence.margin: must be a positive number"),
        ({"replicates": 0}, "equivalence.replicates: Input should be greater than or equal to 1"),
        ({"quantile": 1.5}, "equivalence.quantile: Input should be less than 1"),
        ({"multiple": 0}, "equivalence.multiple: Input should be greater than 0"),
        ({"margin": 0.1, "multiple": 2}, "equivalence: multiple: scales a calibrated margin"),
        ({"margins": 0.1}, "equivalence.margins"),
        (3, "equivalence: Input should be a valid dictionary"),
    ],
)
def test_errors_name_the_field(value: Any, message: str):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        parse_config({**CONFIG, "equivalence": value})


def test_a_margin_from_controls_needs_a_control():
    targets = [{"kind": "personas", "values": [{"value": "comedian", "label": "target"}]}]
    message = r"equivalence\.margin: controls calibrates the margin on the perturbations labelled"
    with pytest.raises(ConfigError, match=message):
        parse_config({**CONFIG, "perturbations": targets, "equivalence": {"margin": "controls"}})
