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

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

TUTORIALS = ["first-audit", "prompt-set"]
"""The tutorials that run offline in one process (scheduling needs a Prefect server and a
worker: ``tests/deploy`` drives those)."""
SERVING = {"view"}
"""Commands that run until Ctrl-C."""


def _commands(page: Path) -> list[list[str]]:
    """The ``dbpa`` command lines of the page's bash blocks, in order, comments dropped."""
    blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(), re.S | re.M)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("dbpa ")]


@pytest.mark.parametrize("name", TUTORIALS)
def test_a_tutorial_runs_as_written(name, provider, tmp_path, monkeypatch):  # noqa: F811
    page = DOCS / "tutorials" / f"{name}.md"
    monkeypatch.setenv(KEY_ENV, "sk-pipeline-test")
    monkeypatch.chdir(tmp_path)
    scripted = make_config(provider)
    for file, text in _titled_blocks(page).items():
        if file.endswith(".yaml"):
            raw = yaml.safe_load(text)
            params = raw["models"][0].get("params", {})
            raw["models"] = [{**scripted["models"][0], "params": params}]
            raw["embedder"] = scripted["embedder"]
            text = yaml.safe_dump(raw)
        (tmp_path / file).write_text(text)
    commands = _commands(page)
    assert [c[0] for c in commands[:2]] == ["validate", "run"]
    runner = CliRunner()
    for args in commands:
        if args[0] in SERVING:
            continue
        result = runner.invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
    assert provider.counts.total > 0
    assert list((tmp_path / "reports").glob("*.html"))
