"""``dbpa report``: any report regenerated from the record, without Prefect or a model."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dbpa.cli import app


@pytest.fixture
def cli():
    return CliRunner()


def test_default_is_html_in_reports_next_to_the_database(cli, labelled_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli.invoke(app, ["report", "latest", "--db", str(labelled_run.db)])
    assert result.exit_code == 0, result.output
    path = Path(labelled_run.db).parent / "reports" / f"{labelled_run.run_id}.html"
    assert path.name in result.output
    assert not (tmp_path / "reports").exists()  # not the working directory
    page = path.read_text()
    assert page.startswith("<!doctype html>")
    assert labelled_run.run_id in page


def test_markdown_and_json_to_a_file_or_a_directory(cli, unlabelled_run, tmp_path):
    md = tmp_path / "out" / "report.md"
    result = cli.invoke(
        app,
        [
            "report",
            unlabelled_run.run_id,
            "--db",
            str(unlabelled_run.db),
            "--format",
            "md",
            "--out",
            str(md),
        ],
    )
    assert result.exit_code == 0, result.output
    assert md.read_text().startswith("# dbpa audit: alignment")
    result = cli.invoke(
        app,
        [
            "report",
            "latest",
            "--db",
            str(unlabelled_run.db),
            "--format",
            "json",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / f"{unlabelled_run.run_id}.json").read_text())
    assert report["run"]["run_id"] == unlabelled_run.run_id


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "pdf"], "--format: unknown 'pdf'"),
        (["--db", "missing.duckdb"], "does not exist"),
    ],
)
def test_bad_input_exits_2_with_the_reason(cli, labelled_run, tmp_path, args, message):
    base = ["report", "latest", "--db", str(labelled_run.db), "--out", str(tmp_path / "r.html")]
    result = cli.invoke(app, [*base, *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_an_unknown_run_exits_2(cli, labelled_run, tmp_path):
    result = cli.invoke(app, ["report", "nope", "--db", str(labelled_run.db)])
    assert result.exit_code == 2
    assert "run 'nope' is not in" in " ".join(result.output.split())


def test_regenerating_imports_neither_prefect_nor_a_model_client(labelled_run, tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        from typer.testing import CliRunner
        from dbpa.cli import app
        result = CliRunner().invoke(
            app, ["report", "latest", "--db", {str(labelled_run.db)!r}, "--out", {str(tmp_path)!r}]
        )
        assert result.exit_code == 0, result.output
        print(sorted(m for m in ("prefect", "litellm", "torch") if m in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
