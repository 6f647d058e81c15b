"""Reading a record that another process is writing, through that process (see ``_serve``).

``open_reader`` opens the file read-only when it can; when a live dbpa writer holds it,
it returns a ``RemoteRecord``: the same read methods, answered by the writer on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self, cast

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from ._errors import DatabaseInUseError
from ._export import check_export, write_table
from ._postgres import is_postgres_url
from ._reader import RecordReader
from ._sidecar import Writer, live_writer
from ._store import Store
from ._wire import ARROW, ERRORS, JSON, READS, decode, frame_row

__all__ = ["RemoteRecord", "open_reader"]

TIMEOUT_S = 600.0
"""Seconds a read may take (the writer answers between its own writes)."""


def open_reader(path: str | Path) -> RecordReader:
    """The record at ``path`` for reading: the file itself, or, while a dbpa process writes
    it, that process's answers. ``DatabaseInUseError`` when another kind of process holds
    it; ``FileNotFoundError`` and ``DamagedRecordError`` as for ``Store``. A PostgreSQL
    record (a URL) is read directly, in a snapshot of its own, whoever writes it."""
    if is_postgres_url(path):
        return Store(path, read_only=True)
    db = Path(path).expanduser().resolve()
    try:
        return Store(db, read_only=True)
    except DatabaseInUseError as error:
        writer = live_writer(db)
        if writer is None or (error.pid is not None and writer.pid != error.pid):
            raise
    return RemoteRecord(db, writer)


class RemoteRecord:
    """A record read through the process that writes it (read methods only)."""

    read_only = True

    def __init__(self, path: Path, writer: Writer, timeout_s: float = TIMEOUT_S) -> None:
        self.path = path
        self._writer = writer
        self._timeout_s = timeout_s
        info = self._call("info")
        self.database_id: str = info["database_id"]
        self._schema_version: int = info["schema_version"]

    @property
    def writer_pid(self) -> int:
        """The process writing the record (and answering these reads)."""
        return self._writer.pid

    @property
    def schema_version(self) -> int:
        """Highest applied migration."""
        return self._schema_version

    def close(self) -> None:
        """Nothing to release: every read is one request."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------- the reads

    def runs(self) -> pd.DataFrame:
        """Every run, newest first, with the progress of the running ones."""
        return self._call("runs")

    def run(self, run_id: str) -> dict[str, Any]:
        """One run's row (``latest`` accepted); ``UnknownRunError`` when absent."""
        return frame_row(self._call("run", run_id=run_id))

    def results(self, run_id: str) -> pd.DataFrame:
        """Per-perturbation results of a run, in family order."""
        return self._call("results", run_id=run_id)

    def prompt_results(self, run_id: str) -> pd.DataFrame:
        """Per perturbation and prompt of a run over a set of prompts (empty otherwise)."""
        return self._call("prompt_results", run_id=run_id)

    def arm_failures(self, run_id: str) -> pd.DataFrame:
        """Arms that failed in a run, with the reason."""
        return self._call("arm_failures", run_id=run_id)

    def tests(self, test_ids: Sequence[str], *, nulls: bool = True) -> pd.DataFrame:
        """Stored test rows, with their null distributions unless ``nulls`` is False."""
        return self._call("tests", test_ids=list(test_ids), nulls=nulls)

    def interval_replicates(self, test_ids: Sequence[str]) -> pd.DataFrame:
        """The bootstrap replicates behind the stored effect intervals of these tests."""
        return self._call("interval_replicates", test_ids=list(test_ids))

    def arms(self, arm_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """Stored arms (the given ones, or all)."""
        ids = None if arm_ids is None else list(arm_ids)
        return self._call("arms", arm_ids=ids)

    def samples(
        self, arm_ids: Sequence[str] | None = None, *, first: int | None = None
    ) -> pd.DataFrame:
        """Stored outputs (of the given arms, or all; with ``first``, those of index below it)."""
        ids = None if arm_ids is None else list(arm_ids)
        return self._call("samples", arm_ids=ids, first=first)

    def usage(self, arm_ids: Sequence[str]) -> pd.DataFrame:
        """Outputs, tokens and cost per arm."""
        return self._call("usage", arm_ids=list(arm_ids))

    def arms_vectors(
        self, arm_ids: Sequence[str], embedder: str, k: int
    ) -> dict[str, NDArray[np.float32]]:
        """(k, d) vectors per arm, for every arm whose first k outputs are embedded."""
        found = self._call("arms_vectors", arm_ids=list(arm_ids), embedder=embedder, k=k)
        return cast(dict[str, NDArray[np.float32]], found)

    def audit_epochs(self, audit: str) -> pd.DataFrame:
        """The epochs of ``audit`` that have a completed run, oldest first."""
        return self._call("audit_epochs", audit=audit)

    def drift(self, audit: str) -> pd.DataFrame:
        """The stored drift tests of ``audit`` with their statistics, in epoch order."""
        return self._call("drift", audit=audit)

    def monitor_ticks(self, audit: str) -> pd.DataFrame:
        """Every stored monitor state of ``audit``, by series, baseline and tick."""
        return self._call("monitor_ticks", audit=audit)

    def monitor_resets(self, audit: str) -> pd.DataFrame:
        """The resets of ``audit``'s monitor baselines, oldest first."""
        return self._call("monitor_resets", audit=audit)

    def table(self, name: str) -> pa.Table:
        """An exportable table (or ``results``) as Arrow."""
        return self._call("table", name=name)

    def export(self, table: str, path: str | Path, fmt: str = "parquet") -> Path:
        """Write a table (or ``results``) to Parquet or CSV; returns the file written."""
        check_export(table, fmt)
        return write_table(self.table(table), path, fmt)

    # ---------------------------------------------------------------------- the wire

    def _call(self, method: str, **args: Any) -> Any:
        read = READS[method]
        body = json.dumps(args).encode()
        con = http.client.HTTPConnection("127.0.0.1", self._writer.port, timeout=self._timeout_s)
        try:
            con.request(
                "POST",
                f"/read/{method}",
                body=body,
                headers={
                    "Authorization": f"Bearer {self._writer.token}",
                    "Content-Type": "application/json",
                },
            )
            response = con.getresponse()
            status, kind = response.status, response.getheader("Content-Type")
            payload = response.read()
        except OSError as exc:
            reason = f"{type(exc).__name__}: {exc}"
        else:
            reason = ""
        finally:
            con.close()
        if reason:
            raise DatabaseInUseError(
                f"database {self.path} is being written by process {self._writer.pid}, which "
                f"did not answer the read ({reason}); try again, or wait for its run to finish",
                pid=self._writer.pid,
            )
        if status != 200:
            raise self._error(method, payload)
        if kind != (JSON if read.result == "json" else ARROW):
            raise RuntimeError(f"process {self._writer.pid} answered {method} with {kind}")
        return decode(read.result, payload)

    def _error(self, method: str, payload: bytes) -> Exception:
        try:
            found = json.loads(payload)
            kind, message = str(found["error"]), str(found["message"])
        except (ValueError, KeyError, TypeError):
            kind, message = "", payload[:200].decode(errors="replace")
        if kind in ERRORS:
            return ERRORS[kind](message)
        return RuntimeError(
            f"process {self._writer.pid}, which writes {self.path}, could not answer {method}: "
            f"{kind}: {message}"
        )
