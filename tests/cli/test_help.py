"""``dbpa --help`` and every command's ``--help`` read as text: no RST markup, each paragraph
of a docstring and each option's help on one line of a wide terminal (never broken where
the source's line ends), every line within 200 characters on a standard one and nothing cut
there (Rich ends a cell too narrow for a word or a flag with an ellipsis)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import typer

from dbpa.cli import app
from tests.cli.conftest import runner

ROOT = typer.main.get_command(app)


def _is_group(command: Any) -> bool:
    return hasattr(command, "commands")  # Typer's own click, not the click package


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*path, name))
        if _is_group(command):
            found += _commands(command, (*path, name))
    return found


COMMANDS = _commands(ROOT)


def _command(path: tuple[str, ...]) -> Any:
    command = ROOT
    for name in path:
        command = command.commands[name]
    return command


def _help(path: tuple[str, ...], columns: int) -> list[str]:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return [line.strip(" │") for line in result.output.splitlines()]


def _read(text: str) -> str:
    """A docstring's paragraph as a reader should see it: on one line, no backticks."""
    return " ".join(text.split()).replace("``", "")


def test_every_command_is_checked():
    assert {"validate", "run", "results", "drift", "monitor", "reset"} <= {
        name for path in COMMANDS for name in path
    }


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_shows_every_paragraph_and_option_whole_without_markup(path):
    command = _command(path)
    wide = _help(path, 1000)
    shown = "\n".join(wide)
    assert "``" not in shown
    if not _is_group(command):  # a group's help is its own string
        doc = inspect.cleandoc(command.callback.__doc__ or "")
        for paragraph in doc.split("\n\n"):
            assert any(_read(paragraph) in line for line in wide), paragraph
    for param in command.params:
        if getattr(param, "help", None):
            assert any(_read(param.help) in line for line in wide), param.help


@pytest.mark.parametrize("path", [(), *COMMANDS], ids=lambda p: " ".join(p) or "dbpa")
def test_help_lines_fit_a_standard_terminal(path):
    lines = _help(path, 80)
    assert max(map(len, lines)) <= 200
    assert "``" not in "\n".join(lines)
    assert "\u2026" not in "\n".join(lines)  # Rich cut no option's name nor a word of help


def test_the_command_list_shows_each_summary_whole():
    wide = _help((), 1000)
    for path in COMMANDS:
        command = _command(path)
        if len(path) == 1 and not _is_group(command):
            summary = _read(inspect.cleandoc(command.callback.__doc__ or "").split("\n\n")[0])
            assert any(line.startswith(path[0]) and summary in line for line in wide), summary
