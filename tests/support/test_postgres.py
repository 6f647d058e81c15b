"""The throwaway PostgreSQL server of the tests: a real server that asks for the password,
gives each test a database of its own, does not run as root, and leaves nothing behind."""

from __future__ import annotations

import os
import socket

import psycopg
import pytest

from tests.support.postgres import PostgresServer, throwaway_cluster


def test_a_fresh_database_takes_writes_and_is_the_test_s_own(postgres: PostgresServer) -> None:
    first, second = postgres.create_database(), postgres.create_database()
    assert first != second
    with psycopg.connect(postgres.conninfo(first)) as con:
        con.execute("CREATE TABLE t (k text PRIMARY KEY, v real[])")
        con.execute("INSERT INTO t VALUES (%s, %s)", ["a", [0.5, 1.5]])
        con.execute("INSERT INTO t VALUES (%s, %s) ON CONFLICT DO NOTHING", ["a", [9.0]])
        assert con.execute("SELECT k, v FROM t").fetchall() == [("a", [0.5, 1.5])]
    with psycopg.connect(postgres.conninfo(second)) as con:
        tables = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables == (0,)


def test_a_wrong_password_is_refused_over_tcp_and_the_socket(postgres: PostgresServer) -> None:
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(postgres.conninfo(password="not-" + postgres.password))
    on_socket = psycopg.conninfo.make_conninfo(
        host=str(postgres.socket_dir), port=postgres.port, user=postgres.user, password="wrong"
    )
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(on_socket)


def test_the_server_listens_on_loopback_and_does_not_run_as_root(
    postgres: PostgresServer,
) -> None:
    assert postgres.host == "127.0.0.1"
    with psycopg.connect(postgres.conninfo()) as con:
        (directory,) = con.execute("SHOW data_directory").fetchone() or ("",)
    assert os.stat(directory).st_uid != 0


@pytest.mark.usefixtures("postgres")  # skipped, or failed under CI, where it is
def test_the_cluster_is_stopped_and_removed_even_when_the_body_fails() -> None:
    seen: list[PostgresServer] = []

    def use_then_fail() -> None:
        with throwaway_cluster() as server:
            seen.append(server)
            with psycopg.connect(server.conninfo()) as con:
                assert con.execute("SELECT 1").fetchone() == (1,)
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        use_then_fail()
    (server,) = seen
    assert not server.socket_dir.parent.exists()
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect((server.host, server.port))
