"""``dbpa copy``: a record copied into another (a file into a shared PostgreSQL record and
back, or a file into a file)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ._common import ExitCode, fail, out, record_parser

if TYPE_CHECKING:
    from storage import TableCopy


def copy(
    source: Annotated[
        str,
        typer.Option(
            "--from",
            metavar="PATH|URL",
            parser=record_parser("--from"),
            help="The record to copy: a DuckDB file or postgresql://USER@HOST/DB.",
        ),
    ],
    target: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="PATH|URL",
            parser=record_parser("--to"),
            help="The record to copy into (created or migrated when needed).",
        ),
    ],
) -> None:
    """Copy an audit record into another: a DuckDB file into a shared PostgreSQL record, a
    shared record back into a file, or a file into a file.

    Every row the target lacks is copied, table by table, in batches; a row it already
    holds is skipped, so the same command run again copies nothing and a copy stopped
    half-way completes when run again. A target holding another row under the same key is
    refused (exit 2, naming the table and the key): nothing is overwritten. The password of
    a PostgreSQL URL comes from PGPASSWORD or ~/.pgpass, never from the URL.
    """
    from storage import CopyInputError, copy_record

    try:
        done = copy_record(source, target, progress=_shown)
    except CopyInputError as exc:
        flag = {"source": "--from", "target": "--to"}[exc.argument]
        raise fail(ExitCode.BAD_INPUT, f"{flag} {exc.problem}", one_line=True) from None
    out.print(
        f"total: {done.copied:,} rows copied, {done.skipped:,} already there "
        f"({done.source} -> {done.target})",
        highlight=False,
        soft_wrap=True,
    )


def _shown(step: TableCopy) -> None:
    if step.finished:
        out.print(
            f"{step.table}: {step.copied:,} copied, {step.skipped:,} already there",
            highlight=False,
        )
