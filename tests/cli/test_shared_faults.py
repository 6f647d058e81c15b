"""A shared record's faults (issue 50), against a real PostgreSQL server: a refused login or
an unknown database exits 2, a server down or silent exits 1 within the connect budget, each
on one line naming host and port and never the password; a record of a newer dbpa is
refused as a file is; a server restarted in the middle of an audit either fails the run or
the run connects again and goes on (tests/storage/test_reconnect.py), and either way the
record ends with nothing lost and, on a re-run, nothing stored asked again."""

from __future__ import annotations

import socket
import time

import pytest
import yaml

from dbpa.cli import app
from storage import CONNECT_TIMEOUT_S, Store
from tests.cli.conftest import runner
from tests.cli.test_shared_record import (
    ARMS_PER_RUN,
    SLOW_PROMPT,
    Dbpa,
    K,
    _config,
    _latency,
    _rows,
    slow_asked,
    stored,
    url_of,
)
from tests.pipeline.conftest import RULES
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("wide_console")  # a line is never wrapped


def _one_line_error(args: list[str], code: int, env: dict[str, str]) -> str:
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == code, result.output
    [line] = result.stderr.splitlines()
    return line


@pytest.fixture
def record(postgres, monkeypatch) -> str:
    """A record with an audit's tables; PGPASSWORD unset (each test sets its own)."""
    url = url_of(postgres, postgres.create_database())
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    Store(url).close()
    monkeypatch.delenv("PGPASSWORD")
    return url


def test_a_refused_login_or_database_exits_2_naming_host_and_port(postgres, record):
    where = f"127.0.0.1:{postgres.port}"
    wrong = {"PGPASSWORD": "wrong-" + postgres.password}
    line = _one_line_error(["runs", "--db", record], 2, wrong)
    assert line == f"error: PostgreSQL at {where} refused the login (check PGPASSWORD or ~/.pgpass)"
    elsewhere = record.rsplit("/", 1)[0] + "/nowhere"
    line = _one_line_error(
        ["results", "latest"], 2, {"PGPASSWORD": postgres.password, "DBPA_DB": elsewhere}
    )
    assert line == f"error: PostgreSQL at {where} has no database 'nowhere' (create it first)"


def test_a_server_down_or_silent_exits_1_within_the_connect_budget(postgres):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens once closed
    down = f"postgresql://{postgres.user}@127.0.0.1:{port}/dbpa"
    line = _one_line_error(["runs", "--db", down], 1, {"PGPASSWORD": postgres.password})
    budget = f"(tried for up to {CONNECT_TIMEOUT_S} s)"
    assert line == f"error: PostgreSQL at 127.0.0.1:{port} cannot be reached {budget}"
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        started = time.monotonic()
        url = f"postgresql://{postgres.user}@127.0.0.1:{port}/dbpa?connect_timeout=2"
        line = _one_line_error(["runs", "--db", url], 1, {"PGPASSWORD": postgres.password})
        assert time.monotonic() - started < 2 + 5
    assert line == f"error: PostgreSQL at 127.0.0.1:{port} cannot be reached (tried for up to 2 s)"
    assert postgres.password not in line


def test_a_record_of_a_newer_dbpa_is_refused_as_a_file_is(postgres, record, tmp_path):
    _rows(record, postgres.password, "INSERT INTO schema_migrations VALUES (999, 'future', now())")
    env = {"PGPASSWORD": postgres.password}
    with ScriptedServer(rules=RULES) as server:  # never asked: the run stops before
        (tmp_path / "a.yaml").write_text(yaml.safe_dump(_config(server, "audit-a")))
        for args in (
            ["runs", "--db", record],  # a reader
            ["monitor", "reset", "a", "--all", "--db", record],  # a writer
            ["run", str(tmp_path / "a.yaml"), "--db", record],
        ):
            result = runner.invoke(app, args, env=env)
            assert result.exit_code == 2, result.output
            said = " ".join(result.stderr.split())  # a long message, wrapped at 200 columns
            assert "was written by a newer dbpa (schema version 999;" in said
        assert server.counts.total == 0


@pytest.mark.slow
def test_a_restart_mid_audit_loses_nothing_and_the_next_run_resumes(
    postgres, prefect_home, tmp_path
):
    url = url_of(postgres, postgres.create_database())
    dbpa = Dbpa(tmp_path, prefect_home, postgres.password)
    needed = ARMS_PER_RUN * K
    with ScriptedServer(rules=RULES, embedding_dimension=24, latency=_latency) as server:
        (tmp_path / "b.yaml").write_text(
            yaml.safe_dump(_config(server, "audit-b", SLOW_PROMPT, concurrency=1))
        )
        running = dbpa.start(["run", "b.yaml", "--db", url])
        deadline = time.monotonic() + 600
        while stored(url, postgres.password) < 2:
            assert time.monotonic() < deadline, "nothing sampled"
            assert running.poll() is None, running.communicate()[0]
            time.sleep(0.2)
        postgres.restart()
        server.latency = 0.0  # B was sampling at the restart: the rest is answered at once
        output, _ = running.communicate(timeout=600)
        again = ""
        if running.returncode != 0:  # the restart dropped the flow's connection: the run failed
            assert running.returncode == 1, output
            assert f"127.0.0.1:{postgres.port}" in output
            assert "Traceback" not in output
            assert "closed the connection" in output or "cannot be reached" in output, output
            kept = stored(url, postgres.password)
            asked = slow_asked(server)
            code, again = dbpa.run(["run", "b.yaml", "--db", url])
            assert code == 0, again
            assert slow_asked(server) - asked == needed - kept  # none of the kept asked again
        # else the writer connected again within its budget and went on, or the restart
        # dropped only the head start's connection (what it had asked but not stored yet is
        # asked again)
    assert stored(url, postgres.password) == needed
    status = sorted(_rows(url, postgres.password, "SELECT status FROM runs"))
    assert status == ([("completed",), ("crashed",)] if again else [("completed",)])
    assert postgres.password not in output + again
