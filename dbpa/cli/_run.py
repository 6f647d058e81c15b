"""The commands that sample: ``run`` (once, resumable) and ``serve`` (on a schedule).

``run`` parses, calls ``dbpa.launch`` and prints: the run itself (one plan, the warm-ups,
the head start, the flow or the record) is carried out below the command line.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ._common import (
    DEFAULT_DB,
    ConfigArgument,
    DbOption,
    ExitCode,
    ReportDirOption,
    RequireEquivalentOption,
    RunnerOption,
    SetOption,
    err,
    exit_code,
    fail,
    out,
    parse_overrides,
)
from ._quiet import quiet_console
from ._record import check_gates, print_results
from ._signals import stopped_by_signals

if TYPE_CHECKING:
    from dbpa.progress import Progress as Update


@contextmanager
def _progress_bars() -> Iterator[None]:
    """Rich progress bars fed by dbpa.progress while the flow runs."""
    from dbpa import progress

    bars = Progress(
        TextColumn("{task.description:>8}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )
    ids: dict[str, TaskID] = {}

    def show(update: Update) -> None:
        if update.phase not in ids:
            ids[update.phase] = bars.add_task(update.phase, total=update.total, unit=update.unit)
        bars.update(ids[update.phase], completed=update.done, total=update.total)

    with bars, progress.listen(show):
        yield


def _say(audit: str, line: str) -> None:
    err.print(f"[bold]{escape(audit)}[/]: {escape(line)}")


def _warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}", highlight=False)


def _waiting(db: str) -> Callable[[int | None], None]:
    def waiting(pid: int | None) -> None:
        holder = f"process {pid}'s run" if pid else "another process's run"
        err.print(
            f"waiting for {holder} of {db} to finish; --no-wait to fail at once", highlight=False
        )

    return waiting


def run(
    context: typer.Context,
    config: ConfigArgument,
    db: DbOption = DEFAULT_DB,
    out_dir: ReportDirOption = None,
    set_: SetOption = None,
    fail_on_control_rejection: Annotated[
        bool,
        typer.Option(
            "--fail-on-control-rejection",
            help="Exit 3 when a control perturbation is rejected (a CI gate).",
        ),
    ] = False,
    require_equivalent: RequireEquivalentOption = None,
    runner: RunnerOption = "threads",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Fail at once if another run holds the record.")
    ] = False,
) -> None:
    """Run (or resume) an audit; re-running the same command resumes it."""
    # Imported here, not with the command line: ``dbpa --help`` and the other commands stay light.
    from dbpa.launch import PrefectServer, prepare, run_prepared, wait_for_warm_ups
    from dbpa.llm import allow_requests, stop_requests

    # the record closed, Prefect's temporary server stopped; requests in flight cancelled, so
    # sampling threads return at once instead of finishing their arms
    with stopped_by_signals(on_stop=stop_requests):
        allow_requests()  # a signal ended an earlier run of this process (an in-process caller's)
        if not verbose:
            os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
        # Start-up in parallel: Prefect's temporary server starts in its own process first, while
        # this one loads and plans the config, reads what the record still needs and loads that.
        server = PrefectServer.launch()
        try:
            prepared = prepare(
                config,
                parse_overrides(set_),
                db,
                wait=not no_wait,
                on_wait=_waiting(str(db)),
                needs_margin="--require-equivalent" if require_equivalent else None,
            )
        except BaseException:
            # Nothing ran on the server, so nothing is left to send it at exit: stopped now, not
            # at the process's exit (a caller in a longer-lived process kept it running).
            server.stop()
            raise
        context.call_on_close(wait_for_warm_ups)  # however the run ends

        def reported(error: Exception) -> bool:  # printed as this command's exit message
            from dbpa.llm import ModelError

            return exit_code(error) is not None or isinstance(error, ModelError)

        @contextmanager
        def showing() -> Iterator[None]:
            with ExitStack() as shown:
                if not verbose:
                    shown.enter_context(quiet_console(reported, frozenset({"sample"})))
                shown.enter_context(_progress_bars())
                yield

        try:
            launched = run_prepared(
                prepared, server, out_dir, runner, say=_say, warn=_warn, around_flow=showing
            )
        except Exception as stopped:
            _stopped(stopped, db)
            _capped(stopped, config, db, set_)
            raise
        results = print_results(db, launched.run_id)
        for fmt, path in launched.reports.items():
            out.print(f"{fmt} report: {path}")
        check_gates(results, fail_on_control_rejection, require_equivalent or [])


def _capped(error: Exception, config: object, db: object, set_: list[str] | None) -> None:
    """A spend cap reached: this command's one-line exit message, saying how to resume."""
    from dbpa.llm import SpendCapReached

    if not isinstance(error, SpendCapReached):
        return
    error.__traceback__ = None
    kept = [s for s in set_ or [] if not s.startswith(f"{error.key}=")]
    command = " ".join(
        ["dbpa run", shlex.quote(str(config)), "--db", shlex.quote(str(db))]
        + [f"--set {shlex.quote(s)}" for s in kept]
    )
    raise fail(ExitCode.INCOMPLETE, error.line(command), one_line=True) from None


def _stopped(error: Exception, db: object) -> None:
    """What the run had done when the flow stopped on ``error``; a model error becomes this
    command's exit message (the arms' own permanent failures arrive as AuditIncomplete, once
    every other arm is done; a model error here is the embedder's, or one that outlived every
    retry)."""
    from dbpa.llm import ModelError, PermanentModelError
    from flows.audit import AuditIncomplete

    if not isinstance(error, AuditIncomplete | ModelError):
        return
    # Prefect keeps the flow run's exception (as its result) until exit; without its
    # traceback, the flow's frames and the record connection they hold are freed now.
    error.__traceback__ = None
    print_results(db, "latest")  # type: ignore[arg-type]
    if isinstance(error, AuditIncomplete):
        return
    then = (
        "fix the cause and run the same command again"
        if isinstance(error, PermanentModelError)
        else "run the same command again to resume"
    )
    message = f"{error}. Every output sampled so far is kept; {then}."
    raise fail(ExitCode.INCOMPLETE, message) from None


def serve(
    config: ConfigArgument,
    cron: Annotated[
        str, typer.Option(help="When to run: a cron expression in UTC, e.g. '0 3 * * *'.")
    ],
    db: DbOption = DEFAULT_DB,
    out_dir: ReportDirOption = None,
    set_: SetOption = None,
    runner: RunnerOption = "threads",
    name: Annotated[
        str | None, typer.Option(help="Deployment name (default: the audit's name).")
    ] = None,
) -> None:
    """Run an audit on a schedule from this process, each tick sampling afresh (Ctrl-C stops).

    Needs a Prefect server (PREFECT_API_URL); every tick is a run of the deployment
    dbpa-scheduled-audit/NAME, which can also be triggered by hand or from the UI.
    """
    from prefect.types.entrypoint import EntrypointType

    from dbpa.launch import load_audit
    from flows.scheduled import scheduled_audit
    from storage import is_postgres_url

    cfg, _ = load_audit(config, parse_overrides(set_))
    name = name or cfg.name
    deployment = f"{scheduled_audit.name}/{name}"
    api = _serve_checks(cron, deployment)
    err.print(
        f"serving [bold]{deployment}[/] on cron '{cron}' (UTC) against {api}; record: {db}\n"
        f"run a tick now with: prefect deployment run '{deployment}'\n"
        "press Ctrl-C to stop",
        highlight=False,
    )
    scheduled_audit.serve(
        name=name,
        cron=cron,
        parameters={
            "config_path": str(config.resolve()),
            "db": db if is_postgres_url(db) else str(Path(db).resolve()),
            "out": str(out_dir.resolve()) if out_dir else None,
            "overrides": parse_overrides(set_),
            "runner": runner,
        },
        tags=[f"audit:{cfg.name}"],
        print_starting_message=False,
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    err.print(f"stopped serving {deployment}; its schedule is paused until it is served again")


def _serve_checks(cron: str, deployment: str) -> str:
    """The API URL, once the cron expression, the server and the deployment name are usable."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL
    from pydantic import ValidationError

    try:
        CronSchedule(cron=cron)
    except ValidationError as exc:
        raise fail(ExitCode.BAD_INPUT, f"--cron {cron!r}: {exc.errors()[0]['msg']}") from None
    api = PREFECT_API_URL.value()
    if not api:
        raise fail(
            ExitCode.BAD_INPUT,
            "no Prefect server: start one (prefect server start --host 127.0.0.1) and set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api",
        )
    with get_client(sync_client=True) as client:
        try:
            pool = client.read_deployment_by_name(deployment).work_pool_name
        except ObjectNotFound:
            pool = None
    if pool:
        raise fail(
            ExitCode.BAD_INPUT,
            f"deployment {deployment} runs on the work pool {pool!r} (deployments/prefect.yaml); "
            "serving would replace it: choose another --name",
        )
    return str(api)
