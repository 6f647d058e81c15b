"""The audit config: flat analysis settings in the file and in the dump, one ``AnalysisSpec``
inside, and a fingerprint that does not depend on how the settings are held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dbpa.analysis import AnalysisSpec
from dbpa.config import AuditConfig, ConfigError, load_config, parse_config
from dbpa.plan import plan_audit

CONFIG: dict[str, Any] = {
    "name": "pinned",
    "models": [{"model": "openai/gpt-4o-mini", "params": {"temperature": 0.7}}],
    "prompt": "Should a 70-year-old smoker take a statin?",
    "perturbations": [{"kind": "personas"}],
    "k": 12,
    "omega": "energy_l2",
    "n_permutations": 999,
    "alpha": 0.01,
    "correction": "bh",
    "seed": 3,
}
# Computed once with the code of main before AuditConfig held an AnalysisSpec (it subclassed
# it): the stored config JSON, its hash and the test ids must not change with the layout.
# The seed became part of every arm on 2026-11-27: the first test id of seed 3 changed then
# (it was 2d51046465c1773d8202edca93bb54b8), that of seed 0 (the default) did not.
FINGERPRINT = "2fd102b6b8b16429ab44a42aa05d3272"
FIRST_TEST_ID = "698e71c3fecc34663c5af0807e490212"
FIRST_TEST_ID_SEED_0 = "3c21e637d428f5b60387cd66c82f9739"
DUMPED_KEYS = [
    "similarity",
    "omega",
    "omega_options",
    "n_permutations",
    "alpha",
    "correction",
    "name",
    "description",
    "models",
    "prompt",
    "perturbations",
    "k",
    "embedder",
    "seed",
    "epoch",
]


def test_the_fingerprint_and_the_test_ids_are_pinned():
    config = parse_config(CONFIG)
    assert config.fingerprint() == FINGERPRINT
    assert plan_audit(config).tests[0].test_id == FIRST_TEST_ID
    default_seed = parse_config(CONFIG | {"seed": 0})
    assert plan_audit(default_seed).tests[0].test_id == FIRST_TEST_ID_SEED_0


def test_the_analysis_settings_are_one_spec_inside_and_flat_outside():
    config = parse_config(CONFIG)
    assert config.analysis == AnalysisSpec(
        omega="energy_l2", n_permutations=999, alpha=0.01, correction="bh"
    )
    dumped = config.model_dump(mode="json")
    assert list(dumped) == DUMPED_KEYS
    assert dumped["omega"] == "energy_l2"
    assert "analysis" not in dumped
    assert parse_config(dumped) == config
    assert not hasattr(config, "omega")


def test_defaults_fill_the_analysis_settings_not_given():
    bare = {k: v for k, v in CONFIG.items() if k not in AnalysisSpec.model_fields}
    assert parse_config(bare).analysis == AnalysisSpec()


def test_an_override_edits_the_flat_key(tmp_path: Path):
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    config = load_config(path, {"omega": "jsd", "n_permutations": 4999})
    assert (config.analysis.omega, config.analysis.n_permutations) == ("jsd", 4999)
    assert config == parse_config(CONFIG | {"omega": "jsd", "n_permutations": 4999})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"omega": "jensen"}, r"^f\.yaml: omega: unknown 'jensen'; choose one of jsd, "),
        ({"n_permutations": 0}, r"^f\.yaml: n_permutations: Input should be greater than or "),
        ({"n_permutations": 10}, r"^f\.yaml: n_permutations: 10 permutations cannot reject "),
        ({"omega_options": 3}, r"^f\.yaml: omega_options: Input should be a valid dictionary$"),
        ({"analysis": {"omega": "jsd"}}, r"^f\.yaml: analysis: unknown key \(check its spelling"),
    ],
)
def test_errors_name_the_key_as_written_in_the_file(change: dict[str, Any], message: str):
    with pytest.raises(ConfigError, match=message):
        parse_config(CONFIG | change, source="f.yaml")


def test_a_flow_parameter_validates_from_the_config_and_from_its_json():
    from prefect import flow

    @flow
    def takes(config: AuditConfig) -> None:
        """A flow with the audit flow's parameter."""

    config = parse_config(CONFIG)
    serialized = takes.serialize_parameters({"config": config})["config"]
    assert serialized == config.model_dump(mode="json")
    for given in (config, serialized):
        assert takes.validate_parameters({"config": given})["config"] == config
    schema = takes.parameters.definitions["AuditConfig"]["properties"]
    assert {"omega", "n_permutations", "name"} <= set(schema)
    assert "analysis" not in schema
