"""The tutorials run as written: every ``dbpa`` command of their shell blocks, in order, on
the files they show, with the model and the embedder swapped for the scripted provider (the
embedded model's run is what ``tests/examples`` covers). ``dbpa view``, which serves until
Ctrl-C, is the one command left out."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dbpa.cli import app
from tests.docs.test_docs import DOCS, _titled_blocks
from tests.pipeline.conftest import KEY_ENV, make_config, provider  # noqa: F401 (fixture)
from tests.support.scripted_server import ScriptedServer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

TUTORIALS = ["first-audit", "prompt-set"]
"""The tutorials that run offline in one process (scheduling needs a Prefect server and a
worker: ``tests/deploy`` drives those)."""
SERVING = {"view"}
"""Commands that run until Ctrl-C."""


def _blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), re.S | re.M)


def _commands(page: Path) -> list[tuple[list[str], str | None]]:
    """The ``dbpa`` command lines of the page's bash blocks, in order, comments dropped, each
    with the file its output is redirected to (``> FILE``), if any."""
    lines = [line.split("#", 1)[0].strip() for b in _blocks(page, "bash") for line in b.split("\n")]
    commands = []
    for line in lines:
        if line.startswith("dbpa "):
            command, _, redirect = line.partition(" > ")
            commands.append((shlex.split(command)[1:], redirect.strip() or None))
    return commands


def _run_commands(page: Path, cwd: Path, gates: bool = False) -> None:
    """Every ``dbpa`` command of the page, in order, each exiting 0 (or, with ``gates``, the
    code of a gate it names: 3 for ``--fail-on-control-rejection``, 4 for
    ``--require-equivalent``)."""
    runner = CliRunner()
    for args, redirect in _commands(page):
        if args[0] in SERVING:
            continue
        result = runner.invoke(app, args, catch_exceptions=False)
        allowed = {0}
        if gates:
            allowed |= {3} if "--fail-on-control-rejection" in args else set()
            allowed |= {4} if "--require-equivalent" in args else set()
        assert result.exit_code in allowed, (page.name, args, result.output)
        if redirect:
            (cwd / redirect).write_text(result.stdout)


def _write_files(page: Path, provider: ScriptedServer, cwd: Path) -> None:  # noqa: F811
    """The page's files in ``cwd``, each config's model and embedder the scripted provider."""
    scripted = make_config(provider)
    for file, text in _titled_blocks(page).items():
        if file.endswith(".yaml"):
            raw = yaml.safe_load(text)
            params = raw["models"][0].get("params", {})
            raw["models"] = [{**scripted["models"][0], "params": params}]
            raw["embedder"] = scripted["embedder"]
            text = yaml.safe_dump(raw)
        (cwd / file).write_text(text)


@pytest.mark.parametrize("name", TUTORIALS)
def test_a_tutorial_runs_as_written(name, provider, tmp_path, monkeypatch):  # noqa: F811
    page = DOCS / "tutorials" / f"{name}.md"
    monkeypatch.setenv(KEY_ENV, "sk-pipeline-test")
    monkeypatch.chdir(tmp_path)
    _write_files(page, provider, tmp_path)
    assert [args[0] for args, _ in _commands(page)[:2]] == ["validate", "run"]
    _run_commands(page, tmp_path)
    assert provider.counts.total > 0
    assert list((tmp_path / "reports").glob("*.html"))
    if name == "first-audit":  # then read it as "SQL and pandas on the record" shows
        guide = DOCS / "how-to" / "record-sql.md"
        _run_commands(guide, tmp_path)
        namespace: dict[str, object] = {}
        for block in _blocks(guide, "python"):
            exec(block, namespace)  # the guide's own code, on the tutorial's record
        assert len(namespace["tests"]) == 2  # type: ignore[arg-type]
        assert "results.csv" in {p.name for p in tmp_path.iterdir()}


GUIDES = {
    "ci-gate": [],
    "equivalence": [],
    "planning": ["tutorials/first-audit.md"],
}
"""The how-to guides that run offline, and the pages whose files they use."""


@pytest.mark.parametrize("name", GUIDES)
def test_a_guide_runs_as_written(name, provider, tmp_path, monkeypatch):  # noqa: F811
    page = DOCS / "how-to" / f"{name}.md"
    monkeypatch.setenv(KEY_ENV, "sk-pipeline-test")
    monkeypatch.chdir(tmp_path)
    for other in GUIDES[name]:
        _write_files(DOCS / other, provider, tmp_path)
    _write_files(page, provider, tmp_path)
    assert _commands(page)
    _run_commands(page, tmp_path, gates=True)
