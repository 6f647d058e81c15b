"""``dbpa`` in a fresh interpreter, as a user runs it: no Prefect API URL (so the command
starts Prefect's temporary server), a Prefect home of the test session's own, and the
terminal output (stdout and stderr, in order) normalised for timings, paths and run ids."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def prefect_home(tmp_path_factory: pytest.TempPathFactory, migrated_database: Path) -> Path:
    """A Prefect home for the ``dbpa`` processes of the session, whose database is a copy of
    one already migrated: every server start finds it, as a user's second run does."""
    home = tmp_path_factory.mktemp("prefect-home")
    shutil.copyfile(migrated_database, home / "prefect.db")
    return home


def run_dbpa(
    args: list[str], home: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m dbpa.cli ARGS``: stdout and stderr together, as a terminal shows them
    (1000 columns wide, so that rich wraps nothing). ``env`` comes on top (a test whose
    subject is not Prefect's temporary server can set ``PREFECT_API_URL`` there)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    environment |= {
        "PREFECT_HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "1000",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "dbpa.cli", *args],
        env=environment,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )


_NORMALISE = (
    (re.compile(r"^\d\d:\d\d:\d\d\.\d{3} \|", re.MULTILINE), "<TIME> |"),
    (re.compile(r"\b[\w.-]+-\d{8}-\d{6}-[0-9a-f]{8}\b"), "<RUN>"),
    (re.compile(r"\b\d+:\d\d:\d\d\b"), "<ELAPSED>"),
    (re.compile(r"─{3,}"), "<RULE>"),
    (re.compile(r"[ \t]+"), " "),
)


def normalised(output: str, tmp: Path) -> str:
    """``output`` with ``tmp`` as ``<TMP>``, timestamps, run ids and elapsed times replaced,
    runs of blanks as one and every line stripped."""
    text = output.replace(str(tmp), "<TMP>")
    for pattern, replacement in _NORMALISE:
        text = pattern.sub(replacement, text)
    return "\n".join(line.strip() for line in text.strip().splitlines())
