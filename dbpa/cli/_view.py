"""``dbpa view``: the runs of a record and their reports in the browser, on 127.0.0.1."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from ._common import DEFAULT_DB, DbOption, ExitCode, fail, open_record, out
from ._signals import stopped_by_signals


def view(
    db: DbOption = DEFAULT_DB,
    port: Annotated[
        int, typer.Option(help="Port on 127.0.0.1 (0: any free one).", min=0, max=65535)
    ] = 0,
) -> None:
    """Serve the record's runs and their reports on 127.0.0.1 until Ctrl-C or SIGTERM.

    Pages are rendered from the record when asked, also while an audit runs. A record not
    written yet is served as one with no run, so the viewer can start with a worker before
    its first audit.
    """
    from dbpa.report import RecordViewer
    from storage import is_postgres_url

    shared = is_postgres_url(db)
    if not shared and not Path(db).parent.resolve().is_dir():
        raise fail(ExitCode.BAD_INPUT, f"--db: the folder of {db} does not exist")
    try:
        viewer = RecordViewer(db, lambda: open_record(db), port)
    except OSError as exc:
        message = f"--port: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}"
        raise fail(ExitCode.BAD_INPUT, message) from None
    try:  # SIGTERM: exit 143 (as `dbpa run`), the address file removed as by Ctrl-C
        with stopped_by_signals(), viewer.running():
            message = f"Serving the runs of {db} at {viewer.url}/ (Ctrl-C to stop)"
            if not shared and not Path(db).exists():
                message += f"; {db} holds no run yet"
            out.print(message, highlight=False)
            threading.Event().wait()
    except KeyboardInterrupt:
        out.print("stopped")
