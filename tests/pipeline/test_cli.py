"""The dbpa command: exit codes, messages, and the read-side commands."""

from __future__ import annotations

import json
import re
import time

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dbpa.cli import app
from tests.pipeline.conftest import RULES, make_config
from tests.support.scripted_server import Fault, Rule, ScriptedServer

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("wide_console")


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def text(result) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


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


@pytest.mark.usefixtures("prefect_harness")
def test_run_then_read_the_record(tmp_path, provider, write_config):
    db = tmp_path / "cli.duckdb"
    result = invoke(
        "run",
        str(write_config(make_config(provider))),
        "--db",
        str(db),
        "--out",
        str(tmp_path / "reports"),
    )
    assert result.exit_code == 0, result.output
    assert "persona-comedian" in text(result)
    assert "html report:" in text(result)

    runs = invoke("runs", "--db", str(db))
    assert runs.exit_code == 0
    assert "completed" in text(runs)

    as_json = invoke("results", "latest", "--db", str(db), "--format", "json")
    rows = json.loads(as_json.output)
    assert {r["perturbation_id"] for r in rows} == {
        "persona-doctor",
        "persona-nurse",
        "persona-comedian",
        "persona-child",
    }
    assert all(0 < r["p_value"] <= 1 for r in rows)

    exported = invoke("export", "--db", str(db), "--format", "csv", "--out", str(tmp_path / "x"))
    assert exported.exit_code == 0
    samples = pd.read_csv(tmp_path / "x" / "samples.csv")
    assert len(samples) == 40

    report = invoke(
        "report", "latest", "--db", str(db), "--format", "md", "--out", str(tmp_path / "r.md")
    )
    assert report.exit_code == 0
    assert "persona-child" in (tmp_path / "r.md").read_text()

    unknown = invoke("results", "no-such-run", "--db", str(db))
    assert unknown.exit_code == 2
    assert "run 'no-such-run' is not in" in text(unknown)


@pytest.mark.usefixtures("prefect_harness")
def test_a_401_exits_1_fast_naming_the_model(tmp_path, write_config):
    with ScriptedServer(rules=RULES, script=[Fault("401")] * 100) as bad:
        start = time.perf_counter()
        result = invoke(
            "run",
            str(write_config(make_config(bad))),
            "--db",
            str(tmp_path / "a.duckdb"),
            "--out",
            str(tmp_path / "reports"),
        )
        elapsed = time.perf_counter() - start
    assert result.exit_code == 1, result.output
    assert "openai/scripted" in text(result)
    assert "AuthenticationError" in text(result)
    assert "sk-pipeline-test" not in result.output
    assert elapsed < 30


@pytest.mark.usefixtures("prefect_harness")
def test_ci_gate_exits_3_when_a_control_changes(tmp_path, write_config):
    rules = (Rule("Act as a doctor", [("Take antibiotics immediately.", 1)]), *RULES)
    with ScriptedServer(rules=rules, embedding_dimension=24) as server:
        path = write_config(make_config(server))
        out = str(tmp_path / "reports")
        gated = invoke(
            "run",
            str(path),
            "--db",
            str(tmp_path / "g.duckdb"),
            "--out",
            out,
            "--fail-on-control-rejection",
        )
        plain = invoke("run", str(path), "--db", str(tmp_path / "g.duckdb"), "--out", out)
    assert gated.exit_code == 3, gated.output
    assert "1 control perturbation(s) changed" in text(gated)
    assert plain.exit_code == 0
