"""Prefect's temporary server of ``dbpa run``: its start-up timeout, and a start that fails."""

from __future__ import annotations

import subprocess
import sys

import pytest

import storage
from dbpa.cli._server import DEFAULT_STARTUP_TIMEOUT_S, TIMEOUT_SETTING
from tests.pipeline.conftest import KEY_ENV, make_config
from tests.support.cli_process import ROOT, run_dbpa


def timeout_in_a_fresh_process(env: dict[str, str]) -> float:
    script = "from dbpa.cli._server import startup_timeout; print(startup_timeout())"
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


def test_the_startup_timeout_is_longer_than_prefects_unless_the_user_set_one(tmp_path):
    home = {"PREFECT_HOME": str(tmp_path)}
    assert timeout_in_a_fresh_process(home) == DEFAULT_STARTUP_TIMEOUT_S > 20
    assert timeout_in_a_fresh_process(home | {TIMEOUT_SETTING: "7"}) == 7
    (tmp_path / "profiles.toml").write_text(
        f'active = "mine"\n[profiles.mine]\n{TIMEOUT_SETTING} = "11"\n'
        'PREFECT_SERVER_ALLOW_EPHEMERAL_MODE = "true"\n'
    )
    assert timeout_in_a_fresh_process(home) == 11


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({TIMEOUT_SETTING: "1"}, "it did not answer within 1 s"),
        (
            # a database the server cannot create: it exits at start-up
            {"PREFECT_API_DATABASE_CONNECTION_URL": "sqlite+aiosqlite:////nonexistent/x.db"},
            "it exited with code",
        ),
    ],
    ids=["too-slow", "exits"],
)
def test_a_server_that_does_not_start_is_tried_twice_then_explained(
    tmp_path, provider, write_config, prefect_home, env, why
):
    done = run_dbpa(
        ["run", str(write_config(make_config(provider))), "--db", str(tmp_path / "x.duckdb")],
        prefect_home,
        cwd=tmp_path,
        env={KEY_ENV: "sk-pipeline-test", **env},
    )
    output = " ".join(done.stdout.split())
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stdout
    assert f"error: Prefect's temporary server did not start (2 attempts; {why}" in output
    assert "prefect server start --host 127.0.0.1" in output
    assert "PREFECT_API_URL=http://127.0.0.1:4200/api" in output
    assert TIMEOUT_SETTING in output
    # What was sampled while the server was awaited is kept, and said so.
    asked = provider.counts.by_endpoint["/v1/chat/completions"]
    if asked:
        assert f"The {asked} outputs sampled meanwhile are kept in" in output
        with storage.Store(tmp_path / "x.duckdb", read_only=True) as store:
            assert store.table("samples").num_rows == asked
