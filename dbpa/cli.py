"""The ``dbpa`` command.

Exit codes: 0 success; 1 the audit ran but could not finish (a model failed
permanently: the message names it, all other work is kept); 2 bad input (file, field
and reason); 3 ``--fail-on-control-rejection`` and a control perturbation was rejected.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dbpa._env import configure

configure()

app = typer.Typer(
    name="dbpa",
    help="Statistical robustness audits for LLMs (distribution-based perturbation analysis).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()

EXIT_OK, EXIT_INCOMPLETE, EXIT_BAD_INPUT, EXIT_CONTROL_REJECTED = 0, 1, 2, 3

DbOption = Annotated[Path, typer.Option("--db", help="DuckDB file of the audit record.")]
DEFAULT_DB = Path("dbpa.duckdb")
SetOption = Annotated[list[str] | None, typer.Option("--set", help="Override KEY=VALUE.")]
ReportDirOption = Annotated[
    Path | None,
    typer.Option("--out", help="Directory for the reports (default: reports/ next to the db)."),
]
RunnerOption = Annotated[
    str, typer.Option(help="Task runner for the compute: threads, dask or dask=ADDRESS.")
]


def _fail(code: int, message: str) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def _overrides(pairs: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as YAML (numbers, booleans, lists)."""
    import yaml

    found: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise _fail(EXIT_BAD_INPUT, f"--set {pair!r}: expected KEY=VALUE (e.g. k=30)")
        found[key] = yaml.safe_load(value)
    return found


def _load(config: Path, pairs: list[str] | None = None) -> Any:
    """The validated config and its plan, or exit 2 with file, field and reason."""
    from dbpa.config import ConfigError, load_config
    from dbpa.plan import plan_audit

    try:
        cfg = load_config(config, _overrides(pairs))
        plan = plan_audit(cfg)
    except ConfigError as exc:
        raise _fail(EXIT_BAD_INPUT, str(exc)) from None
    except ValueError as exc:
        raise _fail(EXIT_BAD_INPUT, f"{config}: {exc}") from None
    return cfg, plan


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
    ids: dict[str, Any] = {}

    def show(update: progress.Progress) -> None:
        if update.phase not in ids:
            ids[update.phase] = bars.add_task(update.phase, total=update.total, unit=update.unit)
        bars.update(ids[update.phase], completed=update.done, total=update.total)

    with bars, progress.listen(show):
        yield


@app.command()
def validate(
    config: Annotated[Path, typer.Argument(help="Audit config (YAML).")],
    set_: SetOption = None,
) -> None:
    """Check a config and show what it would sample and test."""
    cfg, plan = _load(config, set_)
    out.print(
        f"[green]valid[/]: {cfg.name}: {len(plan.families)} model(s) x {len(cfg.family)} "
        f"perturbations = {len(plan.tests)} tests, {len(plan.arms)} arms x k={cfg.k} "
        f"= {len(plan.arms) * cfg.k} outputs; omega={cfg.omega}, B={cfg.n_permutations}, "
        f"{cfg.correction} at alpha={cfg.alpha}"
    )
    table = Table("id", "kind", "label", "description")
    for p in cfg.family:
        table.add_row(p.id, p.kind, p.label or "", p.description)
    out.print(table)


@app.command()
def run(
    config: Annotated[Path, typer.Argument(help="Audit config (YAML).")],
    db: DbOption = DEFAULT_DB,
    out_dir: ReportDirOption = None,
    set_: SetOption = None,
    fail_on_control_rejection: Annotated[
        bool, typer.Option(help="Exit 3 when a control perturbation is rejected (a CI gate).")
    ] = False,
    runner: RunnerOption = "threads",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Run (or resume) an audit; re-running the same command resumes it."""
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    cfg, plan = _load(config, set_)
    from flows.audit import AuditIncomplete, run_audit
    from storage import DatabaseInUseError

    err.print(
        f"[bold]{cfg.name}[/]: {len(plan.tests)} tests, {len(plan.arms)} arms x k={cfg.k}; "
        f"record: {db}"
    )
    try:
        with _progress_bars():
            outcome = run_audit(cfg, str(db), str(out_dir) if out_dir else None, runner)
    except AuditIncomplete as exc:
        _print_results(db, "latest")
        raise _fail(EXIT_INCOMPLETE, str(exc)) from None
    except DatabaseInUseError as exc:
        raise _fail(EXIT_INCOMPLETE, str(exc)) from None
    except ValueError as exc:
        raise _fail(EXIT_BAD_INPUT, str(exc)) from None
    rejected_controls = _print_results(db, outcome.run_id)
    for fmt, path in outcome.reports.items():
        out.print(f"{fmt} report: {path}")
    if fail_on_control_rejection and rejected_controls:
        raise _fail(
            EXIT_CONTROL_REJECTED,
            f"{rejected_controls} control perturbation(s) changed the output distribution",
        )


def _cell(value: Any) -> str:
    """A table cell from a DataFrame value; missing values (None, NaN) are blank."""
    return "" if value is None or value != value else str(value)


def _print_results(db: Path, run_id: str) -> int:
    """Print a run's table; returns how many control perturbations were rejected."""
    from dbpa.analysis import stars
    from storage import Store

    with Store(db, read_only=True) as store:
        row = store.run(run_id)
        df = store.results(row["run_id"])
    families = df.family.unique()
    table = Table(
        title=f"run {row['run_id']} ({row['status']})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,  # the box's blank divider alone separates columns: 30-character ids fit 80
    )
    if len(families) > 1:
        table.add_column("model", overflow="fold")
    table.add_column("perturbation", overflow="fold")
    table.add_column("label", no_wrap=True, min_width=7)
    for numeric in ("omega", "effect", "p", "adj. p"):
        table.add_column(numeric, justify="right", no_wrap=True, min_width=6)
    table.add_column("decision", no_wrap=True, min_width=9)
    for r in df.itertuples():
        first = [r.family] if len(families) > 1 else []
        if not r.tested:
            table.add_row(*first, r.perturbation_id, _cell(r.label), *"----", "not tested")
            continue
        table.add_row(
            *first,
            r.perturbation_id,
            _cell(r.label),
            f"{r.statistic:.3f}{stars(r.p_value)}",
            f"{r.effect:+.3f}",
            f"{r.p_value:.4f}",
            f"{r.adjusted_p:.4f}",
            "[red]changed[/]" if r.reject else "no change",
        )
    out.print(table)
    return int(((df.label == "control") & (df.reject == True)).sum())  # noqa: E712


@app.command()
def runs(db: DbOption = DEFAULT_DB) -> None:
    """List the runs recorded in the database."""

    with _read_store(db) as store:
        df = store.runs()
    table = Table("run", "audit", "status", "epoch", "started", "message")
    for r in df.itertuples():
        table.add_row(
            r.run_id,
            r.audit,
            r.status,
            r.epoch,
            f"{r.started_at:%Y-%m-%d %H:%M:%S}",
            _cell(r.message),
        )
    out.print(table)


@contextmanager
def _read_store(db: Path) -> Iterator[Any]:
    from storage import DatabaseInUseError, Store

    try:
        with Store(db, read_only=True) as store:
            yield store
    except FileNotFoundError as exc:
        raise _fail(EXIT_BAD_INPUT, str(exc)) from None
    except DatabaseInUseError as exc:
        raise _fail(EXIT_INCOMPLETE, str(exc)) from None


@app.command()
def results(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or 'latest'.")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
) -> None:
    """Show a run's per-perturbation results."""
    from storage import UnknownRunError

    if fmt not in ("table", "csv", "json"):
        raise _fail(EXIT_BAD_INPUT, f"--format: unknown {fmt!r}; choose table, csv or json")
    with _read_store(db) as store:
        try:
            row = store.run(run_id)
        except UnknownRunError as exc:
            raise _fail(EXIT_BAD_INPUT, str(exc)) from None
        df = store.results(row["run_id"])
    if fmt == "table":
        _print_results(db, row["run_id"])
    elif fmt == "csv":
        sys.stdout.write(df.to_csv(index=False))
    else:
        sys.stdout.write(json.dumps(json.loads(df.to_json(orient="records")), indent=2) + "\n")


@app.command()
def export(
    db: DbOption = DEFAULT_DB,
    table: Annotated[
        list[str] | None, typer.Option(help="Table to export (repeatable); default all.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="parquet or csv.")] = "parquet",
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for the files.")] = Path(
        "export"
    ),
) -> None:
    """Export tables of the audit record to Parquet or CSV."""
    from storage import EXPORTS

    with _read_store(db) as store:
        for name in table or list(EXPORTS):
            try:
                path = store.export(name, out_dir / f"{name}.{fmt}", fmt)
            except ValueError as exc:
                raise _fail(EXIT_BAD_INPUT, str(exc)) from None
            out.print(f"{name}: {path}")


@app.command()
def report(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or 'latest'.")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="html, md or json.")] = "html",
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="File to write (or a directory); default RUN.FORMAT in reports/ next to the db.",
        ),
    ] = None,
) -> None:
    """Regenerate a run's report from the record (no model call)."""
    from dbpa.report import RENDERERS, default_report_dir, gather, report_path
    from storage import UnknownRunError

    if fmt not in RENDERERS:
        raise _fail(EXIT_BAD_INPUT, f"--format: unknown {fmt!r}; choose {', '.join(RENDERERS)}")
    with _read_store(db) as store:
        try:
            data = gather(store, run_id)
        except UnknownRunError as exc:
            raise _fail(EXIT_BAD_INPUT, str(exc)) from None
    if out_path is None or out_path.is_dir():
        path = report_path(out_path or default_report_dir(db), data.run.run_id, fmt)
    else:
        path = out_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RENDERERS[fmt](data), encoding="utf-8")
    out.print(f"{fmt} report of run {data.run.run_id}: {path}", highlight=False)


@app.command()
def serve(
    config: Annotated[Path, typer.Argument(help="Audit config (YAML).")],
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
    from prefect.deployments.runner import EntrypointType

    from flows.scheduled import scheduled_audit

    cfg, _ = _load(config, set_)
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
            "overrides": _overrides(set_),
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
        raise _fail(EXIT_BAD_INPUT, f"--cron {cron!r}: {exc.errors()[0]['msg']}") from None
    api = PREFECT_API_URL.value()
    if not api:
        raise _fail(
            EXIT_BAD_INPUT,
            "no Prefect server: start one (prefect server start --host 127.0.0.1) and set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api",
        )
    with get_client(sync_client=True) as client:
        try:
            pool = client.read_deployment_by_name(deployment).work_pool_name
        except ObjectNotFound:
            pool = None
    if pool:
        raise _fail(
            EXIT_BAD_INPUT,
            f"deployment {deployment} runs on the work pool {pool!r} (deployments/prefect.yaml); "
            "serving would replace it: choose another --name",
        )
    return str(api)


@app.command()
def drift(
    audit: Annotated[str, typer.Argument(metavar="AUDIT", help="Audit name (the config's name).")],
    db: DbOption = DEFAULT_DB,
    epoch: Annotated[str, typer.Option(help="Epoch to test, or 'latest'.")] = "latest",
    baseline: Annotated[str, typer.Option(help="Baseline epoch, or 'first'.")] = "first",
    against: Annotated[
        list[str] | None,
        typer.Option(help="previous or baseline (repeatable; default both)."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Test an audit's epoch against the previous and the baseline epoch, arm by arm.

    Uses the stored embeddings only: no model call, nothing written.
    """
    from dbpa.config import ConfigError
    from dbpa.drift import AGAINST, DriftError, plan_drift, read_epochs, run_comparison

    if fmt not in ("table", "json"):
        raise _fail(EXIT_BAD_INPUT, f"--format: unknown {fmt!r}; choose table or json")
    with _read_store(db) as store:
        try:
            comparisons = plan_drift(
                audit,
                read_epochs(store, audit),
                epoch=epoch,
                baseline=baseline,
                against=against or AGAINST,
            )
        except (DriftError, ConfigError) as exc:
            raise _fail(EXIT_BAD_INPUT, str(exc)) from None
        found = [(c, *run_comparison(store, c)) for c in comparisons]
    if fmt == "json":
        sys.stdout.write(json.dumps([_drift_json(*f) for f in found], indent=2) + "\n")
        return
    if not found:
        out.print(f"{audit}: a single epoch is recorded; nothing to compare yet")
    for comparison, results, skipped in found:
        _print_drift(comparison, results, skipped)


def _drift_json(comparison: Any, results: Any, skipped: dict[str, str]) -> dict[str, Any]:
    c = comparison
    return {
        "audit": c.audit,
        "epoch": c.epoch,
        "against": c.against,
        "reference_epoch": c.reference_epoch,
        "k": c.k,
        "correction": c.config.correction,
        "alpha": c.config.alpha,
        "results": [
            {
                "family": r.job.family,
                "role": r.job.role,
                "arm": r.job.arm,
                "reference_arm": r.job.reference_arm,
                "test_id": r.job.test_id,
                "omega": r.record.statistic,
                "effect": r.record.effect,
                "p_value": r.record.p_value,
                "adjusted_p": r.decision.adjusted_p,
                "reject": r.decision.reject,
            }
            for r in results
        ],
        "skipped": skipped,
    }


def _print_drift(comparison: Any, results: Any, skipped: dict[str, str]) -> None:
    c = comparison
    table = Table(
        title=f"{c.audit}: epoch {c.epoch} against the {c.against} epoch {c.reference_epoch} "
        f"({c.config.correction} at alpha={c.config.alpha}, k={c.k}, "
        f"B={c.config.n_permutations})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("arm", overflow="fold")
    for numeric in ("omega", "effect", "p", "adj. p"):
        table.add_column(numeric, justify="right", no_wrap=True, min_width=6)
    table.add_column("decision", no_wrap=True, min_width=9)
    for r in results:
        table.add_row(
            r.job.label,
            f"{r.record.statistic:.3f}",
            f"{r.record.effect:+.3f}",
            f"{r.record.p_value:.4f}",
            f"{r.decision.adjusted_p:.4f}",
            "[red]changed[/]" if r.decision.reject else "no change",
        )
    out.print(table)
    for label, reason in skipped.items():
        out.print(f"not tested: {label}: {reason}", highlight=False)


if __name__ == "__main__":
    app()
