"""``--set KEY=VALUE`` takes the type of the key it sets: a key that holds text keeps the text
as typed where YAML would read a timestamp, a boolean, a number or null; other keys parse as
YAML; a bad value names its key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dbpa.config import ConfigError, load_config, parse_overrides
from tests.cli.conftest import invoke, text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "personas.yaml"
STAMP = "2026-01-05T03:00:00+00:00"


def test_an_epoch_typed_as_a_timestamp_is_the_epoch(wide_console):
    result = invoke("validate", str(EXAMPLE), "--set", f"epoch={STAMP}")
    assert result.exit_code == 0, result.output
    assert load_config(EXAMPLE, parse_overrides([f"epoch={STAMP}"])).epoch == STAMP


@pytest.mark.parametrize(
    "pair",
    [
        f"epoch={STAMP}",
        "epoch=2026-01-05",
        "epoch=yes",
        "epoch=1",
        "epoch=0.5",
        "epoch=null",
        "epoch=[1",  # not YAML at all
        "description=off",
        "description=a: b",
        "omega=~",
        "models.0.name=yes",  # a text or nothing
        "embedder.backend=true",  # a choice of texts
    ],
)
def test_a_text_key_keeps_the_value_as_typed(pair):
    key, _, typed = pair.partition("=")
    assert parse_overrides([pair]) == {key: typed}


@pytest.mark.parametrize(
    ("pair", "value"),
    [
        ("k=30", 30),
        ("alpha=0.01", 0.01),
        ("seed=7", 7),
        ("sequential=true", True),
        ("models.0.name=null", None),  # the key takes nothing
        ("models.0.max_n=null", None),
        ("models.0.params.temperature=0.2", 0.2),  # any value: YAML's
        ("models.0.params={temperature: 0.2}", {"temperature": 0.2}),
        ("equivalence.margin=0.1", 0.1),
        ("equivalence.margin=controls", "controls"),
        ("description='quoted'", "quoted"),  # YAML's text, as before
        ("nosuchkey=yes", True),  # validation names it
    ],
)
def test_other_values_parse_as_yaml(pair, value):
    key = pair.partition("=")[0]
    assert parse_overrides([pair]) == {key: value}


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("k=abc", r"personas\.yaml: k: Input should be a valid integer"),
        ("k=[1", r"--set k: line 1, column 3: not valid YAML"),
        ("seed=2026-01-05", r"personas\.yaml: seed: Input should be a valid integer"),
        ("sequential=yes please", r"personas\.yaml: sequential: "),
    ],
)
def test_a_bad_value_exits_2_naming_its_key(wide_console, pair, message):
    result = invoke("validate", str(EXAMPLE), "--set", pair)
    assert result.exit_code == 2
    assert re.search(message, text(result)), result.output


def test_a_pair_without_a_value_is_refused():
    with pytest.raises(ConfigError, match=r"^--set 'epoch': expected KEY=VALUE"):
        parse_overrides(["epoch"])
