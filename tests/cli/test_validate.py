"""``dbpa validate``: a config checked and its plan shown, or exit 2 naming file and field."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.cli.conftest import invoke, shown_at, text
from tests.pipeline.conftest import make_config

pytestmark = pytest.mark.usefixtures("wide_console")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("name: x\nmodels: [", r"line \d+, column \d+: not valid YAML"),
        ("- just\n- a list\n", "expected a mapping of settings"),
        ("{base} \nsurprise: 1\n", "surprise: unknown key"),
        ("{base}\nk: ten\n", "k: Input should be a valid integer"),
        ("{base}\nomega: jensen\n", "omega: unknown 'jensen'"),
        ("{base}\nn_permutations: 10\n", "n_permutations: 10 permutations cannot reject anything"),
        ("{base}\nmodels: []\n", "models: List should have at least 1 item"),
        (
            "{base}\nperturbations: [{{kind: telepathy}}]\n",
            r"perturbations\[0\]: Input tag 'telepathy'",
        ),
        (
            "{base}\nembedder: {{model: not-a-model}}\n",
            "embedder.model: embedder model 'not-a-model' is not available offline",
        ),
    ],
)
def test_bad_configs_exit_2_naming_file_and_field(tmp_path, provider, content, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(content.format(base=yaml.safe_dump(make_config(provider))))
    result = invoke("validate", str(path))
    assert result.exit_code == 2, result.output
    assert str(path) in text(result) or "embedder.model" in text(result)
    assert re.search(expected, text(result)), result.output
    assert "Traceback" not in result.output


def test_missing_file_and_bad_override_exit_2(tmp_path, provider, write_config):
    assert invoke("validate", str(tmp_path / "nope.yaml")).exit_code == 2
    path = write_config(make_config(provider))
    result = invoke("validate", str(path), "--set", "k")
    assert result.exit_code == 2
    assert "expected KEY=VALUE" in text(result)
    result = invoke("validate", str(path), "--set", "k=1")
    assert result.exit_code == 2
    assert "k: Input should be greater than or equal to 2" in text(result)


def test_validate_describes_the_plan(provider, write_config):
    result = invoke("validate", str(write_config(make_config(provider))))
    assert result.exit_code == 0
    assert "4 tests, 5 arms x k=8 = 40 outputs" in text(result)
    assert "persona-comedian" in text(result)
    assert "equivalence" not in text(result)


@pytest.mark.parametrize(
    ("equivalence", "arms", "says"),
    [
        (
            {},
            8,
            "the 95th percentile of the distances between every two samples of the "
            "unperturbed model (3 replicate arm(s) of each original, sampled too)",
        ),
        (
            {"margin": "controls", "quantile": 0.9},
            5,
            "the 90th percentile of the distances between the original and each control",
        ),
        ({"margin": 0.05}, 5, "equivalence margin 0.05 (distance scale)"),
        (
            {"multiple": 2},
            8,
            "2 x the 95th percentile of the distances between every two samples of the ",
        ),
    ],
)
def test_validate_says_how_the_margin_will_be_set(provider, write_config, equivalence, arms, says):
    config = make_config(provider, equivalence=equivalence)
    result = invoke("validate", str(write_config(config)))
    assert result.exit_code == 0
    assert f"4 tests, {arms} arms x k=8 = {arms * 8} outputs" in text(result)
    assert says in text(result)
    assert "each perturbation changed, equivalent or inconclusive" in text(result)


def _huge_family(provider, m: int) -> dict:
    """A config of ``m`` perturbations: half template values labelled control, half prompt
    variants labelled target (B and k large enough for a family of m)."""
    half = m // 2
    return make_config(provider) | {
        "perturbations": [
            {
                "kind": "template",
                "template": "Answer in {style}.",
                "label": "control",
                "values": [f"tone {i}" for i in range(half)],
            },
            {
                "kind": "prompt",
                "label": "target",
                "variants": [f"Question {i}: my flu, what now?" for i in range(m - half)],
            },
        ],
        "k": 11,
        "n_permutations": 20 * m,
    }


@pytest.mark.parametrize("columns", [80, 40])
def test_validate_shows_every_id_whole_on_a_narrow_terminal(write_config, columns):
    """Ids are what a user types back (``--require-equivalent`` takes labels, reports and
    ``results`` name ids): never cut with an ellipsis nor folded, however narrow."""
    config = {
        "name": "narrow",
        "models": [{"model": "local/smollm2-135m"}],
        "prompt": "What should a man with a three-week cough do?",
        "perturbations": [
            {"kind": "system_prompt", "variants": ["Answer in one short sentence, please."]},
            {"kind": "sampling", "variants": [{"params": {"temperature": 0.6}}]},
        ],
    }
    shown = shown_at(columns, "validate", str(write_config(config)))
    ids = ["system-answer-in-one-short-sentence-please", "sampling-temperature-0.6"]
    for id_ in ids:
        assert re.search(rf"(?m)^{re.escape(id_)}\s", shown), shown
    assert "\u2026" not in shown


def test_validate_summarises_a_huge_family_and_lists_it_with_all(provider, write_config):
    path = write_config(_huge_family(provider, 10_000))
    result = invoke("validate", str(path))
    assert result.exit_code == 0, result.output
    shown = text(result)
    assert "1 model(s) x 10000 perturbations = 10000 tests" in shown
    assert re.search(r"template\s*│\s*control\s*│\s*5,000", result.output)
    assert re.search(r"prompt\s*│\s*target\s*│\s*5,000", result.output)
    assert "the first 5 and the last 5 of 10,000 perturbations (--all lists every one)" in shown
    for first in ("style-tone-0", "style-tone-4"):
        assert re.search(rf"(?m)^{first}\s", result.output)
    for last in ("prompt-question-4995", "prompt-question-4999"):
        assert re.search(rf"(?m)^{last}-my-flu", result.output)
    assert "style-tone-5 " not in result.output
    assert "prompt-question-4994" not in result.output
    assert len(result.output.splitlines()) < 60

    listed = invoke("validate", str(path), "--all")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    ids = [line.split()[0] for line in lines if line.startswith(("style-", "prompt-"))]
    assert len(ids) == len(set(ids)) == 10_000
    assert ids[0] == "style-tone-0"
    assert ids[-1].startswith("prompt-question-4999")


def test_validate_lists_a_family_of_up_to_300_in_full(provider, write_config):
    path = write_config(_huge_family(provider, 300))
    result = invoke("validate", str(path))
    assert result.exit_code == 0, result.output
    assert "--all lists every one" not in result.output
    assert all(f"style-tone-{i} " in result.output for i in range(150))
    assert all(re.search(rf"prompt-question-{i}-my", result.output) for i in range(150))


def _prompts(n: int) -> list[dict]:
    return [
        {"kind": "prompt", "variants": [f"Variant number {i} of the question?" for i in range(n)]}
    ]


def test_bh_over_1000_tests_at_b_999_is_accepted_with_a_note(provider, write_config):
    """It rejects 20 or more tests at p = 0.001; only a lone change is out of reach."""
    config = make_config(
        provider, perturbations=_prompts(1000), n_permutations=999, correction="bh", omega="jsd"
    )
    result = invoke("validate", str(write_config(config)))
    assert result.exit_code == 0, result.output
    assert "only when at least 20 tests reach it; a lone change needs B >= 19999" in text(result)


def test_a_tolerance_the_baseline_cannot_reach_is_noted(provider, write_config):
    """4 perturbations: 5 series at alpha = 0.05 / 5; each baseline output gains at most
    log(1 + 0.95 * 0.3 / 1.3) = 0.1982, log(100) / 0.1982 = 23.2: 24 outputs, k = 8."""
    config = make_config(provider, alpha=0.05, monitor={"tolerance": 0.3})
    result = invoke("validate", str(write_config(config)))
    assert result.exit_code == 0, result.output
    assert "monitor.tolerance: at 0.3" in text(result)
    assert "k >= 24 is the least that can" in text(result)
    enough = invoke("validate", str(write_config({**config, "k": 24}, "enough.yaml")))
    assert "monitor.tolerance" not in text(enough)


def test_holm_over_1000_tests_at_b_999_can_never_reject_and_is_refused(provider, write_config):
    config = make_config(
        provider,
        perturbations=_prompts(1000),
        n_permutations=999,
        correction="holm",
        omega="jsd",
        k=10,
    )
    result = invoke("validate", str(write_config(config)))
    assert result.exit_code == 2
    assert "999 permutations cannot reject anything in a family of 1000" in text(result)
    assert "use at least 19999" in text(result)


def test_bh_is_refused_only_where_no_number_of_tests_can_pass(provider, write_config):
    config = make_config(provider, n_permutations=18, correction="bh", omega="jsd")
    assert invoke("validate", str(write_config(config))).exit_code == 2
    config = make_config(provider, n_permutations=19, correction="bh", omega="jsd")
    assert invoke("validate", str(write_config(config))).exit_code == 0


def test_auto_is_told_the_b_a_change_in_one_aspect_needs(provider, write_config):
    """4 tests with Holm at 0.05: a lone change must pass 0.0125; auto's p for a change in one
    aspect alone is about 2/(B+1), so it needs B >= 159 (B >= 79 rejects only when both
    components reach their floor)."""
    result = invoke("validate", str(write_config(make_config(provider, n_permutations=99))))
    assert result.exit_code == 0, result.output
    assert "a change in one aspect alone gets about 2/(B+1) = 0.02" in text(result)
    assert "use B >= 159" in text(result)
    quiet = invoke("validate", str(write_config(make_config(provider, n_permutations=159))))
    assert "note" not in text(quiet)
