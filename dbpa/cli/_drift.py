"""``dbpa drift``: an audit's arms monitored over its epochs (or, with ``--per-tick``, one
epoch tested against earlier ones) from the record alone; ``dbpa monitor reset``: a new
baseline after an intended change."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._common import DEFAULT_DB, DbOption, ExitCode, fail, open_record, out, print_whole

if TYPE_CHECKING:
    from dbpa.drift import Comparison, DriftResult, MonitorReplay


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
    per_tick: Annotated[
        bool,
        typer.Option(
            "--per-tick",
            help="Permutation-test EPOCH against the previous and the baseline epoch "
            "instead of monitoring every epoch (--baseline and --against need it).",
        ),
    ] = False,
    tolerance: Annotated[
        float | None,
        typer.Option(
            help="Monitor: alarm only for changes larger than this share of answers (default: "
            "the config's monitor.tolerance, 0 unless set)."
        ),
    ] = None,
    conformal: Annotated[
        str | None,
        typer.Option(
            help="Monitor: outputs, ticks or both conformal processes (default: the config's "
            "monitor.conformal)."
        ),
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option(
            help="Monitor: prompts (pool every prompt's arm of a perturbation and model) or "
            "arms (each arm alone); default: the config's monitor.pool."
        ),
    ] = None,
) -> None:
    """Monitor every arm of an audit over its epochs, or test one epoch against earlier ones.

    The monitor compares each arm with its baseline, its alarms valid over any number of
    ticks; ``--per-tick`` permutation-tests one epoch against the previous and the baseline
    epoch. Uses the stored embeddings only: no model call, nothing written.
    """
    from dbpa.drift import (
        AGAINST,
        POOLS,
        plan_drift,
        read_epochs,
        replay_monitor,
        run_comparison,
    )
    from dbpa.stats import MONITOR_CONFORMAL

    if fmt not in ("table", "json"):
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose table or json")
    if per_tick:
        given = {"--tolerance": tolerance, "--conformal": conformal, "--pool": pool}
        option = next((name for name, value in given.items() if value is not None), None)
        if option is not None:
            raise fail(
                ExitCode.BAD_INPUT,
                f"{option}: only without --per-tick; it sets the monitor, which --per-tick "
                "does not run",
            )
    else:
        if baseline != "first" or against:
            option = "--baseline" if baseline != "first" else "--against"
            raise fail(
                ExitCode.BAD_INPUT,
                f"{option}: only with --per-tick; the monitor compares every arm with its "
                "baseline (the first epoch, or the one set by dbpa monitor reset)",
            )
        if tolerance is not None and not 0.0 <= tolerance < 1.0:
            raise fail(ExitCode.BAD_INPUT, f"--tolerance: a share in [0, 1), got {tolerance}")
        if conformal is not None and conformal not in MONITOR_CONFORMAL:
            choices = ", ".join(MONITOR_CONFORMAL)
            raise fail(
                ExitCode.BAD_INPUT, f"--conformal: unknown {conformal!r}; choose one of {choices}"
            )
        if pool is not None and pool not in POOLS:
            raise fail(
                ExitCode.BAD_INPUT, f"--pool: unknown {pool!r}; choose one of {', '.join(POOLS)}"
            )
        with open_record(db) as store:
            replay = replay_monitor(
                store, audit, epoch=epoch, tolerance=tolerance, conformal=conformal, pool=pool
            )
        if fmt == "json":
            sys.stdout.write(json.dumps(_monitor_json(replay), indent=2) + "\n")
        else:
            _print_monitor(replay)
        return
    with open_record(db) as store:
        comparisons = plan_drift(
            audit,
            read_epochs(store, audit),
            epoch=epoch,
            baseline=baseline,
            against=against or AGAINST,
        )
        found = [(c, *run_comparison(store, c)) for c in comparisons]
    if fmt == "json":
        sys.stdout.write(json.dumps([_drift_json(*f) for f in found], indent=2) + "\n")
        return
    if not found:
        out.print(f"{audit}: a single epoch is recorded; nothing to compare yet")
    for comparison, results, skipped in found:
        _print_drift(comparison, results, skipped)


def monitor_reset(
    audit: Annotated[str, typer.Argument(metavar="AUDIT", help="Audit name (the config's name).")],
    arm: Annotated[
        str | None,
        typer.Argument(
            metavar="ARM",
            help="The arm's label as dbpa drift shows it (over a set of prompts, the series "
            "of a perturbation's arms: all of them restart).",
        ),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Reset every arm of the audit.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Start a new baseline at the latest epoch for ARM (or every arm) after a change.

    Meant for an intended change; the evidence recorded so far stays in the record.
    """
    from dbpa.drift import ALL_SERIES, read_epochs, replay_monitor
    from storage import Store

    if (arm is None) == (not every):
        raise fail(ExitCode.BAD_INPUT, "ARM: name one arm, or reset every arm with --all")
    with Store(db, serve_readers=False) as store:
        epochs = read_epochs(store, audit)
        if not epochs:
            raise fail(ExitCode.BAD_INPUT, f"AUDIT: no completed run of {audit!r} is recorded")
        if arm is not None:
            labels = sorted({t.series for t in replay_monitor(store, audit).ticks})
            if arm not in labels:
                listed = "; ".join(labels) or "none monitored yet"
                raise fail(ExitCode.BAD_INPUT, f"ARM: {audit} has no arm {arm!r}; arms: {listed}")
        store.add_monitor_reset(audit, arm or ALL_SERIES, epochs[-1].epoch)
    out.print(f"{audit}: {arm or 'every arm'} starts a new baseline at epoch {epochs[-1].epoch}")


def _monitor_json(replay: MonitorReplay) -> dict[str, Any]:
    return {
        "audit": replay.audit,
        "alpha": replay.alpha,
        "arms": replay.arms,
        "tolerance": replay.tolerance,
        "form": replay.form,
        "conformal": replay.conformal,
        "pool": replay.pool,
        "design": replay.design,
        "series": replay.members,
        "latest": [
            {
                "arm": t.series,
                "arms": t.arms,
                "arm_id": t.arm_id,
                "baseline_epoch": t.baseline_epoch,
                "epoch": t.epoch,
                "ticks": t.state.ticks,
                "e_value": t.state.e_value,
                "threshold": t.state.threshold,
                "alarm": t.state.alarm,
                "alarm_tick": t.state.alarm_tick,
            }
            for t in replay.latest()
        ],
        "skipped": replay.skipped,
    }


def _print_monitor(replay: MonitorReplay) -> None:
    latest = replay.latest()
    if not latest:
        out.print(f"{replay.audit}: no epoch after the baseline is recorded; nothing to monitor")
        return
    out.print(
        f"{replay.audit}: drift monitor of {replay.design} (tolerance {replay.tolerance:g}, "
        f"conformal {replay.conformal})",
        highlight=False,
        markup=False,
    )
    rows = [
        [
            t.series,
            f"{t.state.e_value:.3g}",
            str(t.state.ticks),
            str(t.state.alarm_tick) if t.state.alarm_tick else "-",
            "alarm" if t.state.alarm else "no alarm",
            t.baseline_epoch,
        ]
        for t in latest
    ]
    numeric = [(name, True, "right") for name in ("e-value", "ticks", "alarm at")]
    columns = [
        ("arm", True, "left"),
        *numeric,
        ("monitor", True, "left"),
        ("baseline", True, "left"),
    ]
    print_whole(columns, rows, styles={"alarm": "red"})
    for label, reason in replay.skipped.items():
        out.print(f"not monitored: {label}: {reason}", highlight=False)


def _drift_json(
    comparison: Comparison, results: Sequence[DriftResult], skipped: dict[str, str]
) -> dict[str, Any]:
    c = comparison
    return {
        "audit": c.audit,
        "epoch": c.epoch,
        "against": c.against,
        "reference_epoch": c.reference_epoch,
        "k": c.k,
        "correction": c.config.analysis.correction,
        "alpha": c.config.analysis.alpha,
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


def _print_drift(
    comparison: Comparison, results: Sequence[DriftResult], skipped: dict[str, str]
) -> None:
    c, analysis = comparison, comparison.config.analysis
    out.print(
        f"{c.audit}: epoch {c.epoch} against the {c.against} epoch {c.reference_epoch} "
        f"({analysis.correction} at alpha={analysis.alpha}, k={c.k}, "
        f"B={analysis.n_permutations})",
        highlight=False,
        markup=False,
    )
    rows = [
        [
            r.job.label,
            f"{r.record.statistic:.3f}",
            f"{r.record.effect:+.3f}",
            f"{r.record.p_value:.4f}",
            f"{r.decision.adjusted_p:.4f}",
            "changed" if r.decision.reject else "no change",
        ]
        for r in results
    ]
    numeric = [(name, True, "right") for name in ("omega", "effect", "p", "adj. p")]
    columns = [("arm", True, "left"), *numeric, ("decision", True, "left")]
    print_whole(columns, rows, styles={"changed": "red"})
    for label, reason in skipped.items():
        out.print(f"not tested: {label}: {reason}", highlight=False)
