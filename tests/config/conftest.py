"""A small valid config, and ``dbpa validate`` driven in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

BASE: dict[str, Any] = {
    "name": "inputs",
    "models": [{"model": "openai/gpt-4o-mini", "params": {"temperature": 0.7}}],
    "prompt": "Should a 70-year-old smoker take a statin?",
    "perturbations": [
        {"kind": "personas", "values": ["doctor", "comedian"]},
        {"kind": "prompt", "variants": ["Is a statin advisable for a smoker of 70?"]},
    ],
    "k": 12,
}
"""Valid, offline (the packaged embedder), no network call to validate."""

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))

Validate = Callable[..., Result]


def flat(result: Result) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


@pytest.fixture
def base_file(tmp_path: Path) -> Path:
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(BASE, sort_keys=False))
    return path


@pytest.fixture
def validate(monkeypatch: pytest.MonkeyPatch) -> Validate:
    """``dbpa validate ARGS`` on a wide console (no message wrapped mid-word); fails the test
    on an exception other than an exit."""
    from dbpa import cli

    for console in (cli.out, cli.err):
        monkeypatch.setattr(console, "width", 200)
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        result = runner.invoke(cli.app, ["validate", *map(str, args)])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"validate {args}: {result.exception!r}") from result.exception
        assert "Traceback" not in result.output
        return result

    return invoke
