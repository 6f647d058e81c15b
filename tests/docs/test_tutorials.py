"""The tutorials and the how-to guides run as written: every ``dbpa`` command of their shell
blocks, in order, on the files they show, with the model and the embedder swapped for the
scripted provider (the embedded model's run is what ``tests/examples`` covers) and the run
ids a guide leaves to the reader filled in (``PLACEHOLDERS``). ``dbpa view``, which serves
until Ctrl-C, is the one command left out."""

from __future__ import annotations

import re
import shlex
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dbpa.cli import app
from storage import Store
from tests.docs.test_docs import DOCS, _titled_blocks
from tests.pipeline.conftest import KEY_ENV, make_config, provider  # noqa: F401 (fixture)
from tests.storage.conftest import DAMAGES, small_record
from tests.support.scripted_server import ScriptedServer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

TUTORIALS = ["first-audit", "prompt-set"]
"""The tutorials that run offline in one process (scheduling needs a Prefect server: it runs
as written on the session's in ``tests/deploy/test_tutorial_scheduling.py``)."""
SERVING = {"view"}
"""Commands that run until Ctrl-C."""


def _blocks(page: Path, language: str) -> list[str]:
    """The page's ``language`` blocks, those indented in a list item dedented."""
    found = re.findall(rf"^( *)```{language}\n(.*?)^\1```", page.read_text(), re.S | re.M)
    return [textwrap.dedent(block) for _, block in found]


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


PLACEHOLDERS = {"RUN_A": 1, "RUN_B": 0}
"""Run ids a guide leaves to the reader ("two ids from `dbpa runs`"), filled in when the
command runs: the second newest and the newest run of ``dbpa.duckdb``."""
GATES = {"--fail-on-control-rejection": 3, "--require-equivalent": 4, "--salvage": 2}
"""Options whose command may exit with a code the guides name: a gate failing, or a salvage
that could not read every part."""


def _filled(args: list[str], cwd: Path) -> list[str]:
    """``args`` with each of ``PLACEHOLDERS`` replaced by the run id it stands for."""
    if not set(args) & set(PLACEHOLDERS):
        return args
    with Store(cwd / "dbpa.duckdb", read_only=True) as store:
        ids = list(store.runs().run_id)
    return [ids[PLACEHOLDERS[a]] if a in PLACEHOLDERS else a for a in args]


def _run_commands(page: Path, cwd: Path, gates: bool = False) -> None:
    """Every ``dbpa`` command of the page, in order, placeholders filled, each exiting 0
    (or, with ``gates``, the code of one of ``GATES`` it names)."""
    runner = CliRunner()
    for args, redirect in _commands(page):
        if args[0] in SERVING:
            continue
        args = _filled(args, cwd)
        result = runner.invoke(app, args, catch_exceptions=False)
        allowed = {0}
        if gates:
            allowed |= {code for option, code in GATES.items() if option in args}
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


def _damaged_record(cwd: Path) -> None:
    """The record "Recover a damaged record" starts from: a small real one, with garbage in
    the middle of its outputs' texts."""
    DAMAGES["garbage-in-the-middle"](small_record(cwd / "damaged.duckdb"))


GUIDES = {
    "ci-gate": [],
    "equivalence": [],
    "planning": ["tutorials/first-audit.md"],
    "compare": ["tutorials/first-audit.md"],
    "sequential": [],
    "recover": [],
    "providers": [],
}
"""The how-to guides that run offline, and the pages whose files they use (``providers``
runs with its five hosted models swapped for the scripted one, as every page's are). Not
here: ``cost`` (no command: its config is checked by ``tests/docs/test_docs.py``),
``dask`` (its second command needs a cluster's address: ``tests/deploy/test_dask.py``
runs the guide on the one-worker cluster of its module),
``record-sql`` (run on the first tutorial's record above), ``library`` (Python on the
reader's own arrays), and ``shared-record`` and ``copy-record`` (on a PostgreSQL server:
below)."""
GIVEN = {"recover": _damaged_record}
"""What a guide assumes the reader already has, made here."""
RESULTS = {
    "compare": "compare.html",
    "recover": "salvaged/runs.parquet",
}
"""A file that a guide's commands write, as a check that they did their work."""


@pytest.mark.parametrize("name", GUIDES)
def test_a_guide_runs_as_written(name, provider, tmp_path, monkeypatch):  # noqa: F811
    page = DOCS / "how-to" / f"{name}.md"
    monkeypatch.setenv(KEY_ENV, "sk-pipeline-test")
    monkeypatch.chdir(tmp_path)
    for other in GUIDES[name]:
        _write_files(DOCS / other, provider, tmp_path)
    _write_files(page, provider, tmp_path)
    if name in GIVEN:
        GIVEN[name](tmp_path)
    assert _commands(page)
    _run_commands(page, tmp_path, gates=True)
    if name in RESULTS:
        assert (tmp_path / RESULTS[name]).is_file()


SHARED = ["shared-record", "copy-record"]
"""The guides whose commands name a PostgreSQL record: run in this order on one database of
the test's server, whose URL stands for each URL they show (the first runs an example of
the repository, the second copies a file record into the same database)."""


def test_the_shared_record_guides_run_as_written(provider, postgres, tmp_path, monkeypatch):  # noqa: F811
    url = f"postgresql://{postgres.user}@{postgres.host}:{postgres.port}/"
    url += postgres.create_database()
    monkeypatch.setenv(KEY_ENV, "sk-pipeline-test")
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    monkeypatch.setenv("DBPA_DB", url)
    monkeypatch.chdir(tmp_path)
    example = yaml.safe_load((DOCS.parent / "examples" / "personas.yaml").read_text())
    scripted = make_config(provider)
    example["models"] = [{**scripted["models"][0], "params": example["models"][0]["params"]}]
    example["embedder"] = scripted["embedder"]
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "personas.yaml").write_text(yaml.safe_dump(example))
    small_record(tmp_path / "dbpa.duckdb")
    runner = CliRunner()
    for page in SHARED:
        commands = _commands(DOCS / "how-to" / f"{page}.md")
        assert commands, page
        for args, _ in commands:
            args = [url if a.startswith("postgresql://") else a for a in args]
            result = runner.invoke(app, args, catch_exceptions=False)
            assert result.exit_code == 0, (page, args, result.output)
    assert provider.counts.total > 0
    assert (tmp_path / "personas.html").is_file()
    with Store(url, read_only=True) as store:
        assert len(store.runs()) == 2  # the example's run, and the file's copied in
