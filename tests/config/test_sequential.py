"""The ``sequential`` key: its forms, its errors, its design and what each look tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from dbpa.analysis import SequentialSpec
from dbpa.config import ConfigError, load_config, parse_config
from dbpa.plan import look_plan, plan_audit
from dbpa.stats import SequentialDesign
from tests.config.test_config import CONFIG, DUMPED_KEYS, FINGERPRINT


def test_without_the_switch_the_config_dumps_and_fingerprints_as_before():
    config = parse_config(CONFIG)
    assert config.sequential is None
    assert list(config.model_dump(mode="json")) == DUMPED_KEYS
    assert config.fingerprint() == FINGERPRINT


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, SequentialSpec()),
        (False, None),
        ({"first": 6, "looks": 3}, SequentialSpec(first=6, looks=3)),
        ({"futility": False}, SequentialSpec(futility=None)),
    ],
)
def test_the_switch_and_its_object_form(value, expected):
    assert parse_config({**CONFIG, "sequential": value}).sequential == expected


def test_set_sequential_true_works_on_any_config(tmp_path: Path):
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    assert load_config(path, {"sequential": True}).sequential == SequentialSpec()
    tuned = load_config(path, {"sequential.first": 5, "sequential.futility": 0.1})
    assert tuned.sequential == SequentialSpec(first=5, futility=0.1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"first": 1}, "sequential.first: Input should be greater than or equal to 2"),
        ({"looks": 0}, "sequential.looks: Input should be greater than or equal to 1"),
        ({"final_weight": 0}, "sequential.final_weight: Input should be greater than 0"),
        ({"futility": 1.0}, "sequential.futility: Input should be less than 1"),
        ({"first_look": 8}, "sequential.first_look"),
    ],
)
def test_errors_name_the_key(value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({**CONFIG, "sequential": value})


def test_the_defaults_look_at_8_12_16_20_and_k_is_the_maximum():
    spec = SequentialSpec()
    assert spec.design(20) == SequentialDesign(
        looks=(8, 12, 16, 20), weights=pytest.approx((0.1, 0.1, 0.1, 0.7)), futility=0.2
    )
    assert spec.design(5).looks == (5,)  # k below the first look: one look, the fixed design


def test_an_equivalence_margin_turns_futility_stops_off():
    spec = SequentialSpec(futility=0.3)
    assert spec.design(20).futility == 0.3
    with_margin = spec.design(20, equivalence=True)
    assert with_margin.futility is None
    assert with_margin.looks == spec.design(20).looks


def test_a_look_tests_the_open_tests_at_its_k_with_their_own_ids():
    config = parse_config({**CONFIG, "sequential": True})
    plan = plan_audit(config)
    one = plan.tests[:1]
    look = look_plan(plan, config.analysis, 8, one)
    assert look.k == 8
    assert {a.arm_id for a in look.arms} == {one[0].original.arm_id, one[0].perturbed.arm_id}
    assert look.tests[0].perturbation == one[0].perturbation
    assert look.tests[0].test_id != one[0].test_id  # another k, another test
    again = look_plan(plan, config.analysis, 8, one)
    assert again.tests[0].test_id == look.tests[0].test_id  # a function of the plan and k
