"""The ``monitor`` key: its default leaves the dump and fingerprint as they were, its one
setting is validated with an error naming the key, and it takes the library's choices."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
import yaml

from dbpa.analysis import MonitorSpec
from dbpa.config import ConfigError, load_config, parse_config, parse_overrides
from dbpa.drift import POOLS
from dbpa.stats import MONITOR_CONFORMAL
from tests.config.test_config import CONFIG, DUMPED_KEYS, FINGERPRINT
from tests.config.test_prompt_sets import SET_BASE


def test_without_the_key_the_config_dumps_and_fingerprints_as_before():
    config = parse_config(CONFIG)
    assert config.monitor.conformal == "both"
    assert list(config.model_dump(mode="json")) == DUMPED_KEYS
    assert config.fingerprint() == FINGERPRINT


def test_a_dump_that_leaves_out_unset_fields_leaves_out_the_key():
    """What Prefect does with a Dask task runner's parameters (the dump failed on the key)."""
    dumped = parse_config(CONFIG).model_dump(mode="json", exclude_unset=True)
    assert "monitor" not in dumped
    assert dumped["k"] == CONFIG["k"]


def test_a_chosen_design_is_dumped_and_read_back():
    config = parse_config({**CONFIG, "monitor": {"conformal": "outputs"}})
    assert config.monitor == MonitorSpec(conformal="outputs")
    dumped = config.model_dump(mode="json")
    assert dumped["monitor"] == {"conformal": "outputs"}
    assert parse_config(dumped) == config
    assert config.fingerprint() != FINGERPRINT


def test_the_choices_are_the_monitors():
    assert get_args(MonitorSpec.model_fields["conformal"].annotation) == MONITOR_CONFORMAL
    assert get_args(MonitorSpec.model_fields["pool"].annotation) == POOLS


def test_pooling_is_dumped_only_when_not_the_default():
    config = parse_config({**CONFIG, "monitor": {"conformal": "outputs", "pool": "prompts"}})
    assert config.model_dump(mode="json")["monitor"] == {"conformal": "outputs"}
    alone = parse_config({**CONFIG, "monitor": {"pool": "arms"}})
    assert alone.model_dump(mode="json")["monitor"] == {"conformal": "both", "pool": "arms"}
    assert parse_config(alone.model_dump(mode="json")) == alone


def test_set_monitor_conformal_works_on_any_config(tmp_path: Path):
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    overrides = parse_overrides(["monitor.conformal=ticks"])
    assert load_config(path, overrides).monitor.conformal == "ticks"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"conformal": "pairs"}, "monitor.conformal: Input should be 'outputs', 'ticks' or 'both'"),
        ({"conformal": 3}, "monitor.conformal"),
        ({"pool": "models"}, "monitor.pool: Input should be 'prompts' or 'arms'"),
        ({"tolerance": 1.0}, "monitor.tolerance: Input should be less than 1"),
        ({"tolerance": -0.1}, "monitor.tolerance"),
        ("both", "monitor: Input should be"),
    ],
)
def test_errors_name_the_key(value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({**CONFIG, "monitor": value})


def test_a_tolerance_is_dumped_only_when_set():
    config = parse_config({**CONFIG, "monitor": {"tolerance": 0.3}})
    assert config.model_dump(mode="json")["monitor"] == {"conformal": "both", "tolerance": 0.3}
    assert parse_config(config.model_dump(mode="json")) == config
    assert "tolerance" not in parse_config(CONFIG).monitor.model_dump(mode="json")


def test_a_tolerance_beyond_the_baselines_reach_is_noted_with_the_k_needed():
    """CONFIG: 8 perturbations, so 9 series at alpha = 0.01 / 9; each baseline output gains
    at most log(1 + 0.95 * 0.3 / 1.3) = 0.1982, and log(900) / 0.1982 = 34.3: 35 outputs;
    any test: log(900) / -log(0.7) = 19.1: 20."""
    (note,) = parse_config({**CONFIG, "monitor": {"tolerance": 0.3}}).budget.notes
    assert note.startswith("monitor.tolerance: at 0.3 ")
    assert "at least 35 baseline outputs per series" in note
    assert "fewer than 20" in note
    assert "a series has k=12" in note
    assert "k >= 35 is the least that can" in note
    assert parse_config({**CONFIG, "k": 35, "monitor": {"tolerance": 0.3}}).budget.notes == ()
    assert parse_config({**CONFIG, "k": 34, "monitor": {"tolerance": 0.3}}).budget.notes
    assert parse_config(CONFIG).budget.notes == ()


def test_over_a_set_the_pooled_prompts_share_the_baseline():
    """4 perturbations over 3 prompts at k = 5, alpha = 0.05: pooled, 5 series of 3 x 5 = 15
    outputs each, log(100) / 0.1982 = 23.2: 24, so k >= 8; each arm alone, 15 series of 5,
    log(300) / 0.1982 = 28.8: 29."""
    prompts = ["What is 2+2?", "Name a colour.", "Why?"]
    pooled = {**SET_BASE, "prompts": prompts, "k": 5, "monitor": {"tolerance": 0.3}}
    (note,) = parse_config(pooled).budget.notes
    assert "at least 24 baseline outputs per series (each of 5 series" in note
    assert "k=5 x 3 prompts = 15" in note
    assert "k >= 8 is the least" in note
    assert parse_config({**pooled, "k": 8}).budget.notes == ()
    alone = {**pooled, "monitor": {"tolerance": 0.3, "pool": "arms"}}
    (note,) = parse_config(alone).budget.notes
    assert "at least 29 baseline outputs per series (each of 15 series" in note
