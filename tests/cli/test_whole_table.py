"""``whole_table``: a table only where every cell fits whole on its line."""

from __future__ import annotations

import pytest
from rich.console import Console

from dbpa.cli import _common

COLUMNS = [("perturbation", True, "left"), ("label", False, "left"), ("decision", False, "left")]
ROWS = [["persona-medical-practitioner", "control", "changed"], ["persona-child", "target", ""]]
WIDEST = len("persona-medical-practitioner  control  decision ")
"""Each column's widest cell, one space of padding after it and one divider between."""


@pytest.mark.parametrize("width", [WIDEST, WIDEST + 5])
def test_a_table_that_fits_shows_every_cell_whole(monkeypatch, width):
    console = Console(width=width, record=True)
    monkeypatch.setattr(_common, "out", console)
    table = _common.whole_table(COLUMNS, ROWS)
    assert table is not None
    console.print(table)
    lines = console.export_text().splitlines()
    assert len(lines) == 2 + len(ROWS)  # header, rule, one line per row: nothing wrapped
    assert all(cell in text for row, text in zip(ROWS, lines[2:], strict=True) for cell in row)


def test_one_column_too_narrow_gives_no_table(monkeypatch):
    monkeypatch.setattr(_common, "out", Console(width=WIDEST - 1))
    assert _common.whole_table(COLUMNS, ROWS) is None
