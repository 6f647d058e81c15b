"""``dbpa run`` and ``serve``: exit codes and messages, and the record read back."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from dbpa.cli import app
from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import KEY_ENV, ONE_ANSWER_EACH, RULES, make_config
from tests.support.cli_process import normalised, run_dbpa
from tests.support.scripted_server import Fault, Rule, ScriptedServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.usefixtures("wide_console")


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


REJECTED = (
    "model 'openai/scripted': AuthenticationError (HTTP 401): litellm.AuthenticationError: "
    "AuthenticationError: OpenAIException - Incorrect API key provided: *** "
    f"(the key comes from ${KEY_ENV})"
)


@pytest.mark.slow
def test_a_rejected_key_prints_each_failure_once_and_no_traceback(
    tmp_path, write_config, prefect_home
):
    """The whole terminal output of ``dbpa run`` (a fresh interpreter, Prefect's temporary
    server) when the provider rejects the key: one line for the failed model, not one per
    arm; no traceback of Prefect's engine or ours; no leak report at exit."""
    with ScriptedServer(rules=RULES, script=[Fault("401")] * 100) as bad:
        config = write_config(make_config(bad))
        done = run_dbpa(
            ["run", str(config), "--db", str(tmp_path / "a.duckdb")],
            prefect_home,
            cwd=tmp_path,
            env={KEY_ENV: "sk-pipeline-test"},
        )
    assert done.returncode == 1, done.stdout
    assert normalised(done.stdout, tmp_path) == "\n".join(
        [
            "persona-test: 4 tests, 5 arms x k=8; record: <TMP>/a.duckdb",
            "<TIME> | ERROR | Flow run 'audit persona-test' - 5 of 5 arms of openai/scripted "
            f"could not be sampled: {REJECTED}",
            "sample 0/40 outputs <ELAPSED>",
            "embed 0/5 arms <ELAPSED>",
            "test 0/4 tests <ELAPSED>",
            "run <RUN> (incomplete)",
            "perturbation label omega effect p adj. p decision",
            "<RULE>",
            "persona-doctor control - - - - not tested",
            "persona-nurse control - - - - not tested",
            "persona-comedian target - - - - not tested",
            "persona-child target - - - - not tested",
            f"error: 5 of 5 arms could not be sampled: {REJECTED}. Every other output and "
            "result is kept; fix the cause and run the same command again.",
        ]
    )


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_refused_connection_fails_the_run_after_its_budget_in_three_lines(
    tmp_path, write_config, prefect_home
):
    """The whole terminal output of ``dbpa run`` when nothing listens at the model's address:
    one warning when retrying starts, one error for the model, the exit message; before the
    budget, 7.6 minutes and 80 repeats. The config sets a budget of 15 s, the default's 60 s
    only waited longer (the config without it has 60 s; the retry loop's minute is
    tests/llm/test_connect.py's). The budget outlasts the gap from the head start's refusal,
    which starts it, to the flow's first, which warns (2 s on two cores). A fresh
    interpreter, with the harness's Prefect server configured (the output on Prefect's
    temporary server is the rejected key's test's)."""
    from prefect.settings import PREFECT_API_URL

    from dbpa.config import parse_config

    with ScriptedServer() as gone:  # closed at once: its port refuses connections
        refused = gone.api_base
    config = make_config(gone)
    assert parse_config(config).models[0].connect_budget_s == 60.0  # the default
    config["models"][0]["connect_budget_s"] = 15
    start = time.perf_counter()
    done = run_dbpa(
        ["run", str(write_config(config)), "--db", str(tmp_path / "a.duckdb")],
        prefect_home,
        cwd=tmp_path,
        env={KEY_ENV: "sk-pipeline-test", "PREFECT_API_URL": str(PREFECT_API_URL.value())},
    )
    elapsed = time.perf_counter() - start
    assert done.returncode == 1, done.stdout
    reason = f"model 'openai/scripted': connection refused by {refused}"
    lines = normalised(done.stdout, tmp_path).splitlines()
    assert re.sub(r"Task run 'sample [^']*'", "Task run 'sample <ARM>'", lines[1]) == (
        f"<TIME> | WARNING | Task run 'sample <ARM>' - {reason}; retrying for up to 15 s "
        "(connect_budget_s)"
    )
    assert lines[:1] + lines[2:] == [
        "persona-test: 4 tests, 5 arms x k=8; record: <TMP>/a.duckdb",
        "<TIME> | ERROR | Flow run 'audit persona-test' - 5 of 5 arms of openai/scripted "
        f"could not be sampled: {reason}; gave up after 15 s (connect_budget_s)",
        "sample 0/40 outputs <ELAPSED>",
        "embed 0/5 arms <ELAPSED>",
        "test 0/4 tests <ELAPSED>",
        "run <RUN> (incomplete)",
        "perturbation label omega effect p adj. p decision",
        "<RULE>",
        "persona-doctor control - - - - not tested",
        "persona-nurse control - - - - not tested",
        "persona-comedian target - - - - not tested",
        "persona-child target - - - - not tested",
        f"error: 5 of 5 arms could not be sampled: {reason}; gave up after 15 s "
        "(connect_budget_s). Every other output and result is kept; fix the cause and run the "
        "same command again.",
    ]
    # The budget runs from the first refusal (the head start's, before the flow warns); the
    # rest is the interpreter's start and the bookkeeping.
    stamps = [
        datetime.strptime(line.split(" |")[0], "%H:%M:%S.%f")
        for line in done.stdout.splitlines()
        if re.search(r"\| (WARNING|ERROR) *\|", line)
    ]
    assert (stamps[1] - stamps[0]).total_seconds() <= 16.0
    assert 15.0 <= elapsed < 15.0 + 120.0, elapsed


@pytest.mark.usefixtures("prefect_harness")
def test_a_provider_that_keeps_failing_exits_1_with_a_message(tmp_path, write_config, monkeypatch):
    import flows._sampling

    quick = flows._sampling.sample_arms.with_options(retries=0)  # no 10 s and 60 s task retries
    monkeypatch.setattr(flows._sampling, "sample_arms", quick)
    with ScriptedServer(rules=RULES, script=[Fault("500")] * 1000) as failing:
        config = make_config(failing)
        config["models"][0]["max_retries"] = 0
        result = invoke(
            "run",
            str(write_config(config)),
            "--db",
            str(tmp_path / "f.duckdb"),
            "--out",
            str(tmp_path / "reports"),
        )
    assert result.exit_code == 1, result.output
    assert "error: model 'openai/scripted': still failing after 0 retries" in text(result)
    assert "Every output sampled so far is kept; run the same command again" in text(result)
    assert "(failed)" in text(result)  # the run's table, as for an incomplete run


@pytest.mark.usefixtures("prefect_harness")
def test_an_embedder_refusing_connections_exits_1_naming_it(tmp_path, provider, write_config):
    with ScriptedServer() as gone:  # closed at once: its port refuses connections
        refused = gone.api_base
    config = make_config(provider)
    config["embedder"] |= {"api_base": refused, "connect_budget_s": 1}
    result = invoke(
        "run", str(write_config(config)), "--db", str(tmp_path / "e.duckdb"), "--out", str(tmp_path)
    )
    assert result.exit_code == 1, result.output
    assert (
        f"error: model 'litellm/openai/scripted': connection refused by {refused}; gave up "
        "after 1 s (connect_budget_s). Every output sampled so far is kept; fix the cause and "
        "run the same command again."
    ) in text(result)
    assert "Traceback" not in result.output
    assert "(failed)" in text(result)


@pytest.mark.usefixtures("prefect_harness")
def test_ci_gate_exits_3_when_a_control_changes(tmp_path, write_config):
    """The doctor answers otherwise; the nurse repeats the original's one text, so its p-value
    is 1 whatever the server's port (under ``RULES`` a control is now and then rejected by
    chance, and the gate would count 2)."""
    rules = (Rule("Act as a doctor", [("Take antibiotics immediately.", 1)]), *ONE_ANSWER_EACH)
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "every night"], "--cron 'every night': "),
        (["--cron", "0 3 * * *"], "no Prefect server: start one"),
    ],
)
def test_serve_checks_its_options_first(args, message):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        result = CliRunner().invoke(app, ["serve", str(EXAMPLES / "personas.yaml"), *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


TWO_ANSWERS = (
    *RULES[:2],
    Rule("", [("Rest, drink fluids and see a doctor if it gets worse.", 1), ("Rest.", 1)]),
)
"""``RULES`` with the original and the medical personas answering two texts at even odds: at
k = 16 their upper effect bounds are finite (simulated: in 300 pairs of such arms none was
infinite; ``RULES``' three texts at k = 8 gave 49 of 300, and the arms' seeds follow the
server's random port, so the wide margin's run failed now and then)."""


@pytest.fixture
def two_answers() -> Iterator[ScriptedServer]:
    with ScriptedServer(rules=TWO_ANSWERS, embedding_dimension=24) as server:
        yield server


@pytest.mark.usefixtures("prefect_harness")
def test_require_equivalent_exits_4_unless_every_labelled_perturbation_is_equivalent(
    tmp_path, two_answers, write_config
):
    db, out = str(tmp_path / "e.duckdb"), str(tmp_path / "reports")
    provider = two_answers
    # margin 5 is above every energy distance between unit vectors: all equivalent
    wide = write_config(make_config(provider, k=16, equivalence={"margin": 5.0}), "wide.yaml")
    passed = invoke("run", str(wide), "--db", db, "--out", out, "--require-equivalent", "control")
    assert passed.exit_code == 0, passed.output
    assert "distance [90% CI]" in text(passed)
    assert "equivalence margin: 5 on the distance scale, set in the config" in text(passed)

    tight = write_config(make_config(provider, equivalence={"margin": 1e-9}), "tight.yaml")
    args = ["--db", db, "--out", out, "--require-equivalent", "control"]
    failed = invoke("run", str(tight), *args)
    assert failed.exit_code == 4, failed.output
    assert "2 of 2 perturbation(s) labelled 'control' not shown equivalent" in text(failed)
    rows = json.loads(invoke("results", "latest", "--db", db, "--format", "json").output)
    for r in rows:  # nothing is within a margin of 1e-9
        assert r["decision"] == ("changed" if r["reject"] else "inconclusive")
    assert all(r["margin"] == 1e-9 for r in rows)
    # an arm pair of one text each bounds no distance: its upper bound is null (infinite)
    assert all(r["effect_high"] is None or r["effect_low"] <= r["effect_high"] for r in rows)
    gate = invoke("results", "latest", "--db", db, "--require-equivalent", "target")
    assert gate.exit_code == 4
    unknown = invoke("results", "latest", "--db", db, "--require-equivalent", "nolabel")
    assert unknown.exit_code == 2
    assert "no perturbation is labelled 'nolabel'" in text(unknown)


def test_require_equivalent_needs_a_margin_and_says_so_before_running(tmp_path):
    db = tmp_path / "n.duckdb"
    args = ["--db", str(db), "--require-equivalent", "control"]
    result = invoke("run", str(EXAMPLES / "personas.yaml"), *args)
    assert result.exit_code == 2
    assert "the config has no equivalence margin" in text(result)
    assert not (tmp_path / "n.duckdb").exists()
