"""Session-wide fixtures shared by the test packages, and the environment of every test
process (each xdist worker is one): set before any test module imports numpy or Prefect."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

import pytest

# Two workers on two cores: BLAS and torch's OpenMP threads on top of them only wait on
# each other.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The embedded model's llama.cpp threads wait on each other at every token; with the other
# worker busy, two of them were over 6x slower than one (dbpa/llm/_local.py).
os.environ.setdefault("DBPA_LOCAL_THREADS", "1")
# A flow run outside the harness starts Prefect's ephemeral server, which must answer within
# 20 s by default: not always so on two cores shared by two workers and their subprocesses.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# A Prefect home of this process's own: a flow run outside the harness starts a temporary
# server on PREFECT_HOME's SQLite database, which two workers must not share.
_HOME = tempfile.mkdtemp(prefix="dbpa-tests-prefect-home-")
os.environ["PREFECT_HOME"] = _HOME
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the Prefect ephemeral servers this process started and remove its Prefect home:
    an xdist worker ends with ``os._exit``, past Prefect's and our own ``atexit``, and left
    its server running."""
    server = sys.modules.get("prefect.server.api.server")
    if server is not None:
        for instance in list(server.SubprocessASGIServer._instances.values()):
            instance.stop()
    shutil.rmtree(_HOME, ignore_errors=True)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker more than the logical cores (``-n logical``, the default): a fifth of the
    suite's worker time waits (on subprocesses, servers, connect budgets), and a third worker
    fills it."""
    return (os.cpu_count() or 1) + 1


SLOW_FIXTURES = frozenset({"prefect_home", "prefect_server", "embedder", "browser"})
"""Fixtures of real parts that cost seconds per test: ``dbpa`` processes (their Prefect home),
the deployments' real Prefect server and workers, the embedded models, Chromium."""
SLOW_GROUPS = frozenset({"prefect-server", "embedded-model"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test of a real part (``SLOW_FIXTURES``, ``SLOW_GROUPS``), so that
    ``-m "not slow"`` leaves out what a test file's author did not mark by hand."""
    for item in items:
        group = item.get_closest_marker("xdist_group")
        in_group = group is not None and group.args and group.args[0] in SLOW_GROUPS
        if in_group or SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


pytest_plugins = [
    "tests.support.prefect_api",
    "tests.support.providers",
    "tests.support.cli_process",
    "tests.support.checkout",
    "tests.support.postgres",
    "tests.support.chromium",
]
