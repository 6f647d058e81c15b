"""``dbpa plan``: k per perturbation from a stored pilot run, and the family's cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dbpa.cli import app
from tests.cli.conftest import shown_at
from tests.report.conftest import COST_PER_OUTPUT, BuiltRun, Case, build_run

pytestmark = pytest.mark.xdist_group("plan")  # one worker builds the module's pilots

CONFIG = Path(__file__).parents[2] / "examples" / "personas.yaml"


def _invoke(db: Path, *extra: str, config: Path = CONFIG) -> str:
    result = CliRunner().invoke(
        app,
        [
            "plan",
            str(config),
            "--from",
            "latest",
            "--db",
            str(db),
            "--simulations",
            "20",
            "--set",
            "omega=energy_l2",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.output


def _plan(db: Path, *extra: str, config: Path = CONFIG) -> dict:
    return json.loads(_invoke(db, "--format", "json", *extra, config=config))


@pytest.fixture(scope="module")
def larger_pilot(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    """A pilot of 24 outputs per arm: one large change, one none."""
    db = tmp_path_factory.mktemp("larger-pilot") / "audit.duckdb"
    cases = (
        Case("comedian", 1.5, "target", description="Act as a comedian."),
        Case("doctor", 0.0, "control", description="Act as a doctor."),
    )
    return build_run(db, cases=cases, k=24, n_permutations=199)


@pytest.fixture(scope="module")
def unembedded_pilot(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    db = tmp_path_factory.mktemp("unembedded-pilot") / "audit.duckdb"
    case = Case("comedian", 1.5, description="Act as a comedian.")
    return build_run(db, cases=(case,), embed=False, n_permutations=199)


MARKS = {
    "> 100%": "'> 100%': even every output changed as the pilot's is detected with power below",
    "-": "'-': the pilot is too small to estimate the MDE at k=",
    "not embedded": "'not embedded': the pilot stored no embeddings for this pair.",
}


def _rows(output: str) -> dict[str, list[str]]:
    """perturbation id -> its table cells after the label."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if cells and cells[0] in ("comedian", "doctor"):
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize(
    ("k", "comedian", "doctor", "why"),
    [
        # 2k = 16 <= 24 outputs of the original: the share is searched
        ("8", "estimated", "not_detected", ("> 100%",)),
        # 2k = 32 > 24: detected at k, but the share search needs more of the original
        ("16", "pilot_too_small", "not_detected", ("> 100%", "-")),
        # k = 30 is beyond the pilot: nothing is simulated at k
        ("30", "pilot_too_small", "pilot_too_small", ("-",)),
    ],
)
def test_the_mde_marks_say_why(larger_pilot, k, comedian, doctor, why):
    data = _plan(larger_pilot.db, "--set", f"k={k}")
    by_id = {p["perturbation_id"]: p for p in data["perturbations"]}
    assert by_id["comedian"]["detectable"] == comedian
    assert by_id["doctor"]["detectable"] == doctor
    share = by_id["comedian"]["detectable_share"]
    assert (share is not None) == (comedian == "estimated")
    output = _invoke(larger_pilot.db, "--set", f"k={k}")
    rows = _rows(output)
    cell = {"estimated": f"{share:.0%}" if share else "", "not_detected": "> 100%"}
    cell["pilot_too_small"] = "-"
    assert " ".join(rows["comedian"]).endswith(cell[comedian])
    assert " ".join(rows["doctor"]).endswith(cell[doctor])
    flat = text_of(output)
    for mark, line in MARKS.items():
        assert (line in flat) == (mark in why), mark
    if "-" in why:
        assert f"draws up to {2 * int(k)} outputs of the original arm (2k)" in flat


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize("columns", [80, 36])
def test_ids_and_sizes_show_whole_on_a_narrow_terminal(larger_pilot, columns):
    """Every cell whole however narrow the terminal: a table, else aligned lines."""
    args = ["--from", "latest", "--db", str(larger_pilot.db), "--set", "omega=energy_l2"]
    shown = shown_at(columns, "plan", str(CONFIG), *args, "--simulations", "20")
    rows = _rows(shown)
    assert set(rows) == {"comedian", "doctor"}
    assert rows["comedian"][0] == "target"
    assert rows["doctor"][0] == "control"
    assert "\u2026" not in shown


def test_an_unembedded_pilot_says_so(unembedded_pilot):
    output = _invoke(unembedded_pilot.db)
    assert " ".join(_rows(output)["comedian"]).count("not embedded") == 2  # k and MDE
    flat = text_of(output)
    assert MARKS["not embedded"] in flat
    assert MARKS["> 100%"] not in flat
    assert MARKS["-"] not in flat
    data = _plan(unembedded_pilot.db)
    assert [p["detectable"] for p in data["perturbations"]] == ["not_embedded"]
    assert data["recommended"] is None


def test_coarse_permutations_are_named_with_the_b_that_is_not(labelled_run):
    coarse = _invoke(labelled_run.db, "--set", "n_permutations=999")
    assert "B >= 1,599 resolves it" in text_of(coarse)
    assert "resolves it" not in text_of(_invoke(labelled_run.db))  # the config's B=2000
    data = _plan(labelled_run.db, "--set", "n_permutations=999")
    assert data["n_permutations"] == 999  # the audit's own B is simulated
    assert data["resolution_permutations"] == 1599
    assert data["level"] == pytest.approx(0.05 / 8)


def test_m_is_the_family_of_one_model(labelled_run, tmp_path):
    """Two models: each model's family of 8 is corrected on its own, so m = 8, not 16."""
    config = tmp_path / "two-models.yaml"
    models = (
        "models:\n  - {model: local/smollm2-135m, name: a}\n"
        "  - {model: local/smollm2-135m, name: b, params: {temperature: 0.5}}\n"
    )
    body = CONFIG.read_text()
    start = body.index("models:")
    end = body.index("prompt:")
    config.write_text(body[:start] + models + body[end:])
    data = _plan(labelled_run.db, config=config)
    assert data["m"] == 8
    assert data["configured"]["arms"] == 18  # 2 originals, 16 perturbed arms


def text_of(output: str) -> str:
    return " ".join(output.split())


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


def test_the_cost_is_shown_at_list_and_at_batch_prices(labelled_run):
    # litellm's batch prices of openai/gpt-4o-mini are half its list prices
    shown = " ".join(_invoke(labelled_run.db, "--set", "models.0.model=openai/gpt-4o-mini").split())
    listed = COST_PER_OUTPUT * 180
    assert f"cost at k=20: ${listed:,.2f} at list prices, ${listed / 2:,.2f} with every model" in (
        shown
    )
    assert "x0.50" in shown
    assert "with every model in provider batches" not in " ".join(
        _invoke(labelled_run.db).split()
    )  # the embedded model costs nothing either way
