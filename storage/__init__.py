"""storage: the DuckDB audit record (schema, migrations, idempotent reads and writes).

The only package that speaks SQL. One process writes a database file at a time; the
audit flow's process owns it and its tasks share it through ``register``/``get``.
"""

from ._registry import get, register, unregister
from ._schema import MIGRATIONS
from ._store import EXPORTS, DatabaseInUseError, Store, UnknownRunError

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
