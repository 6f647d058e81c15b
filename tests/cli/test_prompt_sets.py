"""``dbpa results`` and ``export`` of an audit over a set of prompts: one line per
perturbation with how many prompts moved; json rows carry each prompt's ``prompt_id``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dbpa.config import parse_config
from flows.audit import audit
from tests.cli.conftest import invoke, shown_at, text
from tests.pipeline.conftest import make_config, one_answer_provider  # noqa: F401 (fixture)
from tests.pipeline.test_prompt_sets import PERSONAS, PROMPTS
from tests.support.scripted_server import ScriptedServer


@pytest.fixture
def set_run(one_answer_provider: ScriptedServer, tmp_path: Path, prefect_harness) -> Path:  # noqa: F811
    raw = make_config(one_answer_provider, n_permutations=999, prompts=PROMPTS)
    raw["perturbations"] = [PERSONAS]
    del raw["prompt"]
    db = tmp_path / "s.duckdb"
    audit(config=parse_config(raw), db=str(db))
    return db


@pytest.mark.usefixtures("wide_console")
def test_results_say_how_many_prompts_each_perturbation_moved(set_run: Path, tmp_path: Path):
    result = invoke("results", "latest", "--db", str(set_run))
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if "persona-" in line}
    assert "5/5" in lines["persona-comedian"]
    assert "changed" in lines["persona-comedian"]
    assert "0/5" in lines["persona-doctor"]
    assert "prompts moved" in text(result)

    result = invoke("results", "latest", "--db", str(set_run), "--format", "json")
    rows = json.loads(result.output)
    assert [r["perturbation_id"] for r in rows] == ["persona-doctor", "persona-comedian"]
    comedian = rows[1]
    assert comedian["n_prompts"] == 5
    assert comedian["prompts_moved"] == 5
    assert [p["prompt_id"] for p in comedian["prompts"]] == ["flu", "cough", "p3", "p4", "p5"]
    assert all(p["moved"] for p in comedian["prompts"])
    assert not any(p["moved"] for p in rows[0]["prompts"])

    result = invoke(
        "export",
        "--db",
        str(set_run),
        "--table",
        "prompt_results",
        "--format",
        "csv",
        "--out",
        str(tmp_path / "x"),
    )
    assert result.exit_code == 0, result.output
    exported = pd.read_csv(tmp_path / "x" / "prompt_results.csv")
    assert len(exported) == 10
    assert set(exported.prompt_id) == {"flu", "cough", "p3", "p4", "p5"}
    assert exported.moved.sum() == 5


@pytest.mark.usefixtures("wide_console")
def test_compare_pairs_two_prompt_set_runs_by_perturbation(
    set_run: Path,
    one_answer_provider: ScriptedServer,  # noqa: F811
):
    """A second run of the set at another seed: the same perturbations, compared row by row
    (pooled tests have no interval of their own: no distance, their decisions and p-values)."""
    raw = make_config(one_answer_provider, n_permutations=999, prompts=PROMPTS, seed=8)
    raw["perturbations"] = [PERSONAS]
    del raw["prompt"]
    audit(config=parse_config(raw), db=str(set_run))
    from storage import Store

    with Store(set_run, read_only=True) as store:
        newest, first = store.runs().run_id[:2]
    result = invoke("compare", first, newest, "--db", str(set_run), "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {r["perturbation_id"]: r for r in json.loads(result.output)["rows"]}
    assert set(rows) == {"persona-doctor", "persona-comedian"}
    assert rows["persona-comedian"]["decision_a"] == "changed"
    assert rows["persona-comedian"]["decision_b"] == "changed"
    assert rows["persona-doctor"]["decision_b"] == "no change"
    assert rows["persona-comedian"]["p_value_b"] <= 0.002
    assert {"setting": "seed", "a": "7", "b": "8"} in json.loads(result.output)["differences"]


def test_results_of_one_prompt_keep_their_fields(tmp_path: Path):
    """A run of one prompt has no prompt-set fields in its csv and json."""
    from tests.cli.test_results import _huge_record

    db = _huge_record(tmp_path / "one.duckdb", 3)
    for fmt in ("json", "csv"):
        result = invoke("results", "huge", "--db", str(db), "--format", fmt)
        assert result.exit_code == 0, result.output
        assert "n_prompts" not in result.output
        assert "prompts_moved" not in result.output
        assert "perturbation_id" in result.output


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_finished_prompt_set_is_decided_again_from_the_record(
    tmp_path: Path, provider: ScriptedServer, write_config, prefect_home
):
    """``dbpa run`` again, in a fresh interpreter as a user runs it: it asks nothing, starts
    no Prefect server and records the drill-down the flow recorded (the first run, which
    only finishes the record, runs here on the harness's server)."""
    import duckdb

    from tests.pipeline.conftest import KEY_ENV
    from tests.support.cli_process import run_dbpa

    raw = make_config(provider, n_permutations=999, prompts=PROMPTS, perturbations=[PERSONAS])
    del raw["prompt"]
    db = tmp_path / "a.duckdb"
    args = ["run", str(write_config(raw)), "--db", str(db)]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    calls = provider.counts.total
    env = {KEY_ENV: "sk-pipeline-test"}
    second = run_dbpa(args, prefect_home, cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stdout
    assert provider.counts.total == calls
    assert "Prefect not started" in second.stdout
    query = (
        "SELECT perturbation_id, prompt_id, adjusted_p, moved FROM prompt_decisions "
        "WHERE run_id = ? ORDER BY perturbation_id, position"
    )
    with duckdb.connect(str(db), read_only=True) as con:
        runs = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]
        decided = [con.execute(query, [run]).fetchall() for run in runs]
    assert len(decided[0]) == 10
    assert decided[0] == decided[1]


def test_validate_says_a_set_margin_is_calibrated_on_the_mean_over_its_prompts(
    provider: ScriptedServer, write_config
):
    """``equivalence: true`` (3 replicate arms of each original) is planned for a set: every
    prompt's replicate arms are sampled too."""
    raw = make_config(provider, prompts=PROMPTS, perturbations=[PERSONAS], equivalence=True)
    del raw["prompt"]
    result = invoke("validate", str(write_config(raw)))
    assert result.exit_code == 0, result.output
    assert "30 arms x k=8 = 240 outputs" in text(result)  # 5 prompts x (3 + 3 replicates)
    assert (
        "every two samples of the unperturbed model (3 replicate arm(s) of each original, "
        "sampled too), each distance the mean over the 5 prompts" in text(result)
    )


LONG_ID = "system-answer-in-one-short-sentence"


@pytest.fixture
def long_ids_run(one_answer_provider: ScriptedServer, tmp_path: Path, prefect_harness) -> Path:  # noqa: F811
    """A set of prompts under perturbations whose ids are as long as a system prompt's."""
    raw = make_config(one_answer_provider, n_permutations=999, prompts=PROMPTS)
    raw["perturbations"] = [
        PERSONAS,
        {"kind": "system_prompt", "variants": [{"text": "Answer in one short sentence."}]},
    ]
    del raw["prompt"]
    db = tmp_path / "long.duckdb"
    audit(config=parse_config(raw), db=str(db))
    return db


def _energy_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The unbiased (U-statistic) energy distance of two arms, Euclidean, written out."""

    def mean_distance(x: np.ndarray, y: np.ndarray, within: bool) -> float:
        d = np.linalg.norm(x[:, None, :].astype(float) - y[None, :, :], axis=-1)
        n = len(x)
        return float(d.sum() / (n * (n - 1))) if within else float(d.mean())

    return 2 * mean_distance(a, b, False) - mean_distance(a, a, True) - mean_distance(b, b, True)


@pytest.mark.parametrize("columns", [80, 200])
def test_results_of_a_set_keep_ids_whole_and_show_the_mean_distance(long_ids_run, columns):
    from storage import Store

    with Store(long_ids_run, read_only=True) as store:
        run_id = store.run("latest")["run_id"]
        prompts = store.prompt_results(run_id)
        comedian = prompts[prompts.perturbation_id == "persona-comedian"]
        embedder = store.tests(list(comedian.test_id)).embedder.iloc[0]
        arms = [*comedian.original_arm, *comedian.perturbed_arm]
        vectors = store.arms_vectors(list(dict.fromkeys(arms)), embedder, 8)
    distances = [
        _energy_distance(vectors[a], vectors[b])
        for a, b in zip(comedian.original_arm, comedian.perturbed_arm, strict=True)
    ]
    assert len(distances) == 5
    mean = np.format_float_positional(
        np.mean(distances), precision=2, unique=False, fractional=False, trim="-"
    )
    shown = shown_at(columns, "results", "latest", "--db", str(long_ids_run))
    lines = shown.splitlines()
    assert any(LONG_ID in line for line in lines), shown
    assert "…" not in shown
    row = next(line for line in lines if line.startswith("persona-comedian"))
    assert row.split()[2] == mean, row  # perturbation, label, then the set-level distance
    assert "omega" not in shown
    assert "distance [90% CI]: energy distance" in shown  # what each column is
    assert "mean over its 5 prompts" in shown
