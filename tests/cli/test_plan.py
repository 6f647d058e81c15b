"""``dbpa plan``: k per perturbation from a stored pilot run, and the family's cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dbpa.cli import app
from tests.report.conftest import COST_PER_OUTPUT

CONFIG = Path(__file__).parents[2] / "examples" / "personas.yaml"


def _plan(db: Path, *extra: str) -> dict:
    result = CliRunner().invoke(
        app,
        [
            "plan",
            str(CONFIG),
            "--from",
            "latest",
            "--db",
            str(db),
            "--format",
            "json",
            "--simulations",
            "20",
            "--set",
            "omega=energy_l2",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_large_effect_needs_few_outputs_and_no_effect_never_reaches_power(labelled_run):
    data = _plan(labelled_run.db)
    by_id = {(p["family"], p["perturbation_id"]): p for p in data["perturbations"]}
    assert len(by_id) == 2 * len(labelled_run.cases)
    for family in labelled_run.families:
        comedian, doctor = by_id[(family, "comedian")], by_id[(family, "doctor")]
        assert comedian["k"] is not None
        assert comedian["k"] <= 20
        assert doctor["k"] is None  # no effect: power stays near the per-test level
        assert comedian["power_curve"][-1]["power"] >= 0.8
    assert data["m"] == 8
    assert data["omega"] == "energy_l2"
    assert data["audit_k"] == 20


def test_the_family_cost_comes_from_the_pilot_outputs(labelled_run):
    data = _plan(labelled_run.db)
    configured = data["configured"]
    assert configured["arms"] == 9
    assert configured["calls"] == 9 * 20
    assert configured["cost_usd"] == pytest.approx(COST_PER_OUTPUT * 180)
    recommended = data["recommended"]
    assert recommended["calls"] == 9 * recommended["k"]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--power", "1.5", "--power"), ("--simulations", "3", "--simulations")],
)
def test_bad_options_name_themselves(labelled_run, option, value, message):
    result = CliRunner().invoke(
        app, ["plan", str(CONFIG), "--db", str(labelled_run.db), option, value]
    )
    assert result.exit_code == 2
    assert message in result.output
