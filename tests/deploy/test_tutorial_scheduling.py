"""The tutorial "Scheduled audits and a drift alarm" (docs/tutorials/scheduling.md) as written,
on the session's Prefect server: its ``prefect server start`` is that server (started by the
fixture with the same command and a free port, which stands for 4200), ``dbpa serve`` runs in
the background until the test stops it, its ticks run on the served deployment, and its
drift alarm reaches the webhook of the notification block it creates. The scripted provider
stands in for the model (as in tests/docs/test_tutorials.py) and, as the page's provider
that changed its model after the third night, answers differently from the ticks after the
alarm's automation is installed."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dbpa.cli import app
from tests.deploy._processes import BIN, DBPA, REPO, start, wait_for
from tests.deploy.conftest import PrefectServer
from tests.docs.test_tutorials import _blocks, _write_files
from tests.pipeline.conftest import KEY_ENV, RULES
from tests.support.scripted_server import Rule, ScriptedServer

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("prefect-server")]

PAGE = REPO / "docs" / "tutorials" / "scheduling.md"
PAGE_API_URL = "http://127.0.0.1:4200/api"
"""The URL the page exports: the session server's stands for it."""
AUTOMATION = yaml.safe_load(
    (REPO / "deployments" / "automations" / "drift-alarm.yaml").read_text()
)["name"]
QUIET = 3
"""The ticks before the provider's change."""
FAMILIAR = next(rule for rule in RULES if rule.contains == "")
CHANGED = [Rule("", [(" ".join(o.text.split()[:4]), o.weight) for o in FAMILIAR.choices()])]
"""What the provider's changed model answers: the same answers, cut short (new texts)."""


@dataclass(frozen=True)
class Webhook:
    """An HTTP endpoint on 127.0.0.1 that keeps the JSON bodies posted to it."""

    url: str
    received: list[dict[str, object]]


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    received: list[dict[str, object]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Webhook(f"http://127.0.0.1:{server.server_port}/hook", received)
    finally:
        server.shutdown()
        server.server_close()


def _lines(page: Path) -> list[str]:
    """The page's shell command lines, in order, comments and blank lines dropped."""
    lines = [
        line.split(" #", 1)[0].strip() for b in _blocks(page, "bash") for line in b.split("\n")
    ]
    return [line for line in lines if line]


def _shell(line: str, env: dict[str, str], cwd: Path) -> str:
    """``line`` run by bash as a reader's terminal would; its output (it must exit 0)."""
    done = subprocess.run(
        ["bash", "-c", line], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _alarmed(audit: str) -> list[str]:
    """The arms of ``audit`` whose drift alarm is raised (``dbpa drift``, in this process)."""
    result = CliRunner().invoke(app, ["drift", audit, "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [a["arm"] for a in json.loads(result.stdout)["latest"] if a["alarm"]]


def test_the_scheduling_tutorial_runs_as_written(
    prefect_server: PrefectServer, webhook: Webhook, tmp_path: Path, monkeypatch
):
    api = prefect_server.api
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, "sk-tutorial-test")
    (tmp_path / "deployments").symlink_to(REPO / "deployments")  # "from the repository root"
    env = {
        **prefect_server.env,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",  # the project's environment
        KEY_ENV: "sk-tutorial-test",
    }
    ticks: list[str] = []
    serve, installed = None, False
    with ScriptedServer(rules=RULES, embedding_dimension=24) as provider:
        _write_files(PAGE, provider, tmp_path)
        block = tmp_path / "alarm_block.py"
        block.write_text(re.sub(r'url="[^"]+"', f'url="{webhook.url}"', block.read_text()))
        try:
            for line in _lines(PAGE):
                words = shlex.split(line)
                if words[0] == "export":
                    key, _, value = words[1].partition("=")
                    if key == "PREFECT_API_URL":
                        assert value == PAGE_API_URL
                    else:
                        assert env[key] == value, key
                elif words[:3] == ["prefect", "server", "start"]:
                    assert words[3:] == ["--host", "127.0.0.1"]  # the fixture's, on its port
                elif words[:2] == ["dbpa", "serve"]:
                    serve = start(
                        [DBPA, *words[1:]],
                        {**env, "PREFECT_RUNNER_POLL_FREQUENCY": "1"},
                        prefect_server.logs / "tutorial-serve.log",
                        cwd=tmp_path,
                    )
                    audit = yaml.safe_load((tmp_path / words[2]).read_text())["name"]
                    name = f"dbpa-scheduled-audit/{audit}"
                    wait_for(partial(api.deployment, name), 120, f"{name}\n{serve.output()}")
                elif words[:3] == ["prefect", "deployment", "run"]:
                    params = dict(w.split("=", 1) for w in words[words.index("-p") + 1 :: 2])
                    overrides = json.loads(params["overrides"])
                    if len(ticks) == QUIET:
                        assert installed  # the alarm's automation is there before the change
                        provider.rules = list(CHANGED)
                    if not ticks:  # the first as written; the others through the API
                        output = _shell(line, env, tmp_path)
                        run_id = re.search(r"UUID: ([0-9a-f-]{36})", output).group(1)
                    else:
                        run_id = api.run_deployment(words[3], overrides=overrides)
                    run = prefect_server.final(run_id, serve)
                    assert run["state"]["type"] == "COMPLETED", serve.output()[-4000:]
                    ticks.append(run_id)
                elif words[0] == "dbpa":
                    if words[1:3] == ["monitor", "reset"]:  # the alarm it resets is there
                        assert _alarmed(words[3])
                    result = CliRunner().invoke(app, words[1:], catch_exceptions=False)
                    assert result.exit_code == 0, (line, result.output)
                else:
                    _shell(line, env, tmp_path)
                    installed |= words[:3] == ["prefect", "automation", "create"]
            received = webhook.received  # the alarm's notification, sent by the server
            texts = wait_for(lambda: [str(b["text"]) for b in received] or None, 120, "the hook")
            assert any(t.startswith("dbpa: nightly-audit changed (") for t in texts), texts
        finally:
            if serve is not None:
                stopped = serve.stop(grace=60)
                assert not stopped.leftovers
            installed_now = api.automations().get(AUTOMATION)  # the session's server
            if installed_now:
                api.delete_automation(installed_now["id"])
    assert len(ticks) == 6
    assert provider.counts.total > 0
    # What section 4 shows is on the ticks.
    text = PAGE.read_text()
    named = re.search(r"Each tick is a flow run named `(\S+) @ <tick>`", text).group(1)
    last = api.flow_run(ticks[-1])
    assert last["name"] == f"{named} @ {overrides['epoch']}"
    shown = set(re.findall(r"`(nightly-audit-[a-z]+)`", text))
    assert len(shown) == 6
    assert shown <= {a["key"] for a in api.artifacts_of(ticks[-1])}
