"""``prompts:``: a list or a dataset of prompts, every perturbation applied to each."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from dbpa.arms import Arm
from dbpa.config import ConfigError, load_config, parse_config
from dbpa.plan import look_plan, plan_audit
from tests.config.conftest import BASE, Validate, flat

QUESTIONS = [
    {"qid": "q1", "question": "What is 2+2?", "topic": "maths"},
    {"qid": "q2", "question": "Name a colour.", "topic": "art"},
    {"qid": "q3", "question": "Why is the sky blue?", "topic": "physics"},
    {"qid": "q4", "question": "What is rain?", "topic": "physics"},
]
SET_BASE: dict[str, Any] = {
    **{key: value for key, value in BASE.items() if key != "prompt"},
    "perturbations": [
        {"kind": "personas", "values": ["doctor", "comedian"]},
        {"kind": "sampling", "variants": [{"params": {"temperature": 0.2}}]},
        {"kind": "system_prompt", "variants": ["Be brief."]},
    ],
}


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _config_file(tmp_path: Path, prompts: Any, **extra: Any) -> Path:
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump({**SET_BASE, "prompts": prompts, **extra}, sort_keys=False))
    return path


def test_a_list_of_strings_messages_and_items_with_ids():
    config = parse_config(
        {
            **SET_BASE,
            "prompts": [
                "What is 2+2?",
                [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "3+3?"}],
                {"id": "colour", "prompt": "Name a colour."},
            ],
        }
    )
    ids = [pid for pid, _ in config.prompt_set]
    assert ids == ["p1", "p2", "colour"]
    assert config.prompt_set[1][1][0].role == "system"
    assert [p.id for p in config.family] == [
        "persona-doctor",
        "persona-comedian",
        "sampling-temperature-0.2",
        "system-be-brief",
    ]
    assert len(config.set_family.per_prompt) == 3


def test_every_prompt_gets_every_perturbation_and_its_arms_are_its_own_audits():
    """A prompt's arms are those of an audit of that prompt alone: one record serves both."""
    config = parse_config({**SET_BASE, "prompts": ["What is 2+2?", "Name a colour."]})
    plan = plan_audit(config)
    assert len(plan.tests) == 4  # one pooled test per perturbation
    assert len(plan.prompt_tests) == 8
    single = plan_audit(parse_config({**SET_BASE, "prompt": "Name a colour."}))
    second = {t.perturbation.id: t for t in plan.prompt_tests if t.prompt_id == "p2"}
    for t in single.tests:
        assert second[t.perturbation.id].original.arm_id == t.original.arm_id
        assert second[t.perturbation.id].perturbed.arm_id == t.perturbed.arm_id
        assert second[t.perturbation.id].test_id == t.test_id
    persona = second["persona-doctor"].perturbed.messages[-1].content
    assert "doctor" in persona
    assert "Name a colour." in persona
    sampled = {
        t.perturbed.model.params["temperature"]
        for t in plan.prompt_tests
        if t.perturbation.kind == "sampling"
    }
    assert sampled == {0.2}


def test_replicate_arms_of_a_set_are_each_prompts_own_audits():
    """``margin: replicates`` over a set plans every prompt's replicate arms, with the ids an
    audit of that prompt alone gives them (one record serves both); the tests are as
    without a margin, and ``controls`` plans no replicate arm."""
    prompts = ["What is 2+2?", "Name a colour.", "Why is the sky blue?"]
    config = parse_config({**SET_BASE, "prompts": prompts, "equivalence": {"replicates": 2}})
    plan = plan_audit(config)
    without = plan_audit(parse_config({**SET_BASE, "prompts": prompts}))
    assert [t.test_id for t in plan.all_tests] == [t.test_id for t in without.all_tests]
    (family,) = plan.families
    assert len(plan.replicates[family]) == 3 * 2
    planned = {a.arm_id for a in plan.arms}
    assert planned == {a.arm_id for a in without.arms} | {a.arm_id for a in plan.replicates[family]}
    for position, prompt in enumerate(prompts):
        single = plan_audit(
            parse_config({**SET_BASE, "prompt": prompt, "equivalence": {"replicates": 2}})
        )
        original = next(t.original for t in plan.prompt_tests if t.prompt_id == f"p{position + 1}")
        own = plan.replicates_of(original)
        assert [a.arm_id for a in own] == [a.arm_id for a in single.replicates[family]]
        assert [a.replicate for a in own] == [1, 2]
    controls = {**SET_BASE, "prompts": prompts, "equivalence": {"margin": "controls"}}
    controls["perturbations"] = [
        {"kind": "personas", "values": [{"value": "doctor", "label": "control"}]}
    ]
    assert plan_audit(parse_config(controls)).replicates == {}


def test_a_single_prompt_config_dumps_and_plans_as_before():
    config = parse_config(BASE)
    assert "prompts" not in config.model_dump()
    assert config.prompt_set == [("prompt", config.messages)]
    plan = plan_audit(config)
    assert plan.set_members == {}
    assert plan.unit_tests == plan.tests
    original = Arm.of(config.models[0], config.messages, "0")
    assert plan.tests[0].original.arm_id == original.arm_id


def test_a_stored_set_config_validates_again_to_the_same_fingerprint(tmp_path: Path):
    data = _jsonl(tmp_path / "q.jsonl", QUESTIONS)
    config = load_config(_config_file(tmp_path, {"path": data.name, "template": "{question}"}))
    dumped = config.model_dump(mode="json")
    assert "prompt" not in dumped
    assert len(dumped["prompts"]) == 4
    again = parse_config(dumped)
    assert again.fingerprint() == config.fingerprint()
    assert again.prompt_set == config.prompt_set


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_dataset_fills_the_template_per_row(tmp_path: Path, suffix: str):
    frame = pd.DataFrame(QUESTIONS)
    data = tmp_path / f"q{suffix}"
    if suffix == ".jsonl":
        _jsonl(data, QUESTIONS)
    elif suffix == ".csv":
        frame.to_csv(data, index=False)
    else:
        frame.to_parquet(data)
    spec = {"path": data.name, "template": "[{topic}] {question}", "id": "qid"}
    config = load_config(_config_file(tmp_path, spec))
    assert config.prompt_set[2] == (
        "q3",
        tuple(parse_config({**BASE, "prompt": "[physics] Why is the sky blue?"}).messages),
    )
    assert [pid for pid, _ in config.prompt_set] == ["q1", "q2", "q3", "q4"]


def test_without_an_id_column_rows_are_named_by_number(tmp_path: Path):
    data = _jsonl(tmp_path / "q.jsonl", QUESTIONS)
    config = load_config(_config_file(tmp_path, {"path": str(data), "template": "{question}"}))
    assert [pid for pid, _ in config.prompt_set] == ["row-1", "row-2", "row-3", "row-4"]


def test_a_sample_is_a_seeded_subset_in_file_order(tmp_path: Path):
    rows = [{"qid": f"q{i}", "question": f"Question number {i}?"} for i in range(50)]
    data = _jsonl(tmp_path / "q.jsonl", rows)

    def ids(seed: int) -> list[str]:
        spec = {
            "path": data.name,
            "template": "{question}",
            "id": "qid",
            "sample": 10,
            "seed": seed,
        }
        return [pid for pid, _ in load_config(_config_file(tmp_path, spec)).prompt_set]

    first = ids(0)
    assert len(first) == 10
    assert len(set(first)) == 10
    assert first == sorted(first, key=lambda q: int(q[1:]))
    assert ids(0) == first
    assert ids(1) != first


@pytest.mark.parametrize(
    ("rows", "spec", "expected"),
    [
        (QUESTIONS, {"template": "{prompt}"}, r"no column 'prompt' \(its columns: qid, question"),
        (QUESTIONS, {"template": "{question}", "id": "key"}, r"no column 'key'"),
        (
            [*QUESTIONS, {"qid": "q2", "question": "Again?"}],
            {"template": "{question}", "id": "qid"},
            r"row 5, column 'qid': id 'q2' is also the id of row 2",
        ),
        (
            [{"qid": "", "question": "Hi?"}],
            {"template": "{question}", "id": "qid"},
            r"row 1, column 'qid': empty id",
        ),
        (
            [QUESTIONS[0], {"qid": "q9", "question": "  "}],
            {"template": "{question}", "id": "qid"},
            r"row 2, column 'question': empty \(no text to ask\)",
        ),
        (
            [QUESTIONS[0], {"qid": "q9"}],
            {"template": "{question}", "id": "qid"},
            r"row 2, column 'question': empty",
        ),
        (
            [{"qid": "a b", "question": "Hi?"}],
            {"template": "{question}", "id": "qid"},
            r"row 1, column 'qid': id 'a b' is not an id",
        ),
        (QUESTIONS, {"template": "{question}", "sample": 9}, r"sample 9 asked, the file has 4"),
        (QUESTIONS, {"template": "no placeholder"}, r"name a column in braces"),
    ],
)
def test_dataset_errors_exit_2_naming_file_row_and_column(
    tmp_path: Path,
    validate: Validate,
    rows: list[dict[str, Any]],
    spec: dict[str, Any],
    expected: str,
):
    data = _jsonl(tmp_path / "q.jsonl", rows)
    path = _config_file(tmp_path, {"path": data.name, **spec})
    result = validate(path)
    assert result.exit_code == 2, result.output
    message = flat(result)
    assert str(path) in message
    assert str(data) in message
    assert re.search(expected, message), message


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("missing.jsonl", None, "no such file"),
        ("q.txt", "hello", "unknown file type '.txt'"),
        ("q.jsonl", "{not json\n", "cannot be read as jsonl"),
        ("q.parquet", "not parquet", "cannot be read as parquet"),
    ],
)
def test_an_unreadable_dataset_exits_2_naming_the_file(
    tmp_path: Path, validate: Validate, name: str, content: str | None, expected: str
):
    if content is not None:
        (tmp_path / name).write_text(content)
    path = _config_file(tmp_path, {"path": name, "template": "{question}"})
    result = validate(path)
    assert result.exit_code == 2, result.output
    assert str(tmp_path / name) in flat(result)
    assert expected in flat(result)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"prompt": "Other?"}, "prompt and prompts: give one of them"),
        ({"prompts": []}, "prompts: needs at least one prompt"),
        ({"prompts": ["a?", {"id": "p1", "prompt": "b?"}]}, "id 'p1' is also the id of item [0]"),
        ({"prompts": ["a?", ""]}, "prompts[1]: empty prompt"),
        ({"prompts": [{"id": "", "prompt": "b?"}]}, "prompts[0].id"),
        (
            {
                "perturbations": [
                    {
                        "kind": "record",
                        "template": "Age {age}",
                        "fields": {"age": 3},
                        "edits": [{"field": "age", "value": 4}],
                    }
                ]
            },
            "(record): renders its own prompt",
        ),
        (
            {
                "prompts": ["What is 2+2?", [{"role": "system", "content": "Be exact."}]],
                "perturbations": [{"kind": "paraphrase", "model": "openai/gpt-4o-mini", "n": 2}],
            },
            "perturbations[0] (paraphrase): prompt 'p2': ",
        ),
    ],
)
def test_what_a_prompt_set_refuses_exits_2(
    tmp_path: Path, validate: Validate, extra: dict[str, Any], expected: str
):
    path = tmp_path / "audit.yaml"
    raw = {**SET_BASE, "prompts": ["What is 2+2?", "Name a colour."], **extra}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = validate(path)
    assert result.exit_code == 2, result.output
    assert expected in flat(result), result.output


@pytest.mark.parametrize("margin", [0.1, "replicates"])
def test_a_sequential_set_with_a_margin_validates_and_never_stops_for_futility(
    tmp_path: Path, validate: Validate, margin: float | str
):
    """Refused before the set-level equivalence p-values of the looks were combined; the
    design drops futility stops, as for one prompt."""
    extra = {"sequential": {"futility": 0.2}, "equivalence": {"margin": margin}}
    path = _config_file(tmp_path, ["What is 2+2?", "Name a colour."], **extra)
    result = validate(path)
    assert result.exit_code == 0, result.output
    config = load_config(path)
    assert config.sequential is not None
    assert config.equivalence is not None
    assert config.sequential.design(config.k, equivalence=True).futility is None
    replicates = [a for arms in plan_audit(config).replicates.values() for a in arms]
    copies = config.equivalence.replicate_arms
    assert copies == (3 if margin == "replicates" else 0)
    assert len(replicates) == 2 * copies  # each prompt's own


def test_a_sequential_set_looks_at_every_prompt_with_its_tests_rekeyed_at_each_k():
    """``sequential: true`` over a set: a look fills every prompt's arms of its open pooled
    tests to the look's k and keys each pooled test by its per-prompt tests at that k."""
    config = parse_config(
        {**SET_BASE, "prompts": ["What is 2+2?", "Name a colour."], "sequential": True}
    )
    assert config.sequential is not None
    plan = plan_audit(config)
    pooled = plan.tests[0]
    look = look_plan(plan, config.analysis, 8, [pooled])
    assert len(look.tests) == 1
    at_8 = look.tests[0]
    assert at_8.test_id not in plan.set_members  # a test of its own, not the k max one
    members = look.set_members[at_8.test_id]
    assert [m.prompt_id for m in members] == ["p1", "p2"]
    full = plan.set_members[pooled.test_id]
    assert {m.test_id for m in members}.isdisjoint(m.test_id for m in full)
    assert [(m.original, m.perturbed) for m in members] == [(m.original, m.perturbed) for m in full]
    expected = {a.arm_id for m in full for a in (m.original, m.perturbed)}
    assert {a.arm_id for a in look.arms} == expected
    assert look.k == 8
    # the same look planned again (after a resume) has the same ids
    assert look_plan(plan, config.analysis, 8, [pooled]).tests == look.tests


def test_validate_shows_the_paraphrases_a_set_will_generate_per_prompt(
    tmp_path: Path, validate: Validate
):
    paraphrase = {"kind": "paraphrase", "model": "openai/gpt-4o-mini", "n": 3, "seed": 4}
    raw = {
        **SET_BASE,
        "prompts": ["What is 2+2?", "Name a colour."],
        "perturbations": [*SET_BASE["perturbations"], paraphrase],
    }
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = validate(path)
    assert result.exit_code == 0, result.output
    shown = flat(result)
    # 4 known perturbations + at most 3 paraphrases, each one pooled test over the 2 prompts
    assert "1 model(s) x 7 perturbations x 2 prompts = 7 pooled tests (at most" in shown
    assert (
        "perturbations[3]: 3 paraphrases x 2 prompts = 6 (one generator arm per prompt; "
        "the set keeps as many as the prompt keeping fewest) to be generated by "
        "openai/gpt-4o-mini (seed 4)"
    ) in shown
    assert "persona-comedian" in shown  # the perturbations known already


def test_a_perturbation_that_does_not_apply_to_one_prompt_names_it():
    raw = {
        **SET_BASE,
        "prompts": ["Should Emily see a doctor?", {"id": "nobody", "prompt": "What is rain?"}],
        "perturbations": [{"kind": "swap", "swap": "names"}],
    }
    with pytest.raises(ConfigError, match="prompt 'nobody'"):
        parse_config(raw)


def test_a_b_too_small_for_the_drilldown_is_a_note_naming_the_b_needed():
    """3 perturbations x 20 prompts at alpha 0.05: a lone prompt of a lone perturbation is
    called moved at 0.05 / 60, which needs B >= 1199."""
    raw = {**SET_BASE, "prompts": [f"Question {i}?" for i in range(20)], "correction": "holm"}
    raw["perturbations"] = [
        *SET_BASE["perturbations"][1:],
        {"kind": "system_prompt", "variants": ["Be exact."]},
    ]
    few = parse_config({**raw, "n_permutations": 1198})
    assert any("one of 3 alone needs B >= 1199" in note for note in few.budget.notes)
    enough = parse_config({**raw, "n_permutations": 1199})
    assert not any("drill-down" in note for note in enough.budget.notes)


def test_model_swaps_noise_and_templates_apply_to_every_prompt():
    raw = {
        **SET_BASE,
        "prompts": ["Should a 70-year-old smoker take a statin?", "What helps a sore throat?"],
        "perturbations": [
            {"kind": "model", "models": [{"model": "openai/gpt-4o", "name": "bigger"}]},
            {"kind": "noise", "operations": ["typos"], "rate": 0.2, "variants": 1, "seed": 3},
            {
                "kind": "template",
                "placement": "suffix",
                "template": "Be {tone}.",
                "values": ["kind"],
            },
        ],
    }
    plan = plan_audit(parse_config(raw))
    by = {(t.prompt_id, t.perturbation.kind): t for t in plan.prompt_tests}
    for pid, text in (("p1", "statin"), ("p2", "sore throat")):
        assert by[(pid, "model")].perturbed.model.model == "openai/gpt-4o"
        assert text in by[(pid, "model")].perturbed.messages[-1].content
        noisy = by[(pid, "noise")].perturbed.messages[-1].content
        assert noisy != by[(pid, "noise")].original.messages[-1].content
        assert by[(pid, "template")].perturbed.messages[-1].content.endswith("Be kind.")
    assert {t.perturbation.id for t in plan.tests} == {t.perturbation.id for t in plan.prompt_tests}


@pytest.mark.parametrize(
    ("prompts", "where"),
    [
        (None, "unchanged (same model, parameters and messages)"),
        ([{"id": "a", "prompt": "Hi"}], "of prompt 'a' unchanged"),
    ],
)
def test_a_perturbation_that_leaves_the_arm_as_it_is_is_named(
    prompts: list[dict[str, str]] | None, where: str
) -> None:
    same = [{"kind": "sampling", "variants": [{"params": {"temperature": 0.7}}]}]
    raw = {**BASE, "perturbations": same, **({"prompts": prompts} if prompts else {})}
    if prompts:
        del raw["prompt"]
    with pytest.raises(ValueError, match="cannot be tested against itself") as caught:
        plan_audit(parse_config(raw))
    assert str(caught.value) == (
        f"perturbations: 'sampling-temperature-0.7' leaves the openai/gpt-4o-mini arm {where}; "
        "it cannot be tested against itself"
    )
