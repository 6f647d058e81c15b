"""Families: ids stable and unique, errors naming the spec, nothing heavy imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dbpa.perturbations import (
    CardiovascularSpec,
    PersonasSpec,
    PromptSpec,
    SamplingSpec,
    SystemPromptSpec,
    base_prompt,
    expand,
    parse_specs,
)
from dbpa.specs import Message

ORIGINAL = (Message(role="user", content="Should a 70-year-old smoker take a statin?"),)

FAMILY = [
    {"kind": "personas"},
    {"kind": "prompt", "variants": ["Is a statin advisable for a 70-year-old who smokes?"]},
    {"kind": "system_prompt", "variants": ["You are a cautious clinician."]},
    {"kind": "model", "models": [{"model": "openai/gpt-4o", "api_base": "http://h:1/v1"}]},
    {"kind": "sampling", "variants": [{"params": {"temperature": 1.5}}]},
]

_IDS_IN_A_FRESH_PROCESS = """
import json, sys
from dbpa.perturbations import expand, parse_specs
from dbpa.specs import Message
family = parse_specs(json.loads(sys.argv[1]))
original = [Message(role="user", content=sys.argv[2])]
print(json.dumps([p.id for p in expand(original, family)]))
"""


def test_ids_are_stable_across_calls_and_processes():
    ids = [p.id for p in expand(ORIGINAL, parse_specs(FAMILY))]
    assert len(ids) == len(set(ids)) == 8 + 1 + 1 + 1 + 1
    assert ids == [p.id for p in expand(ORIGINAL, parse_specs(FAMILY))]
    for hash_seed in ("1", "2"):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                _IDS_IN_A_FRESH_PROCESS,
                json.dumps(FAMILY),
                ORIGINAL[0].content,
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert json.loads(out.stdout) == ids


def test_duplicate_ids_are_rejected_with_their_names():
    specs = [PersonasSpec(), PersonasSpec(values=["nurse", "doctor"])]
    with pytest.raises(ValueError, match=r"'persona-doctor' from perturbations\[0, 1\]") as info:
        expand(ORIGINAL, specs)
    assert "'persona-nurse'" in str(info.value)
    assert "prefix" in str(info.value)
    explicit = [PromptSpec(variants=[{"text": "A?", "id": "x"}, {"text": "B?", "id": "x"}])]
    with pytest.raises(ValueError, match=r"'x' from perturbations\[0, 0\]"):
        expand(ORIGINAL, explicit)


def test_a_prefix_tells_families_apart():
    family = expand(ORIGINAL, [PersonasSpec(), PersonasSpec(prefix="role", values=["doctor"])])
    assert family[-1].id == "role-doctor"


def test_a_perturbation_that_changes_nothing_is_an_error():
    same = PromptSpec(variants=[ORIGINAL[0].content])
    with pytest.raises(ValueError, match=r"perturbations\[1\] \(prompt\): .* changes nothing"):
        expand(ORIGINAL, [SamplingSpec(variants=[{"params": {"top_p": 0.5}}]), same])


def test_spec_errors_name_the_spec():
    with pytest.raises(
        ValueError, match=r"perturbations\[1\] \(system_prompt\): .*system messages"
    ):
        expand(
            (Message(role="system", content="A"), Message(role="system", content="B"), *ORIGINAL),
            [PromptSpec(variants=["Other?"]), SystemPromptSpec(variants=["C"])],
        )
    with pytest.raises(ValueError, match=r"perturbations\[0\] \(personas\): .*no user message"):
        expand([Message(role="system", content="A")], [PersonasSpec()])


def test_originals_given_as_mappings_are_validated():
    family = expand([{"role": "user", "content": "Hi?"}], [PromptSpec(variants=["Hello?"])])
    assert family[0].messages == (Message(role="user", content="Hello?"),)
    with pytest.raises(ValueError, match="role"):
        expand([{"role": "robot", "content": "Hi?"}], [PromptSpec(variants=["Hello?"])])


def test_base_prompt_of_a_family():
    assert base_prompt([PersonasSpec()]) is None
    one, other = CardiovascularSpec(seed=1), CardiovascularSpec(seed=2, prefix="cvd2")
    assert base_prompt([PersonasSpec(), one]) == one.base_prompt
    with pytest.raises(ValueError, match=r"perturbations \[0, 1\] render different"):
        base_prompt([one, other])


def test_record_families_combine_with_prompt_perturbations():
    cvd = CardiovascularSpec(seed=4)
    original = [Message(role="user", content=cvd.base_prompt)]
    family = expand(original, [cvd, PersonasSpec(values=["child"])])
    assert family[-1].messages[0].content == f"Act as a child. {cvd.base_prompt}"


def test_importing_the_perturbations_pulls_in_nothing_heavy():
    heavy = ["torch", "sentence_transformers", "litellm", "prefect", "duckdb", "pandas"]
    code = (
        f"import sys, dbpa.perturbations; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
