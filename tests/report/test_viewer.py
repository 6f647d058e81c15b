"""``dbpa view``: the runs and reports of a record over HTTP on 127.0.0.1, nothing else, to
requests addressed to it only; Ctrl-C and SIGTERM stop it and remove its address file."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbpa.report import CONTENT_SECURITY_POLICY, RecordViewer, address_file, viewer_url
from dbpa.report._viewer import _hosts
from storage import Store
from tests.report.conftest import BuiltRun
from tests.support.cli_process import ROOT
from tests.support.signals import interruptible


def _get(url: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


@pytest.fixture
def viewer(labelled_run: BuiltRun):
    server = RecordViewer(labelled_run.db, lambda: Store(labelled_run.db, read_only=True))
    with server.running():
        yield server


def test_the_index_lists_the_runs_and_links_their_reports(viewer, labelled_run):
    status, headers, page = _get(f"{viewer.url}/")
    assert status == 200
    assert f'<a href="/runs/{labelled_run.run_id}">' in page
    assert "script-src" not in headers["Content-Security-Policy"]


def test_a_run_is_served_in_every_format_under_the_reports_policy(viewer, labelled_run):
    status, headers, page = _get(f"{viewer.url}/runs/{labelled_run.run_id}")
    assert status == 200
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "persona" in page
    assert "comedian" in page
    status, _, text = _get(f"{viewer.url}/runs/{labelled_run.run_id}.json")
    assert json.loads(text)["run"]["run_id"] == labelled_run.run_id
    status, _, text = _get(f"{viewer.url}/runs/{labelled_run.run_id}.md")
    assert text.startswith("# dbpa audit")


@pytest.mark.parametrize(
    "path", ["/runs/no-such-run", "/runs/../../etc/passwd", "/etc/passwd", "/runs/", "/x"]
)
def test_anything_else_is_a_404(viewer, path):
    status, _, page = _get(f"{viewer.url}{path}")
    assert status == 404
    assert "root:" not in page


def test_the_address_file_lives_as_long_as_the_viewer(labelled_run):
    server = RecordViewer(labelled_run.db, lambda: Store(labelled_run.db, read_only=True))
    assert viewer_url(labelled_run.db) is None
    with server.running():
        assert viewer_url(labelled_run.db) == server.url
    assert viewer_url(labelled_run.db) is None
    assert not address_file(labelled_run.db).exists()


def test_an_address_left_by_a_dead_viewer_is_ignored(tmp_path):
    db = tmp_path / "a.duckdb"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    address_file(db).write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": int(dead.stdout)}))
    assert viewer_url(db) is None


@contextlib.contextmanager
def _dbpa_view(db: Path, cwd: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A real ``dbpa view --db DB`` process and its URL, once it serves."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    process = subprocess.Popen(
        [sys.executable, "-m", "dbpa.cli", "view", "--db", str(db)],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith(f"Serving the runs of {db} at http://127.0.0.1:"), line
        yield process, line.split(" at ", 1)[1].split("/ ", 1)[0]
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    ("stop", "code"),
    [(signal.SIGINT, 0), (signal.SIGTERM, 128 + signal.SIGTERM)],
    ids=["ctrl-c", "sigterm"],
)
def test_the_command_serves_until_ctrl_c_or_sigterm(labelled_run, tmp_path, stop, code):
    with _dbpa_view(labelled_run.db, tmp_path) as (process, url):
        assert _get(f"{url}/runs/{labelled_run.run_id}")[0] == 200
        assert viewer_url(labelled_run.db) == url
        process.send_signal(stop)
        assert process.wait(timeout=30) == code
    assert not address_file(labelled_run.db).exists()


@pytest.fixture(scope="module")
def served(labelled_run, tmp_path_factory) -> Iterator[int]:
    """The port of a ``dbpa view`` of the labelled run, for the module's tests."""
    with _dbpa_view(labelled_run.db, tmp_path_factory.mktemp("view")) as (_, url):
        yield int(url.rsplit(":", 1)[1])


def _ask(port: int, path: str, hosts: list[str]) -> tuple[int, str, str]:
    """GET ``path`` from 127.0.0.1:``port`` with exactly these ``Host`` headers: status,
    content type and body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        for host in hosts:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_names_a_browser_sends_for_it_are_answered(served, labelled_run, name):
    status, _, page = _ask(served, f"/runs/{labelled_run.run_id}", [f"{name}:{served}"])
    assert status == 200
    assert labelled_run.run_id in page


@pytest.mark.parametrize(
    "hosts",
    [
        [],
        ["attacker.example:{port}"],  # DNS rebinding: the attacker's name, our address
        ["attacker.example"],
        ["127.0.0.1"],  # a browser sends the port unless it is 80
        ["localhost"],
        ["127.0.0.1:{other}"],
        ["localhost:{other}"],
        ["[::1]:{port}"],  # not listening there
        ["localhost.:{port}"],
        ["127.0.0.1.attacker.example:{port}"],
        ["127.0.0.1:{port}", "attacker.example:{port}"],
        ["attacker.example:{port}", "127.0.0.1:{port}"],
    ],
    ids=lambda hosts: " + ".join(hosts) or "no Host",
)
@pytest.mark.parametrize("path", ["/", "/runs/{run}", "/runs/{run}.json", "/x"])
def test_requests_addressed_to_another_host_get_421_and_nothing_of_the_record(
    served, labelled_run, hosts, path
):
    other = served + 1 if served < 65535 else served - 1
    named = [host.format(port=served, other=other) for host in hosts]
    status, content_type, body = _ask(served, path.format(run=labelled_run.run_id), named)
    assert status == 421
    assert content_type.startswith("text/plain")
    assert body == "Misdirected request: this server answers only at its own address.\n"


def test_the_bare_names_are_answered_on_port_80_only():
    assert _hosts(80) == {"127.0.0.1", "localhost", "127.0.0.1:80", "localhost:80"}
    assert _hosts(8765) == {"127.0.0.1:8765", "localhost:8765"}


def test_a_record_in_a_missing_folder_is_exit_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "dbpa.cli", "view", "--db", str(tmp_path / "no" / "x.duckdb")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "the folder of" in done.stderr
    assert "does not exist" in done.stderr


def test_a_record_not_written_yet_is_served_as_one_without_runs(tmp_path):
    """Started with a worker before the first audit: no run yet, then the run once written."""
    db = tmp_path / "later.duckdb"
    with _dbpa_view(db, tmp_path) as (_, url):
        status, _, page = _get(f"{url}/")
        assert (status, "No run is recorded yet." in page) == (200, True)
        assert _get(f"{url}/runs/anything")[0] == 404
        assert viewer_url(db) == url  # the report task links to it from the first run on
