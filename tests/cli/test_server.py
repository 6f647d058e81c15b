"""Prefect's temporary server of ``dbpa run``: its start-up timeout, a start that fails, and
its end with the run, also a run killed with SIGKILL."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

import storage
from dbpa.launch import _server
from dbpa.launch._server import DEFAULT_STARTUP_TIMEOUT_S, TIMEOUT_SETTING, _uvicorn_ending_with
from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.cli_process import ROOT, run_dbpa
from tests.support.scripted_server import ScriptedServer
from tests.support.signals import alive, command_line, descendants

TEXT = {"capture_output": True, "text": True, "timeout": 60}


def timeout_in_a_fresh_process(env: dict[str, str]) -> float:
    script = "from dbpa.launch._server import startup_timeout; print(startup_timeout())"
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


@pytest.mark.usefixtures("wide_console")
def test_a_run_refused_before_its_flow_stops_its_temporary_server_at_once(tmp_path, monkeypatch):
    """A run that fails while it prepares (here: no margin for --require-equivalent) ran
    nothing on the server it launched first: the server is stopped before the command
    returns, not at the process's exit (in a longer-lived process it kept running)."""
    launched: list[_server.TemporaryServer] = []

    class Recorded(_server.TemporaryServer):
        def __init__(self) -> None:
            super().__init__()
            launched.append(self)

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(_server, "_prefect_would_start_one", lambda: True)  # not the harness's
    monkeypatch.setattr(_server, "TemporaryServer", Recorded)
    config = ROOT / "examples" / "personas.yaml"
    args = ["--db", str(tmp_path / "n.duckdb"), "--require-equivalent", "control"]
    result = invoke("run", str(config), *args)
    assert result.exit_code == 2, result.output
    assert "the config has no equivalence margin" in text(result)
    assert len(launched) == 1
    assert launched[0]._process.poll() is not None, "the server outlived the refused run"


def _answers(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/api/health")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _temporary_server(run: subprocess.Popen[bytes], deadline: float) -> int:
    """The pid of the Prefect server ``run`` started, once that server answers."""
    while time.monotonic() < deadline:
        assert run.poll() is None, f"dbpa run exited with {run.returncode}"
        for pid in descendants(run.pid):
            args = command_line(pid)
            if "prefect.server.api.server:create_app" in args:
                port = int(args[args.index("--port") + 1])
                while time.monotonic() < deadline and not _answers(port):
                    time.sleep(0.1)
                return pid
        time.sleep(0.1)
    raise AssertionError("no temporary Prefect server answered within the deadline")


@pytest.mark.slow
def test_a_run_killed_with_sigkill_does_not_leave_its_temporary_server_running(
    tmp_path, prefect_home
):
    with ScriptedServer(rules=RULES, latency=1.0) as provider:
        config = tmp_path / "audit.yaml"
        config.write_text(yaml.safe_dump(make_config(provider, k=10)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env |= {"PREFECT_HOME": str(prefect_home), "PYTHONPATH": str(ROOT), KEY_ENV: "sk-x"}
        run = subprocess.Popen(
            [sys.executable, "-m", "dbpa.cli", "run", str(config), "--db", str(tmp_path / "a.db")],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = None
        try:
            server = _temporary_server(run, time.monotonic() + 120)
            run.kill()
            run.wait()
            deadline = time.monotonic() + 10
            while alive(server) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive(server), "the temporary server outlived its killed run by 10 s"
        finally:
            run.kill()
            if server is not None and alive(server):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(server, signal.SIGKILL)


def test_a_server_whose_parent_ended_before_it_asked_for_the_signal_does_not_start():
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **TEXT)
    orphan = subprocess.run(_uvicorn_ending_with(int(ended.stdout), "--version"), **TEXT)
    assert (orphan.returncode, orphan.stdout, orphan.stderr) == (0, "", "")
    # The same command under the parent it names does start (here: uvicorn's version).
    child = subprocess.run(_uvicorn_ending_with(os.getpid(), "--version"), **TEXT)
    assert "uvicorn" in child.stdout, child.stderr
