"""The suite writes nothing into the checkout: a test's files belong in its ``tmp_path``.

The session (xdist's controller, once every worker has ended) lists the checkout's files as
it starts and as it ends, and fails when files appeared, naming them: a deployment test once
left reports in ``reports/`` at every run (its flow ran where the repository is, with the
deployment's default ``out: reports``). Caches of the tools are not the checkout's files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli_process import ROOT

TOOL_DIRS = frozenset(
    {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"}
)
"""Directories of git, the virtualenv and the tools' caches, left out of the listing."""

_KEY = pytest.StashKey[frozenset[str]]()


def files_in(root: Path) -> frozenset[str]:
    """The files under ``root`` (paths relative to it), without :data:`TOOL_DIRS`."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in TOOL_DIRS]
        found.update(os.path.relpath(os.path.join(folder, f), root) for f in files)
    return frozenset(found)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        session.config.stash[_KEY] = files_in(ROOT)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_KEY, None)
    if before is None:
        return
    written = sorted(files_in(ROOT) - before)
    if not written:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_sep("=", f"the tests wrote {len(written)} file(s) into {ROOT}", red=True)
        for path in written[:20]:
            reporter.write_line(path)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
