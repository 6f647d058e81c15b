"""The audit flow: expand the family -> sample -> embed -> test -> correct -> report.

Every step reads what DuckDB already holds and does only the rest, so a re-run of a
finished audit makes no model call, a killed run resumes where it stopped, and a run
with more perturbations or other analysis settings re-uses every stored sample and
embedding. Work is batched so a family of thousands of perturbations makes hundreds
of task runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.context import TagsContext
from prefect.runtime import flow_run
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)

import storage
from dbpa.config import AuditConfig
from dbpa.llm import PermanentModelError, SpendCap
from dbpa.plan import AuditPlan, plan_audit
from dbpa.spend import check_prices
from flows import record
from flows._analysis import ArmAnalysis, correct_families
from flows._batches import BatchedSampling, BatchesPending
from flows._sampling import (
    count_stored,
    requests_stopped_on_signal,
    sample_phase,
    sampled_meanwhile,
    spend_cap,
    stop_lifted_at_the_end,
)
from flows._sequential import Counters, SequentialOutcome, run_looks
from tasks.artifacts import artifact_key
from tasks.generate import generate_paraphrases
from tasks.report import write_reports

SAMPLE_TASK_RUNS = 32
"""Arms are batched into at most this many sampling task runs per model."""
TEST_TASK_RUNS = 16
"""Tests are batched into at most this many task runs (each costs tens of ms of Prefect work)."""
TESTS_PER_TASK_RUN = 50
"""Fewest tests per task run (one test takes a few ms at k=20, B=2000; the task run's own
Prefect work, results and cache record cost more than 50 of them: measured in the pipeline
benchmark, 100 tests took 1.3 s in 16 task runs and 0.6 s in 2)."""
EMBED_BATCH = 256
"""Texts per embedding task run."""
SAMPLING_THREADS = 8
"""Sampling task runs in flight at once; their arms sample concurrently, and the model's own
concurrency bound (``max_concurrency``) limits the requests."""


class AuditIncomplete(RuntimeError):
    """The audit ran, but some arms could not be sampled (a model failed permanently)."""


@dataclass(frozen=True)
class AuditOutcome:
    """How a run ended and where to find it."""

    run_id: str
    status: str
    """``completed`` or ``incomplete``."""
    db: str
    failures: dict[str, str] = field(default_factory=dict)
    """arm_id -> why it could not be sampled."""
    reports: dict[str, str] = field(default_factory=dict)
    """format -> path of the written report."""


@contextmanager
def _timed(phase: str) -> Iterator[None]:
    """Log how long a phase took."""
    start = time.perf_counter()
    yield
    get_run_logger().info("%s took %.1f s", phase, time.perf_counter() - start)


def _flow_run_name() -> str:
    config = flow_run.parameters["config"]
    name = config.name if isinstance(config, AuditConfig) else config["name"]
    return f"audit {name}"


def _run_id(config: AuditConfig) -> str:
    """Stable across retries of one flow run, unique across flow runs."""
    started = flow_run.scheduled_start_time or datetime.now(UTC)
    return record.new_run_id(config, started, str(flow_run.id or "local")[:8])


@flow(name="dbpa-audit", flow_run_name=_flow_run_name, log_prints=True)
def audit(
    config: AuditConfig,
    db: str = "dbpa.duckdb",
    out: str | None = None,
    publish: bool = True,
    batch_wait_s: float | None = None,
) -> AuditOutcome:
    """Run (or resume) an audit and record everything in the DuckDB file ``db``.

    (generate ->) plan -> sample -> embed -> test -> correct -> report. Paraphrases a model
    writes are generated (or read from the record) first, since the family depends on them.
    The arms of each sampling task run are embedded and tested as soon as it ends, while
    other arms still sample; the rest once sampling is over. With ``publish`` the outcome
    is shown in the Prefect UI (a scheduled tick publishes it itself, after drift).
    The arms of ``batch: true`` models are sampled by provider batches
    (``flows._batches``); ``batch_wait_s``: how long this flow run waits for them (None:
    until they are collected), after which it raises ``BatchesPending``.
    """
    logger = get_run_logger()
    plan = None if config.ungenerated else _plan_of(config)
    # Task runs carry no tags (the flow run does, see ``flow_run_tags``): Prefect asks the
    # server for a concurrency slot before every tagged task run, and the ephemeral server
    # answers 503 now and then, after which the task run waits 2 s.
    untagged = TagsContext(current_tags=set())
    stopping = requests_stopped_on_signal()  # exits first: before background work is joined
    run = stop_lifted_at_the_end()  # exits last: once background work is joined
    with run, storage.Store(db) as store, untagged, ExitStack() as background, stopping:
        storage.register(store)
        run_id = _run_id(config)
        try:
            if plan is None:
                ready = plan_audit(config.ready_part())
                check_prices(config, ready)
                cap = spend_cap(config, store, ready.arms)
                config = _generated(db, store, config, ready, cap)
                plan = plan_audit(config)
                check_prices(config, plan)
                if cap is not None:  # the arms of the generated paraphrases
                    counted = {a.arm_id for a in ready.arms}
                    count_stored(cap, store, [a for a in plan.arms if a.arm_id not in counted])
            else:
                check_prices(config, plan)
                cap = spend_cap(config, store, plan.arms)
            _start_run(store, plan, config, run_id)
            if config.sequential:
                outcome = run_looks(
                    plan,
                    config,
                    store,
                    run_id,
                    lambda look, analysis, counters: _sample_and_test(
                        look,
                        store,
                        config.model_copy(update={"analysis": analysis}),
                        db,
                        run_id,
                        background,
                        counters,
                        cap,
                        batch_wait_s,
                    ),
                    logger.info,
                )
                failures = outcome.failures
                _log_savings(outcome)
            else:
                outcome = None
                failures = _sample_and_test(
                    plan, store, config, db, run_id, background, cap=cap, batch_wait_s=batch_wait_s
                )
            with _timed("correcting"):
                correct_families(plan, store, config, run_id, outcome)
            status = "incomplete" if failures else "completed"
            message = _failure_message(plan, failures) if failures else None
            store.finish_run(run_id, status, message)
            with _timed("reporting"):
                reports = write_reports(db, run_id, out, publish)
        except BaseException as exc:
            waiting = isinstance(exc, BatchesPending)
            store.finish_run(
                run_id, "waiting" if waiting else "failed", f"{type(exc).__name__}: {exc}"
            )
            raise
        finally:
            storage.unregister(store)
    if failures:  # the engine logs it, with the flow run's failure
        raise AuditIncomplete(message)
    logger.info("run %s completed; report: %s", run_id, reports["html"])
    return AuditOutcome(
        run_id=run_id, status=status, db=str(store.path), failures=failures, reports=reports
    )


def _sample_and_test(
    plan: AuditPlan,
    store: storage.Store,
    config: AuditConfig,
    db: str,
    run_id: str,
    background: ExitStack,
    counters: Counters | None = None,
    cap: SpendCap | None = None,
    batch_wait_s: float | None = None,
) -> dict[str, str]:
    """Fill every arm of ``plan`` to k outputs, embed them and run the plan's tests (the
    arms of each sampling task run as it ends, the rest after); returns the arms that
    failed permanently. A sequential audit runs this once per look, its progress on the
    audit's ``counters``. Requests are held to the run's spend ``cap``. The arms of
    ``batch: true`` models are sent as provider batches first, and collected (waiting at
    most ``batch_wait_s``) once the other arms are sampled."""
    analysis = ArmAnalysis(
        plan,
        store,
        config,
        embed_batch=EMBED_BATCH,
        test_task_runs=TEST_TASK_RUNS,
        tests_per_task_run=TESTS_PER_TASK_RUN,
        counters=None if counters is None else (counters.embed, counters.test),
    )
    batched = BatchedSampling(plan, store, config.name, cap)
    if batched.arms:
        batched.submit()
    with _timed(f"sampling (k={plan.k})"):
        sampling = sample_phase(
            plan,
            store,
            db,
            run_id,
            SAMPLE_TASK_RUNS,
            SAMPLING_THREADS,
            artifact_key(config.name, "progress"),
            None if counters is None else counters.sample,
            cap,
        )
        for arm_ids in sampling.completed_arms(background):  # as each task run ends
            with sampling.holding_errors():  # raised by finish(), once all have ended
                analysis.embed_arms(arm_ids)
                analysis.test_ready(min_tests=TESTS_PER_TASK_RUN)
        failures = sampling.finish()
    if batched.arms:
        with _timed("waiting for provider batches"):
            failures |= batched.wait(batch_wait_s)
    early = analysis.tally()
    with _timed("embedding and testing the rest"):
        analysis.embed_arms(a.arm_id for a in plan.arms if a.arm_id not in failures)
        analysis.test_ready(min_tests=1)
        analysis.test_sets()
    analysis.log_summary(early)
    return failures


def _log_savings(outcome: SequentialOutcome) -> None:
    """Say where the tests stopped and what the design saved against fixed k."""
    reasons: dict[str, int] = {}
    for stop in outcome.stops.values():
        reasons[stop.reason] = reasons.get(stop.reason, 0) + 1
    saved = 1 - outcome.outputs / max(outcome.fixed_outputs, 1)
    get_run_logger().info(
        "sequential: %s; %d outputs per arm in all against %d at fixed k=%d (%.0f%% fewer)",
        ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())),
        outcome.outputs,
        outcome.fixed_outputs,
        outcome.design.k_max,
        100 * saved,
    )


def _generated(
    db: str, store: storage.Store, config: AuditConfig, ready: AuditPlan, cap: SpendCap | None
) -> AuditConfig:
    """``config`` with its paraphrases generated (or read from the record), while the arms
    that need no paraphrase are sampled (they wait for no generation); a generator that
    fails permanently stops the audit, with what was sampled kept. ``ready``: the plan of
    the part that needs no paraphrase; ``cap``: the run's spend cap."""
    with sampled_meanwhile(ready, store, db, SAMPLE_TASK_RUNS, SAMPLING_THREADS, cap):
        try:
            return generate_paraphrases(db, config)
        except PermanentModelError as exc:
            raise AuditIncomplete(
                f"the paraphrases could not be generated: {exc}. The outputs sampled meanwhile "
                "are kept; fix the cause and run the same command again."
            ) from None


def _start_run(store: storage.Store, plan: AuditPlan, config: AuditConfig, run_id: str) -> None:
    """Record the run, its arms and its family (marking runs left unfinished as crashed)."""
    logger = get_run_logger()
    flow_run_id = str(flow_run.id) if flow_run.id else None
    record.start_run(store, plan, config, run_id, flow_run_id, logger.warning)
    for note in config.budget.notes:
        logger.warning(note)
    logger.info(
        "run %s: %d models x %d perturbations, %d arms of k=%d",
        run_id,
        len(plan.families),
        len(config.family),
        len(plan.arms),
        plan.k,
    )


def _failure_message(plan: AuditPlan, failures: dict[str, str]) -> str:
    reasons = sorted(set(failures.values()))
    return (
        f"{len(failures)} of {len(plan.arms)} arms could not be sampled: {'; '.join(reasons)}. "
        "Every other output and result is kept; fix the cause and run the same command again."
    )


def flow_run_tags(config: AuditConfig) -> list[str]:
    """Tags for the flow runs of an audit of ``config``: its name and its models."""
    return [f"audit:{config.name}", *(f"model:{m.label}" for m in config.models)]


def audit_with_runner(runner: str = "threads") -> Any:
    """The audit flow with its compute tasks (embed, test) on the chosen task runner.

    ``threads`` (default): a thread pool in this process. ``dask``: a local Dask cluster
    on 127.0.0.1; ``dask=ADDRESS``: an existing cluster (e.g. ``tcp://10.0.0.5:8786``).
    Sampling always runs in this process, which stays the only DuckDB writer.
    """
    kind, _, address = runner.partition("=")
    if kind == "threads" and not address:
        return audit
    if kind == "dask":
        from prefect_dask import DaskTaskRunner

        if address:
            return audit.with_options(task_runner=DaskTaskRunner(address=address))
        cluster = {
            "n_workers": 2,
            "threads_per_worker": 1,
            "host": "127.0.0.1",
            "dashboard_address": None,
        }
        return audit.with_options(task_runner=DaskTaskRunner(cluster_kwargs=cluster))
    raise ValueError(f"runner: unknown {runner!r}; choose threads, dask or dask=ADDRESS")


def run_audit(
    config: AuditConfig,
    db: str = "dbpa.duckdb",
    out: str | None = None,
    runner: str = "threads",
    *,
    plan: AuditPlan | None = None,
) -> AuditOutcome:
    """Run the audit flow as ``dbpa run`` does: its flow run tagged with the audit and its
    models, its compute tasks on ``runner`` (see :func:`audit_with_runner`), on ``plan``
    when the caller has planned ``config`` already (it is not planned again).

    With no Prefect server configured (the ephemeral default) the flow run sends no
    heartbeats: the server lives and dies with this process, so nothing would watch them,
    and the end of every flow run would wait up to 1 s for the heartbeat thread.
    """
    flow = audit_with_runner(runner)
    quiet = {} if PREFECT_API_URL.value() else {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
    planned = _PLANNED.set((config, plan) if plan is not None else None)
    try:
        with tags(*flow_run_tags(config)), temporary_settings(updates=quiet):
            return flow(config=config, db=db, out=out)  # type: ignore[no-any-return]
    finally:
        _PLANNED.reset(planned)


_PLANNED: ContextVar[tuple[AuditConfig, AuditPlan] | None] = ContextVar(
    "dbpa_planned", default=None
)
"""The plan ``run_audit`` hands the flow it starts, with the config it is the plan of. A plan
is ten times the config's size, too much for a flow parameter (Prefect stores each one)."""


def _plan_of(config: AuditConfig) -> AuditPlan:
    """The plan the caller made of ``config``, else ``config`` planned now."""
    given = _PLANNED.get()
    if given is not None and given[0] == config:
        return given[1]
    return plan_audit(config)
