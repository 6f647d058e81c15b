"""What differs between two runs' stored configs, in words (``dbpa compare``)."""

from __future__ import annotations

import copy

from dbpa.config import parse_config
from dbpa.report import ConfigDifference, config_differences

BASE = {
    "name": "triage",
    "prompt": "My flu has lasted two days. Should I see a doctor?",
    "perturbations": [{"kind": "personas", "values": ["doctor", "comedian"]}],
    "models": [{"model": "openai/gpt-4o-mini", "max_concurrency": 8}],
    "k": 20,
}


def _stored(**changes) -> dict:
    """A config as a run stores it (every default filled in), with ``changes``."""
    config = copy.deepcopy(BASE) | changes
    return parse_config(config).model_dump(mode="json")


def test_the_same_config_has_no_difference():
    assert config_differences(_stored(), _stored()) == ()


def test_each_setting_that_differs_is_said_in_order():
    a = _stored()
    b = _stored(k=40, seed=3, correction="bh", alpha=0.01, epoch="2025-06", n_permutations=4999)
    assert config_differences(a, b) == (
        ConfigDifference("epoch", "0", "2025-06"),
        ConfigDifference("k", "20", "40"),
        ConfigDifference("seed", "0", "3"),
        ConfigDifference("correction", "holm", "bh"),
        ConfigDifference("alpha", "0.05", "0.01"),
        ConfigDifference("B (permutations)", "2000", "4999"),
    )


def test_a_model_is_named_with_what_changes_its_answers_not_how_it_is_called():
    a = _stored()
    calmer = [{"model": "openai/gpt-4o-mini", "max_concurrency": 2, "timeout_s": 30}]
    assert config_differences(a, _stored(models=calmer)) == ()
    other = [{"model": "openai/gpt-4o", "params": {"temperature": 0.2}, "name": "big"}]
    (difference,) = config_differences(a, _stored(models=other))
    assert difference == ConfigDifference(
        "model(s)", "openai/gpt-4o-mini", 'big: openai/gpt-4o {"params": {"temperature": 0.2}}'
    )


def test_equivalence_sequential_and_the_embedder_are_settings_too():
    a = _stored()
    b = _stored(
        equivalence={"margin": 0.1},
        sequential=True,
        embedder={"backend": "litellm", "model": "openai/text-embedding-3-small"},
    )
    said = {d.setting: (d.a, d.b) for d in config_differences(a, b)}
    assert said["equivalence"][0] == "none"
    assert '"margin": 0.1' in said["equivalence"][1]
    assert said["sequential"][0] == "none"
    assert '"first": 8' in said["sequential"][1]
    assert said["embedder"] == (
        "sentence-transformers/all-MiniLM-L6-v2",
        "litellm/openai/text-embedding-3-small",
    )


def test_a_difference_the_words_cannot_show_says_so():
    long = "x" * 200
    a, b = _stored(prompt=long + "a"), _stored(prompt=long + "b")
    (difference,) = config_differences(a, b)
    assert difference.setting == "prompt"
    assert difference.b == difference.a + " (differs in what is not shown)"
    other = _stored(perturbations=[{"kind": "personas", "values": ["nurse", "child"]}])
    (family,) = config_differences(_stored(), other)
    assert family.setting == "perturbations"
    assert family.b.endswith("(differs in what is not shown)")


def test_a_key_it_does_not_know_is_compared_as_it_is_stored():
    assert config_differences({"future": 1}, {"future": 2}) == (
        ConfigDifference("future", "1", "2"),
    )
    assert config_differences({"description": "a"}, {"description": "b"}) == ()
