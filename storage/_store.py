"""The audit record in one DuckDB file, or a PostgreSQL database: every record over one
connection.

DuckDB allows one writing process per file (PostgreSQL many, each over its own
connection). A ``Store`` owns the connection of its process; threads share it under a
lock, every write is one transaction (on PostgreSQL run again when it loses to another
writer) and is idempotent (primary keys + ``ON CONFLICT DO NOTHING``), so a retried or resumed
write never duplicates a row.
"""

from __future__ import annotations

from pathlib import Path

from ._batches import BatchRecord
from ._drift import DriftRecord
from ._export import ExportRecord
from ._monitor import MonitorRecord
from ._runs import RunRecord
from ._samples import SampleRecord
from ._serve import RecordServer
from ._sets import SetRecord
from ._tests import PermutationRecord


class Store(
    SampleRecord,
    PermutationRecord,
    RunRecord,
    SetRecord,
    DriftRecord,
    MonitorRecord,
    BatchRecord,
    ExportRecord,
):
    """An open audit database; use as a context manager or call ``close()``.

    The sample record (arms, samples, embeddings), the permutation tests with their effect
    intervals, the run record (runs, families, arm failures, corrections, sequential looks,
    results, usage), the prompt sets' pooled tests and drill-downs, drift, the drift monitor,
    the provider batches and export, over the one connection of ``StoreCore``.
    """

    def __init__(
        self, path: str | Path, *, read_only: bool = False, serve_readers: bool = True
    ) -> None:
        """Open the record at ``path``, a file or a PostgreSQL URL (see ``StoreCore``). A
        writer of a file serves reads of its record to other processes until it closes it,
        unless ``serve_readers`` is False (on PostgreSQL every reader connects itself)."""
        super().__init__(path, read_only=read_only)
        if read_only or not serve_readers or self.postgres:
            return
        try:
            self._server = RecordServer.start(self._view(), self.path)
        except BaseException:
            self.close()
            raise
