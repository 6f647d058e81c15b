"""``dbpa view``: the runs and reports of a record over HTTP on 127.0.0.1, nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from dbpa.report import CONTENT_SECURITY_POLICY, RecordViewer, address_file, viewer_url
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


def test_the_command_serves_until_ctrl_c(labelled_run, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    process = subprocess.Popen(
        [sys.executable, "-m", "dbpa.cli", "view", "--db", str(labelled_run.db)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith(f"Serving the runs of {labelled_run.db} at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].split("/ ", 1)[0]
        assert _get(f"{url}/runs/{labelled_run.run_id}")[0] == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    assert not address_file(labelled_run.db).exists()


def test_a_missing_record_is_exit_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "dbpa.cli", "view", "--db", str(tmp_path / "none.duckdb")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "none.duckdb does not exist" in " ".join(done.stderr.split())
