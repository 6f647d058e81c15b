"""The commands that sample: ``run`` (once, resumable) and ``serve`` (on a schedule)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from dbpa import progress

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
    wait_for_record,
)
from ._from_record import decide_from_record
from ._head_start import HeadStart
from ._quiet import quiet_console
from ._record import check_gates, print_results
from ._server import PrefectServer, TemporaryServerError
from ._signals import stopped_by_signals
from ._validate import bind_stored, load_audit
from ._warm import embedder_warmed, generation_work, pending_work, wait_for_warm_ups, warm_up

if TYPE_CHECKING:
    from dbpa.config import AuditConfig
    from dbpa.plan import AuditPlan


@contextmanager
def _progress_bars() -> Iterator[None]:
    """Rich progress bars fed by dbpa.progress while the flow runs."""
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

    def show(update: progress.Progress) -> None:
        if update.phase not in ids:
            ids[update.phase] = bars.add_task(update.phase, total=update.total, unit=update.unit)
        bars.update(ids[update.phase], completed=update.done, total=update.total)

    with bars, progress.listen(show):
        yield


def _without_prefect(server: PrefectServer) -> bool:
    """Whether a run with nothing but bookkeeping left can skip Prefect: only with Prefect's
    temporary server (stopped here), never with a configured server whose UI should see it."""
    server.confirm()
    if not server.active:
        return False
    server.stop()
    return True


def _first_look(plan: AuditPlan, cfg: AuditConfig) -> AuditPlan:
    """``plan`` as far as the run surely samples it: a sequential audit only to its first
    look (a test may stop there; which ones go on, only the flow knows). Head start and
    warm-ups follow it: a finished sequential audit, its arms short of k where tests
    stopped, has nothing to sample."""
    if not cfg.sequential:
        return plan
    return dataclasses.replace(plan, k=cfg.sequential.design(cfg.k).looks[0])


@stopped_by_signals()  # the record closed, Prefect's temporary server stopped
def run(
    context: typer.Context,
    config: ConfigArgument,
    db: DbOption = DEFAULT_DB,
    out_dir: ReportDirOption = None,
    set_: SetOption = None,
    fail_on_control_rejection: Annotated[
        bool, typer.Option(help="Exit 3 when a control perturbation is rejected (a CI gate).")
    ] = False,
    require_equivalent: RequireEquivalentOption = None,
    runner: RunnerOption = "threads",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Fail at once if another run holds the record.")
    ] = False,
) -> None:
    """Run (or resume) an audit; re-running the same command resumes it."""
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    # Start-up in parallel: Prefect's temporary server starts in its own process first, while
    # this one loads the config, reads what the record still needs and loads that.
    # Sampling starts too, before Prefect is imported (its outputs wait in the record for
    # the flow's tasks); Prefect then loads, and the head start stops once the server answers.
    server = PrefectServer.launch()
    cfg, plan = load_audit(config, set_)
    if require_equivalent and cfg.equivalence is None:
        raise fail(
            ExitCode.BAD_INPUT,
            "--require-equivalent: the config has no equivalence margin (set `equivalence:` in "
            "it, or --set equivalence=true)",
        )
    wait_for_record(db, wait=not no_wait)
    if plan is None:  # paraphrases: bound here when the record holds them (a re-run)
        cfg, plan = bind_stored(cfg, db)
    # With paraphrases still to generate, the flow generates, then plans; the arms that need
    # none (the original's, other specs') get their head start all the same.
    work = pending_work(_first_look(plan, cfg), db) if plan is not None else generation_work(cfg)
    # A sequential audit's decisions come from its looks, which only the flow reads.
    if plan is not None and work.done and not cfg.sequential and _without_prefect(server):
        err.print(
            f"[bold]{cfg.name}[/]: every output, vector and test is in {db}: deciding and "
            "reporting from the record (Prefect not started)"
        )
        recorded = decide_from_record(cfg, plan, db, out_dir)
        results = print_results(db, recorded.run_id)
        for fmt, path in recorded.reports.items():
            out.print(f"{fmt} report: {path}")
        check_gates(results, fail_on_control_rejection, require_equivalent or [])
        return
    context.call_on_close(wait_for_warm_ups)  # however the run ends
    warm_up(work)
    from dbpa.plan import plan_audit

    ready = _first_look(plan if plan is not None else plan_audit(cfg.ready_part()), cfg)
    head_start = HeadStart(ready, db) if work.models else None
    try:
        from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

        from dbpa.llm import ModelError, PermanentModelError
        from flows.audit import AuditIncomplete, run_audit

        server.confirm()
        err.print(
            f"[bold]{cfg.name}[/]: {len(plan.tests)} tests, {len(plan.arms)} arms x "
            f"k={'up to ' if cfg.sequential else ''}{cfg.k}; "
            f"record: {db}"
            if plan is not None
            else f"[bold]{cfg.name}[/]: paraphrases first, then k={cfg.k}; record: {db}"
        )
        server.ready()
    except TemporaryServerError as exc:
        kept = head_start.stop() if head_start is not None else 0
        message = str(exc)
        if kept:
            message += (
                f"\nThe {kept} outputs sampled meanwhile are kept in {db}: the next run asks "
                "only for the others."
            )
        raise fail(ExitCode.INCOMPLETE, message) from None
    finally:
        if head_start is not None:
            head_start.stop()

    def reported(error: Exception) -> bool:  # printed as this command's exit message
        return exit_code(error) is not None or isinstance(error, ModelError)

    try:
        with ExitStack() as running:
            if not verbose:
                running.enter_context(quiet_console(reported, frozenset({"sample"})))
            running.enter_context(_progress_bars())
            if runner == "threads":  # the embedding tasks run in this process
                running.enter_context(embedder_warmed(cfg.embedder, work))
            if server.active:  # no heartbeats, as with Prefect's own temporary server
                running.enter_context(
                    temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
                )
            outcome = run_audit(cfg, str(db), str(out_dir) if out_dir else None, runner)
    except (AuditIncomplete, ModelError) as stopped:
        # A model error here is the embedder's (or one that outlived every retry): the arms'
        # own permanent failures arrive as AuditIncomplete, once every other arm is done.
        # Prefect keeps the flow run's exception (as its result) until exit; without its
        # traceback, the flow's frames and the record connection they hold are freed now.
        stopped.__traceback__ = None
        print_results(db, "latest")
        if isinstance(stopped, AuditIncomplete):
            raise
        then = (
            "fix the cause and run the same command again"
            if isinstance(stopped, PermanentModelError)
            else "run the same command again to resume"
        )
        raise fail(
            ExitCode.INCOMPLETE, f"{stopped}. Every output sampled so far is kept; {then}."
        ) from None
    results = print_results(db, outcome.run_id)
    for fmt, path in outcome.reports.items():
        out.print(f"{fmt} report: {path}")
    check_gates(results, fail_on_control_rejection, require_equivalent or [])


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

    from flows.scheduled import scheduled_audit

    cfg, _ = load_audit(config, set_)
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
            "db": str(db.resolve()),
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
