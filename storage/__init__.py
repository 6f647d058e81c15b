"""storage: the DuckDB audit record (schema, migrations, idempotent reads and writes).

The only package that speaks SQL, always parameterized. One process writes a database
file at a time; the audit flow's process owns it and its tasks share it through
``register``/``get``.

``Store`` is one class over one connection, assembled from a module per record:
``_core`` (connection, lock, transactions, migrations, schema version, errors),
``_samples`` (arms, samples, embeddings), ``_analysis`` (tests, runs, run families,
arm failures, corrections, results, usage), ``_drift`` (epochs and drift tests) and
``_export`` (tables to Parquet or CSV). ``_schema`` holds the migrations.
"""

from ._core import DatabaseInUseError, UnknownRunError
from ._export import EXPORTS
from ._registry import get, register, unregister
from ._schema import MIGRATIONS
from ._store import Store

__all__ = [
    "EXPORTS",
    "MIGRATIONS",
    "DatabaseInUseError",
    "Store",
    "UnknownRunError",
    "get",
    "register",
    "unregister",
]
