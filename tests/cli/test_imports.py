"""The command line itself and the commands that only show or read stay light: ``--help`` and a
mistyped command line load the CLI alone; the readers no Prefect, model stack or scipy.stats."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HEAVY = ("prefect", "torch", "sentence_transformers", "litellm", "scipy.stats")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "personas.yaml"


def loaded_after(args: list[str]) -> list[str]:
    """The HEAVY modules in a fresh interpreter after it ran ``dbpa ARGS`` (exit 0)."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from typer.testing import CliRunner
        from dbpa.cli import app
        result = CliRunner().invoke(app, {args!r})
        assert result.exit_code == 0, result.output
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "command",
    [["--help"], ["validate", str(EXAMPLE)], ["runs", "--db"], ["results", "latest", "--db"]],
    ids=["help", "validate", "runs", "results"],
)
def test_help_validate_and_the_readers_import_no_heavy_stack(command, labelled_run):
    args = [*command, str(labelled_run.db)] if command[-1] == "--db" else command
    assert loaded_after(args) == []


def test_compare_imports_neither_prefect_nor_a_model_stack(tmp_path):
    from tests.report.conftest import build_run

    db = tmp_path / "two.duckdb"
    first = build_run(db, run_id="first", n_permutations=499)
    second = build_run(db, run_id="second", n_permutations=999)  # other tests, same arms
    loaded = loaded_after(["compare", first.run_id, second.run_id, "--db", str(db)])
    assert set(loaded) <= {"scipy.stats"}  # the statistics, never Prefect, torch or litellm


PARSE_ONLY = [
    ["--help"],
    *([name, "--help"] for name in ("validate", "plan", "run", "runs", "results", "compare")),
    *([name, "--help"] for name in ("export", "copy", "report", "view", "serve", "drift")),
    ["monitor", "reset", "--help"],
    ["run"],  # a missing argument
    ["run", "audit.yaml", "--runer", "dask"],  # a mistyped option
    ["results", "latest", "--format"],  # an option without its value
    ["view", "--port", "http"],  # a value of the wrong type
    ["runz"],  # no such command
]
"""Command lines that end while they are parsed: help, and each kind of argument error."""
NEVER_AT_PARSE = (
    *("numpy", "pandas", "pyarrow", "scipy", "duckdb", "yaml", "jinja2", "matplotlib"),
    *("prefect", "sqlalchemy", "httpx", "anyio", "asyncio", "ssl", "litellm", "openai"),
    *("torch", "sentence_transformers", "transformers", "storage", "flows", "tasks"),
)
"""Top-level packages the command line must not load before a command runs."""


def test_help_and_argument_errors_load_the_command_line_alone():
    script = textwrap.dedent(
        f"""
        import json, sys
        from typer.testing import CliRunner
        from dbpa.cli import app
        found = []
        for args in {PARSE_ONLY!r}:
            code = CliRunner().invoke(app, args).exit_code
            dbpa = [m for m in sys.modules if m.split(".")[0] == "dbpa"]
            heavy = [m for m in {NEVER_AT_PARSE!r} if m in sys.modules]
            found.append([args, code, dbpa, heavy])
        print(json.dumps(found))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for args, code, dbpa, heavy in json.loads(done.stdout):
        assert code == (0 if "--help" in args else 2), args
        # dbpa's lazy __init__, the environment's defaults and the CLI's own modules only
        others = [m for m in dbpa if m not in ("dbpa", "dbpa.environment", "dbpa.cli")]
        assert [m for m in others if not m.startswith("dbpa.cli.")] == [], args
        assert heavy == [], args
