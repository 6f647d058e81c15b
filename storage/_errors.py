"""The errors of the record that callers handle."""

from __future__ import annotations


class DatabaseInUseError(RuntimeError):
    """Another process holds the database (DuckDB allows one writer per file)."""

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid
        """The holding process, when DuckDB names it."""


class DamagedRecordError(RuntimeError):
    """The database file cannot be used and was left as it is: damaged, not a DuckDB or dbpa
    record, or written by a newer dbpa. The message names the file, what DuckDB reported
    and what to do."""


class UnknownRunError(LookupError):
    """No run with that id in the database."""


class RecordUnreachableError(ConnectionError):
    """The server of a shared record cannot be reached, or dropped the connection (restarted,
    stopped). The message names host and port, never the credentials."""
