"""Many ``dbpa run`` processes writing one PostgreSQL record at once (issue 50), as users and
workers start them: fresh interpreters (spawned, never forked), each with Prefect's temporary
server, against a real PostgreSQL server and the scripted provider.

Different audits, different ticks of one audit and the same audit and tick started twice
write at once, and one writer is killed with SIGKILL: the others finish, its re-run resumes;
nothing is lost or stored twice, the drift monitor counts each tick once, and the password
is nowhere (command lines, outputs, the record, Prefect's database, reports, exports).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbpa.cli import app
from tests.cli.conftest import runner
from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.cli_process import ROOT
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.slow

K = 4
TICK_1, TICK_2 = "2026-11-01T03:00:00+00:00", "2026-11-02T03:00:00+00:00"
SLOW_PROMPT = "My cough has lasted a week. Should I see a doctor?"
"""Audit B's prompt: its arms are answered after two seconds each, one at a time, so that B
is still sampling when it is killed."""
PERSONAS = [
    {"value": "doctor", "label": "control"},
    {"value": "comedian", "label": "target"},
]
ARMS_PER_RUN = 1 + len(PERSONAS)


SLOW_WORD = "cough"
"""In every message of audit B's arms (and no other's)."""


def _latency(body: dict[str, Any]) -> float:
    """Two seconds for each request of audit B's arms."""
    return 2.0 if SLOW_WORD in json.dumps(body.get("messages", [])) else 0.0


def _held_back(release: threading.Event) -> Callable[[dict[str, Any]], float]:
    """Latency that holds the requests of audit B's perturbed arms until ``release`` is set:
    B stores its original arm and then waits, there to be killed."""

    def latency(body: dict[str, Any]) -> float:
        messages = body.get("messages", [])
        if SLOW_WORD in json.dumps(messages) and messages[-1].get("content") != SLOW_PROMPT:
            release.wait(120)
        return 0.0

    return latency


def url_of(postgres: Any, dbname: str) -> str:
    return f"postgresql://{postgres.user}@{postgres.host}:{postgres.port}/{dbname}"


class Dbpa:
    """``python -m dbpa.cli`` processes in ``cwd``, each with a Prefect home of its own (a copy
    of the session's migrated one) and the password only in ``PGPASSWORD``."""

    def __init__(self, cwd: Path, prefect_home: Path, password: str) -> None:
        self.cwd, self._home, self._password = cwd, prefect_home, password
        self.homes: list[Path] = []
        self.command_lines: list[list[str]] = []

    def start(self, args: list[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
        home = self.cwd / f"prefect-home-{len(self.homes)}"
        home.mkdir()
        shutil.copyfile(self._home / "prefect.db", home / "prefect.db")
        self.homes.append(home)
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PG"))}
        environment |= {
            "PREFECT_HOME": str(home),
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "1000",
            "PGPASSWORD": self._password,
            KEY_ENV: "sk-test",
            **(env or {}),
        }
        command = [sys.executable, "-m", "dbpa.cli", *args]
        self.command_lines.append(command)
        return subprocess.Popen(
            command,
            env=environment,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, args: list[str], env: Mapping[str, str] | None = None) -> tuple[int, str]:
        process = self.start(args, env)
        output, _ = process.communicate(timeout=600)
        return process.returncode, output


def _config(
    server: ScriptedServer, name: str, prompt: str | None = None, concurrency: int = 8
) -> dict[str, Any]:
    config = make_config(server, name=name, k=K, n_permutations=99)
    config["perturbations"] = [{"kind": "personas", "values": PERSONAS}]
    config["models"][0]["max_concurrency"] = concurrency
    if prompt is not None:
        config["prompt"] = prompt
    return config


def _rows(
    url: str, password: str, sql: str, params: list[Any] | None = None
) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, password=password, autocommit=True) as con:
        cursor = con.execute(sql, params)
        return cursor.fetchall() if cursor.description is not None else []


def slow_asked(server: ScriptedServer) -> int:
    """Requests of audit B's arms so far."""
    return sum(SLOW_WORD in json.dumps(body["messages"]) for body in server.counts.requests)


def stored(url: str, password: str, arm_ids: list[str] | None = None) -> int:
    """Outputs in the record (of ``arm_ids`` only, when given; 0 before its tables exist).
    By arm id: a run records its arms once its flow starts, after its head start stored
    outputs."""
    where, params = ("WHERE arm_id = ANY(%s)", [arm_ids]) if arm_ids is not None else ("", [])
    try:
        return int(_rows(url, password, f"SELECT count(*) FROM samples {where}", params)[0][0])
    except Exception:  # no tables yet
        return 0


def arm_ids(config: Path, epoch: str) -> list[str]:
    """The arms of ``config``'s audit at ``epoch``."""
    from dbpa.launch import load_audit

    _, plan = load_audit(config, {"epoch": epoch})
    assert plan is not None
    return [arm.arm_id for arm in plan.arms]


def _whole_record(url: str, password: str) -> str:
    """Every row of every table of the record, as text."""
    tables = _rows(
        url,
        password,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
    )
    return "\n".join(
        str(row) for (table,) in tables for row in _rows(url, password, f"SELECT * FROM {table}")
    )


def _files_hold(root: Path, secret: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


@pytest.mark.usefixtures("wide_console")  # the readers' tables: no cell wrapped
def test_writers_at_once_lose_duplicate_and_count_twice_nothing(postgres, prefect_home, tmp_path):
    url = url_of(postgres, postgres.create_database())
    dbpa = Dbpa(tmp_path, prefect_home, postgres.password)
    release = threading.Event()
    held = _held_back(release)
    with ScriptedServer(rules=RULES, embedding_dimension=24, latency=held) as server:
        for name, config in {
            "a.yaml": _config(server, "audit-a"),
            "b.yaml": _config(server, "audit-b", SLOW_PROMPT, concurrency=ARMS_PER_RUN * K),
        }.items():
            (tmp_path / name).write_text(yaml.safe_dump(config))

        def a(tick: str) -> list[str]:
            return ["run", "a.yaml", "--set", f"epoch={tick}"]

        b_arms = arm_ids(tmp_path / "b.yaml", TICK_1)
        via_env = {"DBPA_DB": url}
        writers = {
            "a1": dbpa.start([*a(TICK_1), "--db", url]),
            "a1 again": dbpa.start(a(TICK_1), via_env),  # the same audit and tick, twice
            "a2": dbpa.start(a(TICK_2), via_env),  # another tick of the audit
            "b": dbpa.start(["run", "b.yaml", "--set", f"epoch={TICK_1}"], via_env),
        }
        deadline = time.monotonic() + 600  # four interpreters starting on a busy machine
        while stored(url, postgres.password, b_arms) < 1:  # b is sampling: killed
            assert time.monotonic() < deadline, "b never sampled"
            assert writers["b"].poll() is None, writers["b"].communicate()[0]
            time.sleep(0.1)
        writers["b"].send_signal(signal.SIGKILL)
        release.set()  # its requests in flight are answered to no one
        outputs = {name: w.communicate(timeout=600)[0] for name, w in writers.items()}
        assert writers["b"].returncode == -signal.SIGKILL
        for name in ("a1", "a1 again", "a2"):
            assert writers[name].returncode == 0, outputs[name]

        b_kept = stored(url, postgres.password, b_arms)
        assert 0 < b_kept < ARMS_PER_RUN * K
        asked_before = slow_asked(server)
        code, again = dbpa.run(["run", "b.yaml", "--set", f"epoch={TICK_1}"], via_env)
        assert code == 0, again
        outputs["b again"] = again
        # the re-run asks only for what the killed run had not stored
        assert slow_asked(server) - asked_before == ARMS_PER_RUN * K - b_kept

    rows = {
        table: _rows(url, postgres.password, f"SELECT count(*) FROM {table}")[0][0]
        for table in ("samples", "arms", "tests", "embeddings")
    }
    runs = 3  # a at two ticks, b at one
    assert rows["arms"] == runs * ARMS_PER_RUN
    assert rows["samples"] == runs * ARMS_PER_RUN * K
    per_arm = _rows(
        url,
        postgres.password,
        "SELECT arm_id, array_agg(idx ORDER BY idx) FROM samples GROUP BY arm_id",
    )
    assert all(indices == list(range(K)) for _, indices in per_arm)
    assert rows["tests"] == runs * len(PERSONAS)
    texts = _rows(url, postgres.password, "SELECT count(DISTINCT text) FROM samples")[0][0]
    assert rows["embeddings"] == texts
    status = sorted(_rows(url, postgres.password, "SELECT audit, epoch, status FROM runs"))
    assert [row for row in status if row[2] != "crashed"] == [
        ("audit-a", TICK_1, "completed"),
        ("audit-a", TICK_1, "completed"),
        ("audit-a", TICK_2, "completed"),
        ("audit-b", TICK_1, "completed"),
    ]
    # the killed run, if its flow had recorded it yet, is marked crashed by its re-run
    assert [row for row in status if row[2] == "crashed"] in ([], [("audit-b", TICK_1, "crashed")])

    # readers, in this process (fresh interpreters are the writers' subject): the runs, their
    # results, the monitor over ticks that three processes ran
    secret = postgres.password
    env = {"PGPASSWORD": secret, "DBPA_DB": url}
    listed = _output(runner.invoke(app, ["runs", "--db", url], env={"PGPASSWORD": secret}))
    assert listed.count("completed") == 4
    monitor = runner.invoke(app, ["drift", "audit-a", "--format", "json"], env=env)
    drift = _output(monitor)
    latest = json.loads(monitor.stdout)["latest"]
    assert len(latest) == ARMS_PER_RUN
    assert {row["ticks"] for row in latest} == {1}  # tick 2 against tick 1, run twice: once
    export = ["export", "--format", "csv", "--out", str(tmp_path / "export")]
    exported = _output(runner.invoke(app, export, env=env))

    a_runs = [
        run_id
        for (run_id,) in _rows(
            url, secret, "SELECT run_id FROM runs WHERE audit = 'audit-a' ORDER BY epoch, run_id"
        )
    ]
    same_tick = [
        _p_values(runner.invoke(app, ["results", r, "--format", "json"], env=env))
        for r in a_runs[:2]
    ]
    assert same_tick[0] == same_tick[1]  # the tick run twice: its tests stored once, shared
    for args in (
        ["compare", a_runs[0], a_runs[2]],
        ["report", a_runs[2], "--out", str(tmp_path / "report")],
        ["plan", str(tmp_path / "a.yaml"), "--from", a_runs[0], "--simulations", "10"],
        ["validate", str(tmp_path / "a.yaml")],
    ):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 0, result.output
        outputs[args[0]] = result.output

    assert all(secret not in " ".join(c) for c in dbpa.command_lines)
    assert all(secret not in output for output in outputs.values())
    assert secret not in listed + drift + exported
    assert secret not in _whole_record(url, secret)
    assert _files_hold(tmp_path, secret.encode()) == []  # Prefect's databases, reports, export


def _output(result: Any) -> str:
    assert result.exit_code == 0, result.output
    return str(result.output)


def _p_values(result: Any) -> dict[str, float]:
    assert result.exit_code == 0, result.output
    return {row["perturbation_id"]: row["p_value"] for row in json.loads(result.stdout)}
