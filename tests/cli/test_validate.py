"""``dbpa validate``: a config checked and its plan shown, or exit 2 naming file and field."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.cli.conftest import invoke, text
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
