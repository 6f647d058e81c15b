"""``dbpa view``: a record's runs and their reports, served on 127.0.0.1.

Every page is rendered from the record when it is asked for (``gather`` and a renderer), so
it shows what the record holds now, also while an audit writes it (the reader the caller
opens handles that). Pages: ``/`` lists the runs; ``/runs/RUN`` is the HTML report of a run,
``/runs/RUN.md`` and ``/runs/RUN.json`` its other formats. Nothing else is served, and no
file is read: a path names a run of the record or is a 404.

It answers only requests addressed to it: a ``Host`` header of ``127.0.0.1:PORT`` or
``localhost:PORT`` (without the port only on port 80, where a browser leaves it out). Any
other (a missing or repeated ``Host``, another name or port, ``[::1]``, where it does not
listen) is a 421 with a line of plain text: a web page whose name an attacker points at
127.0.0.1 (DNS rebinding) reaches the port, but its requests name the attacker's host.

While a viewer runs, its address is in a small file next to the record (``RECORD.view``), so
that a run writing its reports can link to the viewer instead of to a file path
(:func:`viewer_url`).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote

from ._gather import gather
from ._html import CONTENT_SECURITY_POLICY, render_html
from ._json import render_json
from ._markdown import render_markdown

__all__ = ["RecordViewer", "address_file", "viewer_url"]

OpenReader = Callable[[], AbstractContextManager[Any]]
"""Opens the record for reading (a context manager yielding a ``ReportReader`` with
``runs()``)."""

_FORMATS: dict[str, tuple[Callable[[Any], str], str]] = {
    "": (render_html, "text/html; charset=utf-8"),
    ".md": (render_markdown, "text/markdown; charset=utf-8"),
    ".json": (render_json, "application/json"),
}
_INDEX_CSP = "default-src 'none'; style-src 'unsafe-inline'"


def address_file(db: str | Path) -> Path | None:
    """Where a viewer of the file ``db`` writes its address while it runs (None for a shared
    record, a URL: no folder of its own)."""
    if "://" in str(db):
        return None
    db = Path(db)
    return db.with_name(db.name + ".view")


def viewer_url(db: str | Path) -> str | None:
    """The address of the viewer serving ``db`` now, or None (no viewer, or it died)."""
    where = address_file(db)
    if where is None:
        return None
    try:
        found = json.loads(where.read_text())
        os.kill(int(found["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(found["url"])


class RecordViewer:
    """A threaded HTTP server on 127.0.0.1 answering from the record ``db``."""

    def __init__(self, db: str | Path, open_reader: OpenReader, port: int = 0) -> None:
        self.db = db
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(open_reader))
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        """Where it answers, e.g. ``http://127.0.0.1:8765``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @contextmanager
    def running(self) -> Iterator[RecordViewer]:
        """Serve in a background thread, with the address file next to a record file."""
        thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        thread.start()
        where = address_file(self.db)
        try:
            if where is not None:
                where.write_text(json.dumps({"url": self.url, "pid": os.getpid()}))
            yield self
        finally:
            if where is not None:
                with contextlib.suppress(OSError):
                    where.unlink()
            self._httpd.shutdown()
            self._httpd.server_close()
            thread.join()


def _hosts(port: int) -> frozenset[str]:
    """The ``Host`` headers a viewer on 127.0.0.1:``port`` answers: the names a browser on
    this machine sends for it, with the port (without it on port 80, HTTP's default)."""
    names = ("127.0.0.1", "localhost")
    return frozenset({f"{name}:{port}" for name in names} | (set(names) if port == 80 else set()))


def _handler(open_reader: OpenReader) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # no access log
            pass

        def parse_request(self) -> bool:
            """The request line and headers, read; False (answered) unless the request is
            addressed to this server (for every method)."""
            if not super().parse_request():
                return False
            named = self.headers.get_all("Host", [])
            if len(named) == 1 and named[0] in _hosts(cast(HTTPServer, self.server).server_port):
                return True
            self._send(
                HTTPStatus.MISDIRECTED_REQUEST,
                "Misdirected request: this server answers only at its own address.\n",
                "text/plain; charset=utf-8",
            )
            return False

        def do_GET(self) -> None:
            path = unquote(self.path.split("?", 1)[0])
            if path == "/":
                self._send(HTTPStatus.OK, _index(open_reader), "text/html; charset=utf-8")
                return
            if path.startswith("/runs/"):
                name = path.removeprefix("/runs/")
                run_id, suffix = _split_format(name)
                if run_id and "/" not in run_id:
                    self._report(run_id, suffix)
                    return
            self._send(HTTPStatus.NOT_FOUND, _page("Not found", "<p>No such page.</p>"))

        def _report(self, run_id: str, suffix: str) -> None:
            render, content_type = _FORMATS[suffix]
            try:
                with open_reader() as store:
                    data = gather(store, run_id)
            except (LookupError, FileNotFoundError):
                body = f"<p>Run {html.escape(run_id)} is not in this record.</p>"
                self._send(HTTPStatus.NOT_FOUND, _page("Unknown run", body))
                return
            self._send(HTTPStatus.OK, render(data), content_type, CONTENT_SECURITY_POLICY)

        def _send(
            self,
            status: HTTPStatus,
            body: str,
            content_type: str = "text/html; charset=utf-8",
            csp: str = _INDEX_CSP,
        ) -> None:
            encoded = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(encoded)))
            self.send_header("Content-Security-Policy", csp)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(encoded)

    return Handler


def _split_format(name: str) -> tuple[str, str]:
    for suffix in (".md", ".json"):
        if name.endswith(suffix):
            return name.removesuffix(suffix), suffix
    return name, ""


def _index(open_reader: OpenReader) -> str:
    """The runs of the record, newest first, each linking to its reports."""
    try:
        with open_reader() as store:
            runs = store.runs()
    except FileNotFoundError:  # no audit has written the record yet
        return _page("dbpa: runs of the record", "<p>No run is recorded yet.</p>")
    rows = []
    for r in runs.itertuples():
        run_id = html.escape(str(r.run_id))
        link = f'<a href="/runs/{run_id}">{run_id}</a>'
        others = f'<a href="/runs/{run_id}.md">md</a> · <a href="/runs/{run_id}.json">json</a>'
        cells = [link, html.escape(str(r.audit)), html.escape(str(r.status))]
        cells += [html.escape(str(r.started_at)), others]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    table = (
        "<table><thead><tr><th>run</th><th>audit</th><th>status</th><th>started</th>"
        "<th>other formats</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else "<p>No run is recorded yet.</p>"
    )
    return _page("dbpa: runs of the record", table)


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
        "td,th{padding:4px 10px;text-align:left}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
