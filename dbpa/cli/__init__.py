"""The ``dbpa`` command.

Exit codes: ``ExitCode`` (0 success; 1 the audit could not finish; 2 bad input; 3
``--fail-on-control-rejection`` and a control changed; 4 ``--require-equivalent`` and a
perturbation was not shown equivalent).

One module per command group; each imports what only its command needs (Prefect, the
record, the report, the statistics) when that command runs, so ``dbpa --help``, a mistyped
command line and the commands that only read stay light. A command's help is its docstring,
shown as a reader sees it (``shown_help``). Every command's expected errors become exit
codes in one place (``exits_on_error``).
"""

from __future__ import annotations

import typer

from dbpa.environment import configure

from ._common import ExitCode, err, exits_on_error, out
from ._compare import compare
from ._copy import copy
from ._drift import drift, monitor_reset
from ._help import shown_help
from ._plan import plan
from ._record import export, report, results, runs
from ._run import run, serve
from ._validate import validate
from ._view import view

configure()

app = typer.Typer(
    name="dbpa",
    help="Statistical robustness audits for LLMs (distribution-based perturbation analysis).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
for _command in (
    validate,
    plan,
    run,
    runs,
    results,
    compare,
    export,
    copy,
    report,
    view,
    serve,
    drift,
):
    app.command(help=shown_help(_command))(exits_on_error(_command))
monitor_app = typer.Typer(
    help="The drift monitor's baselines.", no_args_is_help=True, rich_markup_mode="rich"
)
monitor_app.command("reset", help=shown_help(monitor_reset))(exits_on_error(monitor_reset))
app.add_typer(monitor_app, name="monitor")

__all__ = ["ExitCode", "app", "err", "out"]
