"""A prepared run carried out: from the record alone, or by the audit flow after a head start.

The command line parses, calls :func:`run_prepared` and prints; what the run says on the way
goes through ``say`` (the audit's name, then a line), and what it shows while the flow runs
(progress, a console without Prefect's tracebacks) is entered through ``around_flow``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path

from dbpa.llm import SamplingStopped, stopping

from ._from_record import decide_from_record
from ._head_start import HeadStart
from ._prepare import Prepared
from ._server import PrefectServer, TemporaryServerError
from ._warm import embedder_warmed, warm_up


@dataclass(frozen=True)
class Launched:
    """How a run ended: its id and its reports."""

    run_id: str
    reports: dict[str, str]
    """format -> path of the written report."""
    from_record: bool
    """Decided from the record, without Prefect."""


Say = Callable[[str, str], None]
"""``say(audit, line)``: a line about the run of ``audit`` for the user."""


def run_prepared(
    prepared: Prepared,
    server: PrefectServer,
    out_dir: Path | None,
    runner: str,
    *,
    say: Say,
    warn: Callable[[str], None],
    around_flow: Callable[[], AbstractContextManager[object]],
) -> Launched:
    """Carry out ``prepared``: a finished audit with Prefect's temporary server is decided
    from the record (the server stopped); anything else warms up what it needs, samples a
    head start while the server starts, then runs the audit flow on ``prepared.plan``.

    Raises ``TemporaryServerError`` (saying how many outputs the head start kept) when the
    server does not start, ``SamplingStopped`` when the model requests were stopped (a
    signal) before the flow, and the flow's own errors (``AuditIncomplete``, model errors).
    The run's turn at writing the record ends with it, however it ends.
    """
    try:
        return _carry_out(prepared, server, out_dir, runner, say, warn, around_flow)
    finally:
        prepared.release()


def _carry_out(
    prepared: Prepared,
    server: PrefectServer,
    out_dir: Path | None,
    runner: str,
    say: Say,
    warn: Callable[[str], None],
    around_flow: Callable[[], AbstractContextManager[object]],
) -> Launched:
    cfg, db = prepared.config, prepared.db
    if prepared.finished and _without_prefect(server):
        say(
            cfg.name,
            f"every output, vector and test is in {db}: deciding and reporting "
            "from the record (Prefect not started)",
        )
        recorded = decide_from_record(cfg, prepared.plan, db, out_dir, warn)  # type: ignore[arg-type]
        return Launched(recorded.run_id, recorded.reports, from_record=True)
    from dbpa.spend import is_capped

    warm_up(prepared.work)
    # Uncapped runs only: the flow holds a capped run's requests to its cap from the start.
    wanted = prepared.work.models and not is_capped(cfg)
    head_start = HeadStart(prepared.ready, db) if wanted else None
    try:
        from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

        from flows.audit import run_audit

        server.confirm()
        plan = prepared.plan
        say(
            cfg.name,
            f"{len(plan.tests)} tests"
            f"{f' over {len(plan.prompt_tests)} prompt tests' if plan.set_members else ''}, "
            f"{len(plan.arms)} arms x "
            f"k={'up to ' if cfg.sequential else ''}{cfg.k}; record: {db}"
            if plan is not None
            else f"paraphrases first, then k={cfg.k}; record: {db}",
        )
        server.ready()
    except TemporaryServerError as exc:
        kept = head_start.stop() if head_start is not None else 0
        if kept:
            raise TemporaryServerError(
                f"{exc}\nThe {kept} outputs sampled meanwhile are kept in {db}: the next run "
                "asks only for the others."
            ) from None
        raise
    finally:
        if head_start is not None:
            head_start.stop()
    with ExitStack() as running:
        running.enter_context(around_flow())
        if runner == "threads":  # the embedding tasks run in this process
            running.enter_context(embedder_warmed(cfg.embedder, prepared.work))
        if server.active:  # no heartbeats, as with Prefect's own temporary server
            running.enter_context(
                temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
            )
        if stopping():  # a signal's exception was dropped on its way (see dbpa.cli._signals)
            raise SamplingStopped("the run is stopping: its audit flow was not started")
        outcome = run_audit(cfg, str(db), str(out_dir) if out_dir else None, runner, plan=plan)
    return Launched(outcome.run_id, outcome.reports, from_record=False)


def _without_prefect(server: PrefectServer) -> bool:
    """Whether a run with nothing but bookkeeping left can skip Prefect: only with Prefect's
    temporary server (stopped here), never with a configured server whose UI should see it."""
    server.confirm()
    if not server.active:
        return False
    server.stop()
    return True
