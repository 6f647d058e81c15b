"""Export of the record: every table, and the ``results`` view, to Parquet or CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pa_parquet

from ._core import StoreCore
from ._results import results_sql

EXPORTS: dict[str, str] = {
    "runs": "SELECT * FROM runs ORDER BY started_at",
    "arms": "SELECT * FROM arms ORDER BY created_at, arm_id",
    "samples": "SELECT * FROM samples ORDER BY arm_id, idx",
    "embeddings": "SELECT * FROM embeddings ORDER BY embedder, text_hash",
    "tests": "SELECT * FROM tests ORDER BY created_at, test_id",
    "run_tests": "SELECT * FROM run_tests ORDER BY run_id, family, position",
    "corrections": "SELECT * FROM corrections ORDER BY run_id, family, perturbation_id",
    "arm_failures": "SELECT * FROM arm_failures ORDER BY run_id, arm_id",
    "results": "{results} ORDER BY rt.run_id, rt.family, rt.position",
}
"""Exportable tables (and the ``results`` view), each a fixed query (see ``export_sql``)."""
FORMATS = ("parquet", "csv")


class ExportRecord(StoreCore):
    """Tables written out as files."""

    def table(self, name: str) -> pa.Table:
        """An exportable table (or ``results``) as Arrow."""
        _check_table(name)
        return self._arrow(export_sql(name, self.schema_version))

    def export(self, table: str, path: str | Path, fmt: str = "parquet") -> Path:
        """Write a table (or ``results``) to Parquet or CSV; returns the file written."""
        check_export(table, fmt)
        return write_table(self.table(table), path, fmt)


def export_sql(name: str, schema_version: int) -> str:
    """The query of an exportable table; ``results`` as the record's schema version has it."""
    return EXPORTS[name].replace("{results}", results_sql(schema_version))


def check_export(table: str, fmt: str) -> None:
    """``ValueError`` naming an unknown table or format."""
    _check_table(table)
    _check_format(fmt)


def _check_table(name: str) -> None:
    if name not in EXPORTS:
        raise ValueError(f"table: unknown {name!r}; choose one of {', '.join(EXPORTS)}")


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"format: unknown {fmt!r}; choose parquet or csv")


def write_table(data: pa.Table, path: str | Path, fmt: str) -> Path:
    """Write ``data`` to Parquet or CSV (list columns as JSON text); returns the file."""
    _check_format(fmt)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        pa_parquet.write_table(data, out)
    else:
        pa_csv.write_csv(_flatten_lists(data), out)
    return out


def _flatten_lists(table: pa.Table) -> pa.Table:
    """CSV has no lists: write list columns (vectors, null distributions) as JSON text."""
    columns = []
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            col = pa.array(
                [None if v is None else json.dumps(v) for v in col.to_pylist()], pa.string()
            )
        columns.append(col)
    return pa.table(columns, names=table.column_names)
