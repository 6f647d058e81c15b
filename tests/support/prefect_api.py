"""The Prefect servers of the test session: one per xdist worker, on databases that are
copies of one migrated once.

A server's first start on a fresh database runs Prefect's migrations: 11.8 CPU-s against
5.9 on a migrated copy (2026-11-28). The first worker to need a server starts it on a fresh
database and copies that, migrated, to a directory of the session's (``pytest_configure``
of the controller); every later server (the other workers', the temporary servers of the
``dbpa`` processes under ``prefect_home``, the deployment tests' real one) starts on a copy.

One server shared by the workers was tried and refused: under three workers' flow runs it
answered 503 Service Unavailable (one SQLite writer behind it), and the suite slowed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from prefect.server.api.server import SubprocessASGIServer

SHARED_DIR = "DBPA_TESTS_SHARED_DIR"
"""Environment variable: the session's directory of the migrated database (and its lock)."""
STARTUP_TIMEOUT = 120
"""Seconds for a server to answer: two cores shared by three workers and their children."""
MIGRATED = "migrated.db"


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not _is_worker(config):
        os.environ[SHARED_DIR] = tempfile.mkdtemp(prefix="dbpa-tests-shared-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _is_worker(config) and SHARED_DIR in os.environ:
        shutil.rmtree(os.environ.pop(SHARED_DIR), ignore_errors=True)


def _start_server(database: Path) -> SubprocessASGIServer:
    """A Prefect server of this worker's on ``database``, migrated there: on a copy of the
    session's migrated database if there is one, else on a fresh one that becomes it."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL, temporary_settings

    shared = Path(os.environ[SHARED_DIR])
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        migrated = shared / MIGRATED
        first = not migrated.exists()
        if not first:
            shutil.copyfile(migrated, database)
            fcntl.flock(lock, fcntl.LOCK_UN)  # the others need not wait for this start
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = f"sqlite+aiosqlite:///{database}"
        with temporary_settings({PREFECT_SERVER_DATABASE_CONNECTION_URL: url}):
            server = SubprocessASGIServer(port=port)
            server.start(timeout=STARTUP_TIMEOUT)
        if first:  # migrated before the server answered; no run in it yet
            with (
                closing(sqlite3.connect(database)) as live,
                closing(sqlite3.connect(migrated)) as copy,
            ):
                live.backup(copy)
    return server


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Prefect's API is a server of this worker's; task results go to a temp dir. As in
    ``prefect.testing.utilities.prefect_test_harness``, the settings are also the
    process-global context (Prefect's event and log workers run in contexts copied before
    this fixture, and send their events to a temporary server of their own without it), and
    logs and events still queued are sent before the worker ends."""
    from prefect.context import _temporary_global_settings_context, get_settings_context
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, PREFECT_LOCAL_STORAGE_PATH, temporary_settings

    database = tmp_path_factory.mktemp("prefect-server") / "prefect.db"
    results = tmp_path_factory.mktemp("prefect-results")
    server = _start_server(database)
    # As Prefect's harness does: Prefect code that would start a temporary server in this
    # process (SubprocessASGIServer()) finds this one; one started before is kept, to be
    # stopped at the session's end (conftest).
    prior = SubprocessASGIServer._instances.get(None)
    SubprocessASGIServer._instances[None] = server
    settings = {PREFECT_API_URL: server.api_url, PREFECT_LOCAL_STORAGE_PATH: results}
    with (
        temporary_settings(settings),
        _temporary_global_settings_context(get_settings_context()),
    ):
        yield
        APILogWorker.drain_all()
        EventsWorker.drain_all()
    server.stop()  # here, where its log line is captured; stop() deletes its own _instances entry
    if prior is None:
        SubprocessASGIServer._instances.pop(None, None)
    else:
        SubprocessASGIServer._instances[None] = prior


@pytest.fixture(scope="session")
def migrated_database(prefect_harness: None) -> Path:
    """The session's migrated Prefect database, made by the first server's start (so a test
    that asks for it has this worker's server running too)."""
    return Path(os.environ[SHARED_DIR]) / MIGRATED
