"""``dbpa run`` stopped by SIGTERM: it exits 143 at once, leaves no process behind, and the
next run resumes from the record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.pipeline.conftest import KEY_ENV, RULES, make_config
from tests.support.cli_process import ROOT, run_dbpa
from tests.support.scripted_server import ScriptedServer

CHAT = "/v1/chat/completions"


def _descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid``, read from /proc."""
    found: set[int] = set()
    pending = [pid]
    while pending:
        current = pending.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    pending.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_sigterm_while_sampling_exits_143_and_stops_prefects_server(tmp_path, prefect_home):
    with ScriptedServer(rules=RULES, latency=1.0) as provider:
        config = tmp_path / "audit.yaml"
        config.write_text(yaml.safe_dump(make_config(provider, k=10)))
        db = tmp_path / "a.duckdb"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env |= {"PREFECT_HOME": str(prefect_home), "PYTHONPATH": str(ROOT), KEY_ENV: "sk-x"}
        process = subprocess.Popen(
            [sys.executable, "-m", "dbpa.cli", "run", str(config), "--db", str(db)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while provider.counts.by_endpoint[CHAT] < 1:
                assert time.monotonic() < deadline, "no model request within 120 s"
                time.sleep(0.05)
            children = _descendants(process.pid)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 128 + signal.SIGTERM
        finally:
            process.kill()
        time.sleep(0.5)
        assert children, "Prefect's temporary server runs as a child"
        assert not [pid for pid in children if _alive(pid)]
        asked_before = provider.counts.by_endpoint[CHAT]

        again = run_dbpa(
            ["run", str(config), "--db", str(db)], prefect_home, tmp_path, {KEY_ENV: "sk-x"}
        )
        assert again.returncode == 0, again.stdout
        # The requests in flight at the signal were answered and kept before the exit: no
        # output of the 5 arms x k=10 was asked twice.
        assert 0 < asked_before < 5 * 10
        assert provider.counts.by_endpoint[CHAT] == 5 * 10
