"""``dbpa plan`` over a set of prompts: k per prompt at the config's prompts, prompts at its
k, and the calls, from a pilot set run stored by a real run against the scripted provider."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dbpa.config import parse_config
from flows.audit import audit
from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import KEY_ENV, ONE_ANSWER_EACH, make_config
from tests.pipeline.test_prompt_sets import PERSONAS, PROMPTS
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.xdist_group("plan-sets")  # one worker builds the module's pilots

PILOT_K = 8


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    """The comedian answers with a joke, the doctor as the original, one text each
    (``ONE_ANSWER_EACH``): under ``RULES`` the arms' seeds follow the server's random port,
    and a pilot whose doctor drew apart by chance planned a no-change power of 0.5."""
    with ScriptedServer(rules=ONE_ANSWER_EACH, embedding_dimension=24) as scripted:
        yield scripted


def _set_config(server: ScriptedServer, **overrides: object) -> dict:
    raw = make_config(server, n_permutations=199, prompts=PROMPTS, perturbations=[PERSONAS])
    del raw["prompt"]
    raw.update(overrides)
    return raw


@pytest.fixture(scope="module")
def pilot(
    server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory, prefect_harness
) -> tuple[Path, Path]:
    """(record, config): a set run of 5 prompts x k = 8, and its config as a file."""
    folder = tmp_path_factory.mktemp("set-pilot")
    raw = _set_config(server, k=PILOT_K)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, "sk-pipeline-test")
        patch.chdir(folder)
        audit(config=parse_config(raw), db=str(folder / "pilot.duckdb"))
    config = folder / "set.yaml"
    config.write_text(yaml.safe_dump(raw))
    return folder / "pilot.duckdb", config


@pytest.fixture(scope="module")
def planned(pilot: tuple[Path, Path]) -> dict:
    """The plan of the pilot's own config, as json."""
    return _plan(*pilot)


def _plan(db: Path, config: Path, *extra: str) -> dict:
    result = invoke(
        "plan", str(config), "--db", str(db), "--from", _set_run(db), "--simulations", "20",
        "--format", "json", *extra,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _set_run(db: Path) -> str:
    from storage import Store

    with Store(db, read_only=True) as store:
        return str(store.runs().run_id.iloc[0])


def _by_id(data: dict) -> dict[str, dict]:
    return {p["perturbation_id"]: p for p in data["perturbations"]}


def test_a_change_needs_few_outputs_and_prompts_and_no_change_never_reaches_power(planned):
    data = planned
    rows = _by_id(data)
    comedian, doctor = rows["persona-comedian"], rows["persona-doctor"]
    assert comedian["pilot_prompts"] == 5
    assert comedian["pilot_k"] == PILOT_K
    assert comedian["k_status"] == "estimated"
    assert 2 <= comedian["k"] <= PILOT_K
    assert comedian["prompts_status"] == "estimated"
    assert 1 <= comedian["prompts"] <= 5
    assert comedian["k_curve"][-1]["power"] >= 0.8
    assert [p["k"] for p in comedian["k_curve"]] == [2, 3, 4, 6, 8]
    assert [p["prompts"] for p in comedian["prompt_curve"]] == [1, 2, 3, 5]
    for point in comedian["k_curve"]:
        assert point["ci"][0] <= point["power"] <= point["ci"][1]
    # no change: the pooled test rejects about as often as its level, never 80%
    assert doctor["k"] is None
    assert doctor["k_status"] == "not_reached"
    assert doctor["prompts"] is None
    assert max(p["power"] for p in doctor["k_curve"] + doctor["prompt_curve"]) <= 0.3
    assert data["m"] == 2
    assert data["level"] == pytest.approx(0.05 / 2)
    assert data["n_prompts"] == 5
    assert data["audit_k"] == PILOT_K
    assert data["n_permutations"] == 199
    assert data["combination"] == "sum_z+tippett+spread"  # the pooled test's default


def test_the_cost_counts_prompts_arms_and_k(planned):
    data = planned
    configured = data["configured"]
    # 5 prompts x (the original and two personas) = 15 arms
    assert configured["arms"] == 15
    assert configured["calls"] == 15 * PILOT_K
    assert configured["tokens"] > 0
    comedian = _by_id(data)["persona-comedian"]
    recommended = data["recommended"]
    assert recommended["k"] == comedian["k"]  # the doctor needs none
    assert recommended["calls"] == 15 * comedian["k"]
    fewest = data["fewest_prompts"]
    assert fewest["prompts"] == comedian["prompts"]
    assert fewest["arms"] == 3 * comedian["prompts"]
    assert fewest["calls"] == 3 * comedian["prompts"] * PILOT_K


def test_the_cost_counts_the_replicate_arms_of_a_calibrated_margin(pilot, tmp_path):
    """With ``margin: replicates`` every prompt's original is sampled twice more: 5 prompts x
    (the original, two personas and two replicates) = 25 arms, 5 per prompt."""
    db, config = pilot
    raw = yaml.safe_load(config.read_text())
    raw["equivalence"] = {"margin": "replicates", "replicates": 2}
    calibrated = tmp_path / "calibrated.yaml"
    calibrated.write_text(yaml.safe_dump(raw))
    data = _plan(db, calibrated)
    assert data["configured"]["arms"] == 25
    assert data["configured"]["calls"] == 25 * PILOT_K
    comedian = _by_id(data)["persona-comedian"]
    assert data["fewest_prompts"]["arms"] == 5 * comedian["prompts"]


@pytest.mark.usefixtures("wide_console")
def test_the_table_gives_k_per_prompt_prompts_and_calls(pilot, planned):
    db, config = pilot
    comedian = _by_id(planned)["persona-comedian"]
    result = invoke(
        "plan", str(config), "--db", str(db), "--from", _set_run(db), "--simulations", "20"
    )
    assert result.exit_code == 0, result.output
    flat = text(result)
    assert "k at 5 prompts" in flat
    assert f"prompts at k={PILOT_K}" in flat
    row = next(line for line in result.output.splitlines() if "persona-comedian" in line)
    cells = row.split()
    assert cells[1:] == [
        "target", "5", "x", str(PILOT_K), str(comedian["k"]), str(comedian["prompts"]),
        str(15 * comedian["k"]),
    ]  # fmt: skip
    doctor = next(line for line in result.output.splitlines() if "persona-doctor" in line)
    assert doctor.split()[5:] == [">", str(PILOT_K), ">", "5"]
    assert "'> N': not reached within the pilot's N outputs per arm, or N prompts." in flat
    assert "'-'" not in flat
    assert f"at the config's prompts and k: 5 prompts x k={PILOT_K}: 120 model calls" in flat


def test_beyond_the_pilot_is_not_simulated(pilot, tmp_path):
    """More prompts than the pilot's: no k at them; a k above the pilot's: no prompts at it."""
    db, config = pilot
    raw = yaml.safe_load(config.read_text())
    raw["prompts"] = [*raw["prompts"], "What helps a sore throat?"]
    more = tmp_path / "more.yaml"
    more.write_text(yaml.safe_dump(raw))
    comedian = _by_id(_plan(db, more))["persona-comedian"]
    assert comedian["k_status"] == "beyond_pilot"
    assert comedian["k"] is None
    assert comedian["k_curve"] == []
    assert comedian["prompts_status"] == "estimated"  # at k = 8, within the pilot's 5
    larger = _by_id(_plan(db, config, "--set", "k=12"))["persona-comedian"]
    assert larger["prompts_status"] == "beyond_pilot"
    assert larger["prompt_curve"] == []
    assert larger["k_status"] == "estimated"


def test_the_same_seed_gives_the_same_plan(pilot, planned):
    assert _plan(*pilot, "--seed", "0") == planned


def test_a_pilot_of_one_prompt_is_refused_naming_from(pilot, labelled_run):
    _, config = pilot
    result = invoke("plan", str(config), "--db", str(labelled_run.db), "--from", "latest")
    assert result.exit_code == 2, result.output
    assert "--from: run " in text(result)
    assert (
        "is an audit of one prompt; a set of prompts is planned from a pilot run over a set"
        in text(result)
    )


def test_a_set_pilot_for_one_prompt_is_refused_naming_from(pilot, tmp_path):
    db, config = pilot
    raw = yaml.safe_load(config.read_text())
    del raw["prompts"]
    raw["prompt"] = "My flu has lasted two days. Should I see a doctor?"
    single = tmp_path / "one.yaml"
    single.write_text(yaml.safe_dump(raw))
    result = invoke("plan", str(single), "--db", str(db), "--from", _set_run(db))
    assert result.exit_code == 2, result.output
    assert "is over a set of prompts" in text(result)
    assert "--from" in text(result)


def test_too_few_simulations_name_the_option(pilot):
    db, config = pilot
    result = invoke("plan", str(config), "--db", str(db), "--simulations", "5")
    assert result.exit_code == 2
    assert "--simulations" in text(result)


def _damaged_copy(db: Path, folder: Path, statement: str) -> Path:
    """A copy of the pilot record with ``statement`` run on it."""
    import shutil

    import duckdb

    copy = folder / "damaged.duckdb"
    shutil.copy(db, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute(statement)
    return copy


@pytest.mark.usefixtures("wide_console")
def test_a_pilot_without_vectors_says_not_embedded(pilot, tmp_path):
    db, config = pilot
    copy = _damaged_copy(db, tmp_path, "DELETE FROM embeddings")
    data = _plan(copy, config)
    assert [p["k_status"] for p in data["perturbations"]] == ["not_embedded"] * 2
    assert [p["pilot_prompts"] for p in data["perturbations"]] == [0, 0]
    assert data["recommended"] is None
    assert data["fewest_prompts"] is None
    result = invoke("plan", str(config), "--db", str(copy), "--simulations", "20")
    assert result.exit_code == 0, result.output
    assert "'not embedded': no prompt of the pilot has both arms embedded." in text(result)


def test_a_pilot_without_pooled_tests_is_refused_naming_from(pilot, tmp_path):
    db, config = pilot
    copy = _damaged_copy(db, tmp_path, "DELETE FROM set_prompts")
    result = invoke("plan", str(config), "--db", str(copy), "--from", "latest")
    assert result.exit_code == 2, result.output
    assert "stored no pooled tests over its prompts" in text(result)
    assert "--from" in text(result)
