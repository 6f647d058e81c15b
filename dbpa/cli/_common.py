"""What every command shares: the consoles, the exit codes, the options and the one path
from an error to an exit code.

Light on purpose: importing it (as ``dbpa --help`` does) loads typer and rich only.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec

import typer
from rich.console import Console
from rich.markup import escape

from dbpa.environment import RECORD as DB_ENV

if TYPE_CHECKING:
    from rich.table import Table

    from storage import RecordReader

err = Console(stderr=True)
"""Messages, progress and errors."""
out = Console()
"""Results: tables and the paths written."""


class ExitCode(IntEnum):
    """What the ``dbpa`` command returns."""

    OK = 0
    INCOMPLETE = 1
    """The audit ran but could not finish (a model failed permanently, refused connections
    for its ``connect_budget_s`` or kept failing after every retry: every other output is
    kept and the same command resumes), or the run reached its spend cap (``max_cost_usd``:
    the message says how to resume), or the record is in use and ``--no-wait`` was given,
    or Prefect's temporary server did not start."""
    BAD_INPUT = 2
    """A file, field, option or run id that cannot be used, a damaged record, or a shared
    record's URL, login or database refused; the message names it."""
    CONTROL_REJECTED = 3
    """``--fail-on-control-rejection`` and a control perturbation was rejected."""
    NOT_EQUIVALENT = 4
    """``--require-equivalent LABEL`` and a perturbation of that label was not shown
    equivalent (changed or inconclusive)."""


def fail(code: ExitCode, message: str, *, one_line: bool = False) -> typer.Exit:
    """Print ``message`` as an error (``one_line``: never wrapped at the terminal's width);
    the exit to raise."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=one_line)
    return typer.Exit(int(code))


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*(:[A-Za-z][A-Za-z0-9+.-]*)*://")
_SHARED = ("postgresql://", "postgres://")
"""The environment variable naming the record when ``--db`` is not given."""


def record_parser(flag: str) -> Callable[[str], str]:
    """The parser of an option that names a record (``--db`` of every command, or
    ``DBPA_DB``; ``--from``/``--to`` of ``dbpa copy``): the path of a DuckDB file, or a
    shared record's URL ``postgresql://USER@HOST:PORT/DBNAME`` (its password only from
    ``PGPASSWORD`` or ``~/.pgpass``). Any other URL (``scheme://...``), a URL with a
    password or an unknown parameter, is refused with exit 2 on one line that names
    ``flag`` and never shows a password (a path would drop one of its slashes and make it a
    local file named after the server)."""

    def parse(value: str | Path) -> str:
        text = os.fspath(value)
        if not _URL.match(text):
            return text
        problem = "give the path of a DuckDB file or postgresql://USER@HOST:PORT/DBNAME"
        if text.startswith(_SHARED):
            from storage import check_url  # only for a URL: a file's commands stay light

            try:
                return check_url(text)
            except ValueError as exc:
                problem = str(exc)
        raise fail(ExitCode.BAD_INPUT, f"{flag} {masked_url(text)}: {problem}", one_line=True)

    return parse


record_target = record_parser("--db")
"""The parser of ``--db``."""


def masked_url(url: str) -> str:
    """``url`` with everything that may be a password hidden: what follows the user's name
    up to the last ``@``, and every query value (``postgresql://u:***@host/db?password=***``)."""
    scheme = url[: url.index("://") + 3]
    rest = url[len(scheme) :]
    if "@" in rest:
        userinfo, _, rest = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}{':***' if colon else ''}@{rest}"
    where, question, query = rest.partition("?")
    if question:
        pairs = (pair.partition("=") for pair in query.split("&"))
        query = "&".join(f"{name}=***" if equals else name for name, equals, _ in pairs)
    return f"{scheme}{where}{question}{query}"


ConfigArgument = Annotated[Path, typer.Argument(help="Audit config (YAML).")]
RunArgument = Annotated[str, typer.Argument(metavar="RUN", help="Run id, or 'latest'.")]
DbOption = Annotated[
    str,
    typer.Option(
        "--db",
        metavar="PATH|URL",
        parser=record_target,
        envvar=DB_ENV,
        show_envvar=True,
        help="The audit record: a DuckDB file, or a shared PostgreSQL record by its URL, "
        "postgresql://USER@HOST/DB (or HOST:PORT; password from PGPASSWORD or ~/.pgpass).",
    ),
]
DEFAULT_DB = "dbpa.duckdb"
SetOption = Annotated[list[str] | None, typer.Option("--set", help="Override KEY=VALUE.")]
RequireEquivalentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--require-equivalent",
        metavar="LABEL",
        help="Exit 4 unless every perturbation labelled LABEL is equivalent (repeatable; "
        "needs an equivalence margin in the config).",
    ),
]
ReportDirOption = Annotated[
    Path | None,
    typer.Option("--out", help="Directory for the reports (default: reports/ next to the db)."),
]
RunnerOption = Annotated[
    str, typer.Option(help="Task runner for the compute: threads, dask or dask=ADDRESS.")
]


# Errors of a command and their exit code, most specific first. ConfigError and DriftError
# are ValueErrors; the classes of a module are looked up only once that module is imported
# (an error of a module never imported cannot have been raised), so that mapping an error
# does not import storage or Prefect into a command that does not use them.
_EXIT_CODES: tuple[tuple[str, str, ExitCode], ...] = (
    ("flows.audit", "AuditIncomplete", ExitCode.INCOMPLETE),
    ("dbpa.llm", "SpendCapReached", ExitCode.INCOMPLETE),
    ("dbpa.launch", "TemporaryServerError", ExitCode.INCOMPLETE),
    ("storage", "DatabaseInUseError", ExitCode.INCOMPLETE),
    ("storage", "RecordUnreachableError", ExitCode.INCOMPLETE),
    ("storage", "DamagedRecordError", ExitCode.BAD_INPUT),
    ("storage", "UnknownRunError", ExitCode.BAD_INPUT),
    ("builtins", "FileNotFoundError", ExitCode.BAD_INPUT),
    ("builtins", "ValueError", ExitCode.BAD_INPUT),
)


def exit_code(error: Exception) -> ExitCode | None:
    """The exit code of an expected error; None for anything else (a bug: let it show)."""
    for module, name, code in _EXIT_CODES:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(error, cls):
            return code
    return None


P = ParamSpec("P")


def exits_on_error(command: Callable[P, None]) -> Callable[P, None]:
    """``command`` with its expected errors printed as one line and turned into exit codes.

    The frames of a handled error (and of Ctrl-C) are cleared on the way out, so nothing
    they held (an open record, a DuckDB relation) lives on to interpreter exit.
    """

    @functools.wraps(command)
    def checked(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            command(*args, **kwargs)
        except KeyboardInterrupt as interrupt:
            release(interrupt)
            raise
        except Exception as error:
            code = exit_code(error)
            if code is None:
                raise
            release(error)
            raise fail(code, str(error)) from None

    return checked


def release(error: BaseException) -> None:
    """Clear the locals of the finished frames of ``error`` and of the errors it chains."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)
        pending += [current.__cause__, current.__context__]


def parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as YAML (numbers, booleans, lists); a bad pair is a
    ``ConfigError`` (``dbpa.config.parse_overrides``)."""
    from dbpa.config import parse_overrides as parse

    return parse(pairs or [])


def open_record(db: str | Path) -> RecordReader:
    """The audit record for reading: the file read-only, or, while an audit writes it, the
    writing process's answers (a missing file is a FileNotFoundError); a shared record in a
    snapshot of its own."""
    from storage import open_reader

    return open_reader(db)


def cell(value: Any) -> str:
    """A table cell from a DataFrame value; missing values (None, NaN) are blank."""
    return "" if value is None or value != value else str(value)


def whole_table(
    columns: Sequence[tuple[str, bool, str]],
    rows: Sequence[Sequence[str]],
    styles: Mapping[str, str] | None = None,
) -> Table | None:
    """``rows`` as a table in which each cell of a kept column (``(name, keep, justify)``
    with ``keep``: ids, numbers) shows whole on one line and the other columns wrap at
    spaces; None when ``out`` is too narrow for that (a table then cuts or folds ids).
    ``styles``: a cell's text -> its style (``changed`` in red)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    needed = 2 * len(columns) - 1  # each column's right padding, a divider between columns
    for c, (name, keep, _) in enumerate(columns):
        cells = [name, *(row[c] for row in rows)]
        needed += max(len(s) if keep else max(map(len, s.split() or [""])) for s in cells)
    if needed > out.width:
        return None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    for name, keep, justify in columns:
        table.add_column(name, no_wrap=keep, overflow="fold", justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(s, style=(styles or {}).get(s, "")) for s in row))
    return table


def print_whole(
    columns: Sequence[tuple[str, bool, str]],
    rows: Sequence[Sequence[str]],
    styles: Mapping[str, str] | None = None,
) -> None:
    """``rows`` as ``whole_table`` lays them out, or in aligned lines (``print_columns``)
    where the terminal is too narrow for that: ids are never cut nor folded."""
    table = whole_table(columns, rows, styles)
    if table is None:
        header = [name for name, _, _ in columns]
        print_columns(header, rows, {c for c, (_, _, j) in enumerate(columns) if j == "right"})
    else:
        out.print(table)


def print_columns(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> None:
    """Every row on one line in aligned columns (``numeric``: right-aligned), never wrapped
    by ``out`` (a terminal narrower than a line wraps it, ids whole). Also for thousands of
    rows, which a table takes the terminal library seconds to lay out."""
    lines = [list(header), *map(list, rows)]
    widths = [max(len(cells[c]) for cells in lines) for c in range(len(header))]
    text = "\n".join(
        "  ".join(
            cells[c].rjust(widths[c]) if c in numeric else cells[c].ljust(widths[c])
            for c in range(len(header))
        ).rstrip()
        for cells in lines
    )
    out.print(text, markup=False, highlight=False, soft_wrap=True)
