"""storage: the audit record (schema, migrations, idempotent reads and writes) in a DuckDB
file or a shared PostgreSQL database (``postgresql://USER@HOST:PORT/DBNAME``, ``check_url``).

The only package that speaks SQL, always parameterized. Many processes write a PostgreSQL
record at once, each reader reading a snapshot of its own; one process writes a database
file at a time; the audit flow's process owns it and its tasks share it through
``register``/``get``. While it writes, it answers other processes' reads of the record
(``open_reader`` returns a ``RemoteRecord`` then), and a file is read in full and found
sound before anything is written to it (``DamagedRecordError`` otherwise, the file
untouched; ``salvage`` exports what can still be read).

``Store`` is one class over one connection, assembled from a module per record:
``_core`` (connection, lock, transactions, migrations, schema version), ``_samples``
(arms, samples, embeddings), ``_tests`` (permutation tests and their effect intervals),
``_runs`` (runs, run families, arm failures, corrections, sequential looks, results, usage;
their SQL in ``_results``), ``_drift`` (epochs and drift tests), ``_monitor`` (the drift
monitor's evidence per tick and its resets) and ``_export`` (tables to
Parquet or CSV). ``_schema`` holds the migrations (``_layout`` reads back the tables they
build, for the docs); ``_open`` the checks of a file before
it is used; ``_serve``, ``_wire``, ``_sidecar``, ``_reader`` and ``_remote`` the reads
served by a writer; ``_salvage`` the export of a damaged file.
"""

from ._core import locate
from ._errors import (
    DamagedRecordError,
    DatabaseInUseError,
    RecordUnreachableError,
    UnknownRunError,
)
from ._export import EXPORTS, export_sql
from ._layout import Column, Layout, record_layout
from ._open import Turn, lock_path, ready_to_write
from ._postgres import CONNECT_TIMEOUT_S, check_url, is_postgres_url
from ._reader import RecordReader
from ._registry import get, register, unregister
from ._remote import RemoteRecord, open_reader
from ._salvage import Salvage, SalvagedTable, salvage
from ._schema import MIGRATIONS
from ._sidecar import sidecar_path
from ._store import Store

__all__ = [
    "CONNECT_TIMEOUT_S",
    "EXPORTS",
    "MIGRATIONS",
    "Column",
    "DamagedRecordError",
    "DatabaseInUseError",
    "Layout",
    "RecordReader",
    "RecordUnreachableError",
    "RemoteRecord",
    "Salvage",
    "SalvagedTable",
    "Store",
    "Turn",
    "UnknownRunError",
    "check_url",
    "export_sql",
    "get",
    "is_postgres_url",
    "locate",
    "lock_path",
    "open_reader",
    "ready_to_write",
    "record_layout",
    "register",
    "salvage",
    "sidecar_path",
    "unregister",
]
