"""The writer serves reads of its record to other processes while it holds the file.

DuckDB lets one process open a file while another writes it, not even read-only; so the
writing process answers the read methods readers use (``_wire.READS``) on 127.0.0.1, from
a thread with its own DuckDB cursor (a consistent snapshot per read, never waiting for the
writer's lock). It advertises itself in the sidecar ``<db>.reader.json`` (pid, port, a
random token; mode 0600) and removes it when the record is closed. Every request must carry
the token; only the fixed methods are answered, with checked arguments.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ._reader import ServedRecord
from ._sidecar import Writer, publish, withdraw
from ._wire import JSON, MAX_REQUEST_BYTES, READS, encode, error_name

__all__ = ["RecordServer"]

_CALLS: dict[str, Any] = {
    "info": lambda r, a: {"database_id": r.database_id, "schema_version": r.schema_version},
    "runs": lambda r, a: r.runs(),
    "run": lambda r, a: r.run_frame(a["run_id"]),
    "results": lambda r, a: r.results(a["run_id"]),
    "prompt_results": lambda r, a: r.prompt_results(a["run_id"]),
    "arm_failures": lambda r, a: r.arm_failures(a["run_id"]),
    "tests": lambda r, a: r.tests(a["test_ids"], nulls=a["nulls"]),
    "interval_replicates": lambda r, a: r.interval_replicates(a["test_ids"]),
    "arms": lambda r, a: r.arms(a["arm_ids"]),
    "samples": lambda r, a: r.samples(a["arm_ids"], first=a["first"]),
    "usage": lambda r, a: r.usage(a["arm_ids"]),
    "arms_vectors": lambda r, a: r.arms_vectors(a["arm_ids"], a["embedder"], a["k"]),
    "audit_epochs": lambda r, a: r.audit_epochs(a["audit"]),
    "drift": lambda r, a: r.drift(a["audit"]),
    "monitor_ticks": lambda r, a: r.monitor_ticks(a["audit"]),
    "monitor_resets": lambda r, a: r.monitor_resets(a["audit"]),
    "table": lambda r, a: r.table(a["name"]),
}
"""How each method of ``READS`` is answered from the record (the whitelist)."""


class RecordServer:
    """Answers reads of one open record on 127.0.0.1 until closed."""

    def __init__(
        self, record: ServedRecord, db: Path, httpd: ThreadingHTTPServer, token: str
    ) -> None:
        self._record = record
        self._db = db
        self._httpd = httpd
        self.writer = Writer(pid=os.getpid(), port=httpd.server_address[1], token=token)
        """Where it answers, as advertised."""
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name=f"dbpa-reads-{db.name}", daemon=True
        )

    @classmethod
    def start(cls, record: ServedRecord, db: Path) -> RecordServer:
        """Serve ``record`` (a read-only view, closed with the server) and advertise it."""
        token = secrets.token_hex(32)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(record, token))
        httpd.daemon_threads = False  # close() waits for the reads in flight
        server = cls(record, db, httpd, token)
        server._thread.start()
        try:
            publish(db, server.writer)
        except BaseException:
            server.close()
            raise
        return server

    def close(self) -> None:
        """Withdraw the advertisement, stop answering, close the view."""
        withdraw(self._db, self.writer)
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
        self._record.close()


def _handler(record: ServedRecord, token: str) -> type[BaseHTTPRequestHandler]:
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        timeout = 60
        """Seconds a reader may take to send its request or accept the answer."""

        def log_message(self, format: str, *args: Any) -> None:  # the writer's terminal
            pass

        def do_GET(self) -> None:
            self._reply(405, {"error": "method", "message": "POST /read/<method>"})

        def do_POST(self) -> None:
            given = self.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                self._reply(403, {"error": "token", "message": "a valid token is needed"})
                return
            name = self.path.removeprefix("/read/")
            read = READS.get(name) if self.path.startswith("/read/") else None
            if read is None:
                self._reply(404, {"error": "method", "message": f"no read method {name!r}"})
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_REQUEST_BYTES:
                self._reply(413, {"error": "size", "message": "request too large or unsized"})
                return
            try:
                args = read.check(json.loads(self.rfile.read(length) or b"{}"))
                body, kind = encode(read.result, _CALLS[name](record, args))
            except Exception as error:  # every failure is answered, none kills the server
                known = error_name(error)
                status = 400 if known else 500
                self._reply(status, {"error": known or type(error).__name__, "message": str(error)})
                return
            self._send(200, body, kind)

        def _reply(self, status: int, payload: dict[str, str]) -> None:
            self._send(status, json.dumps(payload).encode(), JSON)

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
