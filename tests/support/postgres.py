"""A throwaway PostgreSQL server: a cluster of its own made with Debian's ``initdb`` and started
with ``pg_ctl`` on a free 127.0.0.1 port, removed afterwards (issue 50: no mock of the database).

The ``postgres`` fixture is one cluster per test process (each xdist worker starts its own: no
port, role or database is shared between workers); a test takes a database of its own with
``create_database()``. The server runs as the ``postgres`` user when the tests run as root
(PostgreSQL refuses to run as root) and asks every connection for the password, TCP and
socket alike. Where ``initdb`` is missing the tests that need it are skipped, except under
``CI=true``, where they fail (``.ci/setup`` installs it).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = ["FAST", "PostgresServer", "initdb_path", "postgres", "throwaway_cluster"]

SUPERUSER = "dbpa"
"""The cluster's superuser role (the operating-system user the server runs as is another)."""
SERVER_USER = "postgres"
"""The operating-system user the server runs as when the tests run as root (Debian's package
creates it)."""
FAST: Mapping[str, str] = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
"""Settings of a cluster whose data may be lost in a crash: the tests' (a benchmark measures
the defaults)."""
_ATTEMPTS = 3
"""Starts tried, each on a new free port (another process may take the port first)."""


@dataclass(frozen=True)
class PostgresServer:
    """A running server: where it listens and the superuser's name and password."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    """Never shown in a failure's report."""
    socket_dir: Path

    def conninfo(self, dbname: str = "postgres", *, password: str | None = None) -> str:
        """A libpq connection string to ``dbname`` over TCP (``password``: another one)."""
        from psycopg.conninfo import make_conninfo  # not imported by every test process

        return make_conninfo(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password if password is None else password,
            dbname=dbname,
            connect_timeout=10,
        )

    def restart(self) -> None:
        """Restart the server (``pg_ctl restart -m fast``): every connection is dropped, the
        data kept, the port the same."""
        initdb = initdb_path()
        assert initdb is not None  # it made this cluster
        root = self.socket_dir.parent
        command = [
            str(initdb.with_name("pg_ctl")), "-D", str(root / "data"), "-l",
            str(root / "server.log"), "-m", "fast", "-w", "-t", "60", "restart",
        ]  # fmt: skip
        _run(command, _server_user())

    def create_database(self) -> str:
        """A new empty database of a name of its own; returns its name."""
        import psycopg
        from psycopg import sql

        name = f"t_{uuid.uuid4().hex}"
        with psycopg.connect(self.conninfo(), autocommit=True) as con:
            con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return name


def initdb_path() -> Path | None:
    """Debian's newest ``initdb`` (``/usr/lib/postgresql/<version>/bin``), or one on PATH."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1])
    on_path = shutil.which("initdb")
    return Path(on_path) if on_path else None


@contextmanager
def throwaway_cluster(settings: Mapping[str, str] = FAST) -> Iterator[PostgresServer]:
    """Make a cluster in a new temporary directory, start it, yield it; stop it and remove the
    directory at the end, whatever happened. ``RuntimeError`` names the log when it cannot."""
    initdb = initdb_path()
    if initdb is None:
        raise FileNotFoundError("initdb: no PostgreSQL server binaries (.ci/setup installs them)")
    as_user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="dbpa-postgres-"))
    data, sockets = root / "data", root / "socket"
    pg_ctl = initdb.with_name("pg_ctl")
    password = secrets.token_urlsafe(24)
    try:
        sockets.mkdir()
        (root / "pwfile").write_text(password + "\n")
        if as_user is not None:
            for path in (root, sockets, root / "pwfile"):
                os.chown(path, as_user.pw_uid, as_user.pw_gid)
        _run(
            [
                str(initdb),
                "-D", str(data), "-U", SUPERUSER, f"--pwfile={root / 'pwfile'}",
                "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync",
            ],
            as_user,
        )  # fmt: skip
        (root / "pwfile").unlink()
        options = " ".join(f"-c {name}={value}" for name, value in settings.items())
        for attempt in range(_ATTEMPTS):
            port = _free_port()
            command = [
                str(pg_ctl), "-D", str(data), "-l", str(root / "server.log"), "-w", "-t", "60",
                "-o", f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 {options}",
                "start",
            ]  # fmt: skip
            try:
                _run(command, as_user)
                break
            except RuntimeError:
                if attempt == _ATTEMPTS - 1:
                    raise
        yield PostgresServer("127.0.0.1", port, SUPERUSER, password, sockets)
    finally:
        try:
            if (data / "postmaster.pid").exists():  # started, or a start that timed out
                _run([str(pg_ctl), "-D", str(data), "-m", "immediate", "-w", "stop"], as_user)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _server_user() -> pwd.struct_passwd | None:
    """The user to run the server as: ``SERVER_USER`` when this process is root, else None
    (the server runs as this process's user)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise RuntimeError(
            f"the tests run as root and there is no {SERVER_USER!r} user to run PostgreSQL as"
        ) from None


def _run(command: list[str], as_user: pwd.struct_passwd | None) -> None:
    """Run a PostgreSQL program (as ``as_user`` when given); ``RuntimeError`` with its output
    and the server log's end when it fails."""
    kwargs: dict[str, Any] = {}
    if as_user is not None:
        kwargs = {"user": as_user.pw_uid, "group": as_user.pw_gid, "extra_groups": []}
        kwargs["env"] = {**os.environ, "HOME": as_user.pw_dir, "USER": as_user.pw_name}
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        log = Path(command[command.index("-l") + 1]) if "-l" in command else None
        tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
        raise RuntimeError(
            f"{Path(command[0]).name} exited {done.returncode}: "
            f"{(done.stdout + done.stderr)[-2000:]}{tail}"
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """This test process's throwaway PostgreSQL server (skipped where ``initdb`` is missing,
    failed there under ``CI=true``)."""
    if initdb_path() is None:
        reason = "PostgreSQL's initdb is missing (.ci/setup installs Debian's postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true needs it", pytrace=False)
        pytest.skip(reason)
    with throwaway_cluster() as server:
        yield server
