"""The ``dbpa`` command driven in-process: a wide console, a temp working directory, and the
scripted provider and stored records of the pipeline and report tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from dbpa.cli import app
from tests.pipeline.conftest import (  # noqa: F401 (fixtures)
    KEY_ENV,
    provider,
    rotating_provider,
    write_config,
)
from tests.report.conftest import labelled_run, unlabelled_run  # noqa: F401 (fixtures)
from tests.storage.conftest import sound_record  # noqa: F401 (fixtures)

runner = CliRunner()


@pytest.fixture(autouse=True)
def _key_and_cwd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The scripted provider's key in the environment; a temp working directory (reports
    and exports by default go there)."""
    monkeypatch.setenv(KEY_ENV, "sk-pipeline-test")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's tables as on a wide terminal, so cells are not wrapped mid-word."""
    from dbpa import cli

    for console in (cli.out, cli.err):
        monkeypatch.setattr(console, "width", 200)


def invoke(*args: str) -> Result:
    """Run ``dbpa ARGS`` in this process; exceptions other than exits propagate."""
    return runner.invoke(app, list(args), catch_exceptions=False)


def shown_at(columns: int, *args: str) -> str:
    """What ``dbpa ARGS`` prints in a terminal ``columns`` wide (a process of its own, as a
    user runs it: rich reads the width from ``COLUMNS``)."""
    shown = subprocess.run(
        [sys.executable, "-m", "dbpa.cli", *args],
        capture_output=True,
        text=True,
        env=os.environ | {"COLUMNS": str(columns)},
        timeout=120,
        check=True,
    )
    return shown.stdout


def text(result: Result) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())
