"""Opening a record's file: who holds it, whether it is sound, DuckDB's errors in our words.

A file is read before anything is written to it: the writer opens it read-only first,
reads every column of every table (DuckDB checks each block's checksum as it loads it),
checks that this dbpa knows its schema version, closes it and only then reopens it
read-write. A read-only open replays a leftover ``.wal`` in memory and leaves the file
and the ``.wal`` as they are. Readers are checked the same way, so every command refuses
a damaged file. Index blocks are not read by the check: DuckDB checks them when it first
uses them, in a write that then fails before it commits.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from ._errors import DamagedRecordError, DatabaseInUseError
from ._schema import MIGRATIONS
from ._sidecar import live_writer

CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
}
"""Opening a file never loads or downloads an extension (DuckDB would fetch the SQLite
scanner to open a SQLite file)."""
WRITER_GRACE_S = 10.0
"""How long a writer retries a file held by a process that is not a dbpa writer (a
reader's read-only open: readers are brief)."""
READER_GRACE_S = 2.0
"""How long a reader retries a file held read-write by a process that has not (yet)
advertised itself as a dbpa writer."""
_RETRY_S = 0.05
_LOCK = re.compile(r"Could not set lock on file")
_LOCK_PID = re.compile(r"\(PID (\d+)\)")
_SQLITE = b"SQLite format 3\x00"


def open_connection(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the record at ``path`` once it is found sound (see the module).

    ``DamagedRecordError`` for a damaged, foreign or newer file, ``DatabaseInUseError``
    when another process holds it, ``ValueError`` for a directory.
    """
    if path.is_dir():
        raise ValueError(f"database {path} is a directory; name a database file")
    if read_only or path.exists():
        con = connect(path, read_only=True)
        try:
            verify(con, path, dbpa_only=read_only)
        except BaseException:
            con.close()
            raise
        if read_only:
            return con
        con.close()
    return connect(path, read_only=False)


class Turn:
    """A run's turn at writing a record: an exclusive lock (``flock``) on ``<db>.lock``,
    held until ``release`` (or the process ends: the system drops the lock of a killed one).

    Runs take turns on this file rather than on DuckDB's own lock because a run opens and
    closes the record several times (reading what is left, sampling its head start, the
    flow): DuckDB's lock is free in between, and a run started at the same moment would
    find it free, then lose it to the first when it opens the record to write. The file
    holds the pid of the run whose turn it is, and is left in place (removing it would let
    a waiter lock a file that a newcomer no longer sees).
    """

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._close = os.close  # kept: a turn dropped at the interpreter's exit still closes

    def release(self) -> None:
        """End the turn (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            self._close(fd)

    def __enter__(self) -> Turn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()


def lock_path(db: Path) -> Path:
    """``<db>.lock``: the file on which runs take turns (see ``Turn``)."""
    return db.with_name(db.name + ".lock")


def ready_to_write(
    path: str | Path,
    *,
    wait: bool,
    on_wait: Callable[[int | None], None],
    poll_s: float = 1.0,
) -> Turn:
    """This process's turn at writing ``path``, once it is missing, or sound and held by no
    other process; writes nothing to it (the turn's lock file is created beside it).

    While another run has its turn, or another process holds the file:
    ``DatabaseInUseError`` at once unless ``wait``, else ``on_wait(pid)`` once and a new
    try every ``poll_s`` seconds. ``DamagedRecordError`` and ``ValueError`` as for
    ``open_connection``; the whole file is read, as a writer does. The caller releases the
    turn when its run has written its last (``Turn.release``, or ``with``).
    """
    path = Path(path).expanduser().resolve()
    if path.is_dir():
        raise ValueError(f"database {path} is a directory; name a database file")
    told: list[int | None] = []

    def waiting(pid: int | None) -> None:
        if not told:
            on_wait(pid)
            told.append(pid)
        time.sleep(poll_s)

    turn = _take_turn(path, wait=wait, waiting=waiting)
    try:
        while True:
            if path.is_dir():
                raise ValueError(f"database {path} is a directory; name a database file")
            if not path.exists():
                return turn
            try:
                con = connect(path, read_only=True)
            except DatabaseInUseError as error:
                if not wait:
                    raise
                waiting(error.pid)
                continue
            try:
                verify(con, path, dbpa_only=False)
            finally:
                con.close()
            return turn
    except BaseException:
        turn.release()
        raise


def _take_turn(path: Path, *, wait: bool, waiting: Callable[[int | None], None]) -> Turn:
    """Lock ``<path>.lock`` for this process (see ``Turn``), its pid written in it."""
    lock = lock_path(path)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ValueError(f"database {path}: cannot create {lock.name}: {exc.strerror}") from None
    turn = Turn(fd)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pid = _holder(fd)
                if not wait:
                    holder = f"process {pid}" if pid else "another process"
                    raise DatabaseInUseError(
                        f"database {path} is in use by another run ({holder}); wait for it "
                        "to finish or use another --db (one run writes a record at a time)",
                        pid=pid,
                    ) from None
                waiting(pid)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    except BaseException:
        turn.release()
        raise
    return turn


def _holder(fd: int) -> int | None:
    """The pid written in a turn's lock file (None before its holder has written it)."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def connect(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` with a held file retried for a moment and every error in our words."""
    if path.is_file():
        _check_magic(path)
    grace = READER_GRACE_S if read_only else WRITER_GRACE_S
    deadline = time.monotonic() + grace
    while True:
        error: Exception
        try:
            return duckdb.connect(str(path), read_only=read_only, config=CONFIG)
        except duckdb.Error as exc:
            error = translate(path, exc, opening=True)
        if not isinstance(error, DatabaseInUseError):
            raise error
        writer = live_writer(path)
        if (writer is not None and writer.pid == error.pid) or time.monotonic() > deadline:
            raise error
        time.sleep(_RETRY_S)


def verify(con: duckdb.DuckDBPyConnection, path: Path, *, dbpa_only: bool) -> None:
    """Read every column of every table and check the schema version.

    ``dbpa_only``: a DuckDB database without dbpa's tables is refused even when empty
    (a writer may start a record in an empty one).
    """
    tables: dict[str, list[str]] = {}
    version: int | None = None
    error: BaseException | None = None
    try:
        for table, column, data_type in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "ORDER BY table_name, column_index"
        ).fetchall():
            name = quote(column)
            reads = f"sum(len({name}))" if data_type.endswith("]") else f"min({name})"
            tables.setdefault(table, []).append(reads)
        for table, columns in tables.items():
            # Identifiers from the file's own catalog, quoted; no value is spliced in.
            con.execute(f"SELECT {', '.join(columns)} FROM {quote(table)}").fetchall()
        if "schema_migrations" in tables:
            (version,) = con.execute("SELECT max(version) FROM schema_migrations").fetchone() or (
                None,
            )
    except duckdb.Error as exc:
        error = KeyboardInterrupt() if is_interrupt(exc) else translate(path, exc, opening=False)
    except RuntimeError as exc:
        if not is_interrupt(exc):
            raise
        error = KeyboardInterrupt()
    if error is not None:
        raise error
    if "schema_migrations" not in tables and (tables or dbpa_only):
        raise damaged(
            path, "it is a DuckDB database without dbpa's tables", readable=False, by_duckdb=False
        )
    if version is not None and version > MIGRATIONS[-1][0]:
        raise newer_record(str(path), version)


def newer_record(where: str, version: int) -> DamagedRecordError:
    """The error of a record at ``where`` (a file, a database) written by a newer dbpa."""
    newest = MIGRATIONS[-1][0]
    return DamagedRecordError(
        f"database {where} was written by a newer dbpa (schema version {version}; this "
        f"dbpa knows versions up to {newest}). Nothing was written to it: upgrade dbpa "
        "to use it, or start a new record with another --db."
    )


def translate(path: Path, exc: duckdb.Error, *, opening: bool) -> Exception:
    """DuckDB's error as ours: in use, a permission problem (``ValueError``) or damage.

    ``opening``: the error came from ``duckdb.connect`` (nothing of the file can be read).
    """
    message = str(exc).strip()
    if _LOCK.search(message):
        found = _LOCK_PID.search(message)
        pid = int(found.group(1)) if found else None
        holder = f"process {pid}" if pid else "another process"
        return DatabaseInUseError(
            f"database {path} is in use by another run ({holder}); wait for it to finish "
            "or use another --db (DuckDB allows one writing process per file)",
            pid=pid,
        )
    if "Permission denied" in message:
        return ValueError(f"database {path}: {first_line(message)}")
    return damaged(path, first_line(message), readable=not opening)


def is_damage(exc: duckdb.Error, *, writing: bool = False) -> bool:
    """Whether an error of a query on an open record says the file is damaged (in a write,
    only a failed checksum or a short read: an I/O error there may be a full disk)."""
    message = str(exc)
    if any(s in message for s in ("Corrupt", "checksum", "Could not read enough bytes")):
        return True
    return not writing and (
        isinstance(
            exc,
            (
                duckdb.IOException,
                duckdb.SerializationException,
                duckdb.InternalException,
                duckdb.FatalException,
            ),
        )
        or "invalidated" in message
    )


def is_interrupt(exc: BaseException) -> bool:
    """Whether DuckDB stopped a query for Ctrl-C (it raises ``RuntimeError('Query
    interrupted')`` and swallows the KeyboardInterrupt)."""
    return isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and str(exc) == "Query interrupted"
    )


def damaged(
    path: Path, reported: str, *, readable: bool, by_duckdb: bool = True
) -> DamagedRecordError:
    """The error for a file that cannot be used, with what to do about it.

    ``reported``: what DuckDB said (``by_duckdb``) or what our own check found.
    """
    salvage = (
        f"`dbpa export --salvage --db {path}` exports every table that can still be read"
        if readable
        else "DuckDB cannot open it, so nothing can be exported from it"
    )
    found = f"DuckDB reported: {reported}" if by_duckdb else reported
    return DamagedRecordError(
        f"database {path} is damaged or not a dbpa record ({found}). Nothing was written to "
        "it. Keep the file as it is and start a new record with another --db, or restore a "
        f"copy of it; {salvage}."
    )


def damaged_in_write(path: Path, reported: str) -> DamagedRecordError:
    """The error for damage that a write ran into (an index block is read only then)."""
    return DamagedRecordError(
        f"database {path} is damaged (DuckDB reported: {reported}). A write found it and was "
        "not committed. Keep the file as it is and start a new record with another --db, or "
        f"restore a copy of it; `dbpa export --salvage --db {path}` exports every table that "
        "can still be read."
    )


def quote(identifier: str) -> str:
    """A SQL identifier, double-quoted."""
    return '"' + identifier.replace('"', '""') + '"'


def _check_magic(path: Path) -> None:
    """Name a SQLite file as such (DuckDB would say it needs an extension to read it)."""
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE))
    except OSError as exc:
        raise ValueError(f"database {path}: {exc.strerror}") from None
    if head == _SQLITE:
        raise damaged(
            path, "it is a SQLite database, not a DuckDB one", readable=False, by_duckdb=False
        )


def first_line(message: str) -> str:
    """The first line of DuckDB's message, without its closing punctuation."""
    return message.splitlines()[0].rstrip(".!") if message else "no reason given"
