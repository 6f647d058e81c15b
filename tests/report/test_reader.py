"""The store is a report reader: the report reads the record through ``ReportReader`` only."""

from __future__ import annotations

from pathlib import Path

from dbpa.report import ReportReader
from storage import Store


def test_the_store_is_a_report_reader(tmp_path: Path) -> None:
    with Store(tmp_path / "audit.duckdb") as store:
        reader: ReportReader = store  # mypy checks the signatures
        assert isinstance(reader, ReportReader)
        assert not isinstance(object(), ReportReader)
