"""The audit record in one DuckDB file: every record over one connection.

DuckDB allows one writing process per file. A ``Store`` owns the connection of its
process; threads share it under a lock, every write is one transaction and is
idempotent (primary keys + ``ON CONFLICT DO NOTHING``), so a retried or resumed
write never duplicates a row.
"""

from __future__ import annotations

from ._analysis import AnalysisRecord
from ._drift import DriftRecord
from ._export import ExportRecord
from ._samples import SampleRecord


class Store(SampleRecord, AnalysisRecord, DriftRecord, ExportRecord):
    """An open audit database; use as a context manager or call ``close()``.

    The sample record (arms, samples, embeddings), the analysis record (tests, runs,
    families, arm failures, corrections, results, usage), drift and export, over the one
    connection of ``StoreCore``.
    """
