"""Reading a record while another process writes it: the writer answers on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from storage import (
    DatabaseInUseError,
    RemoteRecord,
    Store,
    UnknownRunError,
    open_reader,
    ready_to_write,
    sidecar_path,
)
from storage._sidecar import live_writer
from tests.report.conftest import build_run
from tests.storage.conftest import LIVE_RUN, holding

pytestmark = pytest.mark.file_only("the writer's reader server and the sidecar beside the file")

READS = {
    "runs": lambda r, ids: r.runs(),
    "run": lambda r, ids: pd.DataFrame([r.run(LIVE_RUN)]),
    "latest": lambda r, ids: pd.DataFrame([r.run("latest")]),
    "results": lambda r, ids: r.results(LIVE_RUN),
    "arm_failures": lambda r, ids: r.arm_failures(LIVE_RUN),
    "tests": lambda r, ids: r.tests(["live-t1", "nope"]),
    "interval_replicates": lambda r, ids: r.interval_replicates(
        [*r.results("personas-run-7").test_id, "nope"]
    ),
    "arms": lambda r, ids: r.arms(ids),
    "all arms": lambda r, ids: r.arms(),
    "samples": lambda r, ids: r.samples(ids),
    "all samples": lambda r, ids: r.samples(),
    "usage": lambda r, ids: r.usage(ids),
    "audit_epochs": lambda r, ids: r.audit_epochs("personas"),
    "drift": lambda r, ids: r.drift("personas"),
    "monitor_ticks": lambda r, ids: r.monitor_ticks("personas"),
    "monitor_resets": lambda r, ids: r.monitor_resets("personas"),
    "table": lambda r, ids: r.table("results").to_pandas(),
}


@pytest.fixture
def record(tmp_path):
    """A record with a completed run of the report tests' kind, to be written further."""
    path = tmp_path / "audit.duckdb"
    build_run(path, families=("gpt-4",), n_permutations=99)
    return path


def test_readers_get_what_the_writer_has_stored_so_far(record, tmp_path):
    with holding(record) as holder, open_reader(record) as reader:
        assert isinstance(reader, RemoteRecord)
        assert reader.writer_pid == holder.pid
        ids = [*reader.results(LIVE_RUN).perturbed_arm, "nope"]
        remote = {name: read(reader, ids) for name, read in READS.items()}
        vectors = reader.arms_vectors(ids, "sentence-transformers/all-MiniLM-L6-v2", 10)
        info = (reader.database_id, reader.schema_version)
        with pytest.raises(UnknownRunError, match="run 'nope' is not in"):
            reader.run("nope")
        with pytest.raises(ValueError, match="table: unknown 'x'"):
            reader.table("x")
        reader.export("samples", tmp_path / "samples.csv", "csv")
    with Store(record, read_only=True) as local:
        assert (local.database_id, local.schema_version) == info
        for name, read in READS.items():
            pd.testing.assert_frame_equal(remote[name], read(local, ids), obj=name)
        assert local.arms_vectors(ids, "sentence-transformers/all-MiniLM-L6-v2", 10) == {}
        assert vectors == {}
        assert len(pd.read_csv(tmp_path / "samples.csv")) == len(local.samples())
    running = remote["runs"].set_index("run_id").loc[LIVE_RUN]
    assert running.status == "running"
    assert (running.outputs_stored, running.outputs_planned) == (9, 12)
    assert (running.tests_stored, running.tests_planned) == (1, 2)
    assert not running.sequential
    assert remote["results"].tested.tolist() == [True, False]


def test_vectors_travel_exactly(record):
    with Store(record, read_only=True) as local:
        arm_ids = list(local.arms().arm_id)
        embedder = "sentence-transformers/all-MiniLM-L6-v2"
        expected = local.arms_vectors(arm_ids, embedder, 10)
    assert expected
    with holding(record), open_reader(record) as reader:
        found = reader.arms_vectors(arm_ids, embedder, 10)
    assert found.keys() == expected.keys()
    for arm_id, vectors in expected.items():
        assert found[arm_id].dtype == vectors.dtype
        assert (found[arm_id] == vectors).all()


def test_the_sidecar_is_private_local_and_removed_on_close(tmp_path):
    path = tmp_path / "a.duckdb"
    with Store(path) as store:
        sidecar = sidecar_path(path)
        assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
        found = json.loads(sidecar.read_text())
        assert set(found) == {"db", "pid", "port", "token"}
        assert found["pid"] == os.getpid()
        assert len(found["token"]) >= 64
        assert store._server is not None
        assert store._server._httpd.server_address[0] == "127.0.0.1"
    assert not sidecar.exists()
    with Store(tmp_path / "b.duckdb", serve_readers=False):
        assert not sidecar_path(tmp_path / "b.duckdb").exists()


def _post(port: int, path: str, token: str, body: object) -> tuple[int, dict]:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        con.request("POST", path, json.dumps(body), {"Authorization": f"Bearer {token}"})
        response = con.getresponse()
        return response.status, json.loads(response.read())
    finally:
        con.close()


def test_only_the_listed_reads_with_the_token_and_checked_arguments(tmp_path):
    path = tmp_path / "a.duckdb"
    with Store(path):
        writer = live_writer(path)
        assert writer is not None
        assert _post(writer.port, "/read/runs", "wrong", {})[0] == 403
        assert _post(writer.port, "/read/_rows", writer.token, {})[0] == 404
        assert _post(writer.port, "/read/sql", writer.token, {"sql": "DROP TABLE runs"})[0] == 404
        status, error = _post(writer.port, "/read/results", writer.token, {"run_id": 1})
        assert (status, error["error"]) == (400, "ValueError")
        assert "run_id: expected str" in error["message"]
        status, error = _post(writer.port, "/read/runs", writer.token, {"extra": 1})
        assert (status, error["message"]) == (400, "arguments: unknown extra")
        reader = RemoteRecord(path, writer)
        assert reader.runs().empty
        with pytest.raises(UnknownRunError):
            reader.run("latest")


def test_a_writer_that_is_gone_is_not_asked(tmp_path, record):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    sidecar_path(record).write_text(
        json.dumps({"db": str(record), "pid": int(gone.stdout), "port": 1, "token": "x"})
    )
    assert live_writer(record) is None
    with open_reader(record) as reader:  # the file is free: read directly
        assert isinstance(reader, Store)


def test_a_holder_that_is_not_a_dbpa_writer_is_in_use(record):
    script = textwrap.dedent(
        f"""
        import sys, duckdb
        con = duckdb.connect({str(record)!r})
        print("open", flush=True)
        sys.stdin.readline()
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(
            DatabaseInUseError, match=f"in use by another run .process {holder.pid}"
        ):
            open_reader(record)
    finally:
        holder.communicate("\n", timeout=30)


def test_a_second_writer_waits_for_the_first_or_fails_at_once(record):
    with holding(record) as holder:
        start = time.monotonic()
        with pytest.raises(DatabaseInUseError) as caught:
            ready_to_write(record, wait=False, on_wait=print)
        assert caught.value.pid == holder.pid
        assert time.monotonic() - start < 5
    waited: list[int | None] = []
    with holding(record, seconds=3) as holder:
        start = time.monotonic()
        ready_to_write(record, wait=True, on_wait=waited.append, poll_s=0.2)
        assert time.monotonic() - start > 2  # it returned once the first writer had closed
    assert waited == [holder.pid]
    with Store(record, serve_readers=False) as store:
        assert store.run(LIVE_RUN)["status"] == "running"


def test_a_copy_of_the_record_serves_nothing(record, tmp_path):
    """The sidecar names its database: a copied sidecar is not taken for another file's."""
    with holding(record):
        copy = tmp_path / "copy.duckdb"
        shutil.copyfile(sidecar_path(record), sidecar_path(copy))
        assert live_writer(copy) is None


def test_every_listed_read_has_an_answer_and_a_reader_method():
    from storage._serve import _CALLS
    from storage._wire import READS

    assert set(_CALLS) == set(READS)
    assert set(READS) - {"info"} <= {m for m in dir(RemoteRecord) if not m.startswith("_")}


def test_a_writer_waits_a_moment_for_a_reader(record):
    """A reader holds the file read-only for a moment (DuckDB then refuses writers): a writer
    opening it meanwhile waits for it instead of failing."""
    script = textwrap.dedent(
        f"""
        import time
        from storage import Store
        with Store({str(record)!r}, read_only=True):
            print("open", flush=True)
            time.sleep(2)
        """
    )
    reader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "open"
        start = time.monotonic()
        with Store(record, serve_readers=False) as store:
            assert time.monotonic() - start > 0.5
            assert store.run("latest")["status"] == "completed"
    finally:
        reader.wait(timeout=60)
