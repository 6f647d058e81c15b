"""The audit flow: expand the family -> sample -> embed -> test -> correct -> report.

Every step reads what DuckDB already holds and does only the rest, so a re-run of a
finished audit makes no model call, a killed run resumes where it stopped, and a run
with more perturbations or other analysis settings re-uses every stored sample and
embedding. Work is batched so a family of thousands of perturbations makes hundreds
of task runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prefect import flow, get_run_logger, tags
from prefect.context import TagsContext
from prefect.futures import PrefectFuture, as_completed
from prefect.runtime import flow_run
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)
from prefect.task_runners import ThreadPoolTaskRunner

import storage
from dbpa.arms import Arm
from dbpa.config import AuditConfig
from dbpa.plan import AuditPlan, PlannedTest, plan_audit
from dbpa.progress import Counter
from flows._progress import ProgressArtifact
from tasks.correct import correct_family
from tasks.embed import embed_texts
from tasks.report import write_reports
from tasks.sample import ArmJob, SampleOutcome, sample_arms
from tasks.test import TestJob, run_tests

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


def _batches(items: Sequence[Any], max_batches: int, min_size: int = 1) -> list[list[Any]]:
    size = max(min_size, math.ceil(len(items) / max_batches))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _flow_run_name() -> str:
    config = flow_run.parameters["config"]
    name = config.name if isinstance(config, AuditConfig) else config["name"]
    return f"audit {name}"


def _versions() -> dict[str, str]:
    found = {}
    for package in (
        "dbpa",
        "prefect",
        "litellm",
        "duckdb",
        "numpy",
        "scipy",
        "sentence-transformers",
    ):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def _run_id(config: AuditConfig) -> str:
    """Stable across retries of one flow run, unique across flow runs."""
    started = flow_run.scheduled_start_time or datetime.now(UTC)
    suffix = str(flow_run.id or "local")[:8]
    return f"{config.name}-{started:%Y%m%d-%H%M%S}-{suffix}"


def _label(arm_labels: dict[str, str], arms: Sequence[Arm]) -> str:
    first = arm_labels[arms[0].arm_id]
    return first if len(arms) == 1 else f"{len(arms)} arms from {first}"


@flow(name="dbpa-audit", flow_run_name=_flow_run_name, log_prints=True)
def audit(config: AuditConfig, db: str = "dbpa.duckdb", out: str | None = None) -> AuditOutcome:
    """Run (or resume) an audit and record everything in the DuckDB file ``db``."""
    logger = get_run_logger()
    plan = plan_audit(config)
    # Task runs carry no tags (the flow run does, see ``flow_run_tags``): Prefect asks the
    # server for a concurrency slot before every tagged task run, and the ephemeral server
    # answers 503 now and then, after which the task run waits 2 s.
    untagged = TagsContext(current_tags=set())
    with storage.Store(db) as store, untagged, ExitStack() as background:
        storage.register(store)
        run_id = _run_id(config)
        try:
            if crashed := store.mark_interrupted_runs():
                logger.warning("%d earlier run(s) had been interrupted; marked crashed", crashed)
            store.start_run(
                run_id,
                audit=config.name,
                config=config.model_dump(mode="json"),
                config_hash=config.fingerprint(),
                epoch=config.epoch,
                flow_run_id=str(flow_run.id) if flow_run.id else None,
                versions=_versions(),
            )
            store.add_arms(plan.arms)
            store.add_family(run_id, [t.row() for t in plan.tests])
            logger.info(
                "run %s: %d models x %d perturbations, %d arms of k=%d",
                run_id,
                len(plan.families),
                len(config.family),
                len(plan.arms),
                plan.k,
            )
            downstream = _Downstream(plan, store, config)
            with _timed("sampling"):
                failures = _sample(plan, store, db, run_id, background, downstream.arms_sampled)
            with _timed("embedding and testing the rest"):
                downstream.arms_sampled({a.arm_id for a in plan.arms} - set(failures), final=True)
            downstream.log_summary()
            with _timed("correcting"):
                _correct(plan, store, config, run_id)
            status = "incomplete" if failures else "completed"
            message = _failure_message(plan, failures) if failures else None
            store.finish_run(run_id, status, message)
            with _timed("reporting"):
                reports = write_reports(db, run_id, out)
        except BaseException as exc:
            store.finish_run(run_id, "failed", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            storage.unregister(store)
    if failures:
        logger.error(message)
        raise AuditIncomplete(message)
    logger.info("run %s completed; report: %s", run_id, reports["html"])
    return AuditOutcome(
        run_id=run_id, status=status, db=str(store.path), failures=failures, reports=reports
    )


# ---------------------------------------------------------------------- phases


def _sample(
    plan: AuditPlan,
    store: storage.Store,
    db: str,
    run_id: str,
    background: ExitStack,
    arms_sampled: Callable[[set[str]], object],
) -> dict[str, str]:
    """Fill every arm to k outputs; returns the arms that failed permanently.

    ``arms_sampled`` gets the complete arms of each sampling task run as it ends, on this
    thread, while the other task runs go on sampling. An error it raises, or a task run's
    transient failure that outlived every retry, is raised once every task run has ended,
    so no output sampled meanwhile is lost. The progress artifact's last update is left to
    finish in ``background``.
    """
    logger = get_run_logger()
    present = store.sample_indices([a.arm_id for a in plan.arms])
    have = {a: sum(1 for i in idx if i < plan.k) for a, idx in present.items()}
    todo = [a for a in plan.arms if have[a.arm_id] < plan.k]
    total = plan.k * len(plan.arms)
    counter = Counter("sample", total, done=sum(have.values()), unit="outputs")
    if not todo:
        logger.info("sampling: all %d outputs already stored", total)
        return {}
    logger.info("sampling %d outputs for %d arms", total - counter.done, len(todo))
    labels = _arm_labels(plan)
    batches: dict[PrefectFuture[SampleOutcome], set[str]] = {}
    by_model: dict[str, list[Arm]] = {}
    for arm in todo:
        by_model.setdefault(arm.model.label, []).append(arm)
    failures: dict[str, str] = {}
    deferred: Exception | None = None
    with ThreadPoolTaskRunner(max_workers=SAMPLING_THREADS) as runner:
        for arms in by_model.values():
            for batch in _batches(arms, SAMPLE_TASK_RUNS):
                jobs = [ArmJob(arm=a, seed=plan.arm_seed(a)) for a in batch]
                params = {
                    "db": db,
                    "jobs": jobs,
                    "k": plan.k,
                    "label": _label(labels, batch),
                    "counter": counter,
                }
                batches[runner.submit(sample_arms, params)] = {a.arm_id for a in batch}
        progress = ProgressArtifact(
            "sampling-progress", f"Outputs sampled for run {run_id}", counter
        )
        background.callback(progress.stop)
        for future in as_completed(list(batches)):
            try:
                outcome = future.result()
                failures.update(outcome.failures)
                if deferred is None:
                    arms_sampled(batches[future] - set(outcome.failures))
            except Exception as exc:
                deferred = deferred or exc
    for arm_id, reason in failures.items():
        arm = next(a for a in plan.arms if a.arm_id == arm_id)
        store.add_arm_failure(run_id, arm_id, arm.model.model, reason)
        logger.error("arm %s failed: %s", labels[arm_id], reason)
    if deferred is not None:
        raise deferred
    return failures


class _Downstream:
    """Embedding and testing of the arms whose sampling is over, while others still sample.

    Each call of :meth:`arms_sampled` embeds the new arms' outputs that have no vector yet
    and runs the tests they make ready; results already stored are never computed again.
    Tests wait until at least ``TESTS_PER_TASK_RUN`` are ready (each task run costs Prefect
    work on the flow's thread while sampling needs it) except in the ``final`` call.
    """

    def __init__(self, plan: AuditPlan, store: storage.Store, config: AuditConfig) -> None:
        self._plan, self._store, self._config = plan, store, config
        self._sampled: set[str] = set()
        self._counters: tuple[Counter, Counter] | None = None
        self._texts = self._tests = 0
        self._early_texts = self._early_tests = 0

    def arms_sampled(self, arm_ids: set[str], final: bool = False) -> None:
        """Embed and test what ``arm_ids`` (arms holding all k outputs) make possible."""
        if self._counters is None:  # created on first use: their bars follow sampling's
            stored = self._store.existing_tests(t.test_id for t in self._plan.tests)
            self._counters = (
                Counter("embed", len(self._plan.arms), unit="arms"),
                Counter("test", len(self._plan.tests), len(stored), unit="tests"),
            )
        embedded, tested = self._counters
        new = arm_ids - self._sampled
        texts = _embed(self._plan, self._store, self._config, new) if new else 0
        self._sampled |= new
        embedded.add(len(new))
        min_tests = 1 if final else TESTS_PER_TASK_RUN
        tests = _test(self._plan, self._store, self._config, self._sampled, tested, min_tests)
        self._texts, self._tests = self._texts + texts, self._tests + tests
        if not final:
            self._early_texts, self._early_tests = self._texts, self._tests

    def log_summary(self) -> None:
        """Say what was computed, and how much of it while sampling went on."""
        get_run_logger().info(
            "embedded %d new distinct outputs and ran %d permutation tests "
            "(%d and %d of them while sampling); B=%d, omega=%s",
            self._texts,
            self._tests,
            self._early_texts,
            self._early_tests,
            self._config.n_permutations,
            self._config.omega,
        )


def _embed(plan: AuditPlan, store: storage.Store, config: AuditConfig, arms: set[str]) -> int:
    """Embed every stored output of ``arms`` that has no vector yet; returns how many
    distinct texts were embedded."""
    texts = store.arm_texts(sorted(arms), plan.k)
    missing = store.missing_embeddings(plan.embedder, texts.text_hash)
    unique = texts[texts.text_hash.isin(missing)].drop_duplicates("text_hash")
    hashes, contents = unique.text_hash.tolist(), unique.text.tolist()
    for start in range(0, len(contents), EMBED_BATCH):
        chunk = contents[start : start + EMBED_BATCH]
        label = f"{start + 1}-{start + len(chunk)} of {len(contents)} texts"
        batch = embed_texts.submit(chunk, config.embedder, label).result()
        store.add_embeddings(plan.embedder, hashes[start : start + len(chunk)], batch)
    return len(contents)


def _test(
    plan: AuditPlan,
    store: storage.Store,
    config: AuditConfig,
    sampled: set[str],
    counter: Counter,
    min_tests: int,
) -> int:
    """Run the planned tests whose arms are all ``sampled`` (and embedded) and whose result is
    not stored, when there are at least ``min_tests``; returns how many ran."""
    ready = [t for t in plan.tests if {t.original.arm_id, t.perturbed.arm_id} <= sampled]
    done = store.existing_tests(t.test_id for t in ready)
    todo = [t for t in ready if t.test_id not in done]
    if not todo or len(todo) < min_tests:
        return 0
    vectors = store.arms_vectors(
        sorted({a for t in todo for a in (t.original.arm_id, t.perturbed.arm_id)}),
        plan.embedder,
        plan.k,
    )
    futures = []
    for batch in _batches(todo, TEST_TASK_RUNS, TESTS_PER_TASK_RUN):
        jobs = [
            TestJob(
                test_id=t.test_id,
                original_arm=t.original.arm_id,
                perturbed_arm=t.perturbed.arm_id,
                original=vectors[t.original.arm_id],
                perturbed=vectors[t.perturbed.arm_id],
            )
            for t in batch
        ]
        futures.append(run_tests.submit(jobs, plan.embedder, config.analysis, _test_label(batch)))
    for future in futures:
        records = future.result()
        store.add_tests(records)
        counter.add(len(records))
    return len(todo)


def _test_label(batch: Sequence[PlannedTest]) -> str:
    first = f"{batch[0].perturbation.id} ({batch[0].family})"
    return first if len(batch) == 1 else f"{len(batch)} perturbations from {first}"


def _correct(plan: AuditPlan, store: storage.Store, config: AuditConfig, run_id: str) -> None:
    """Adjust each family's p-values and store the decisions."""
    stored = store.tests([t.test_id for t in plan.tests]).set_index("test_id").p_value.to_dict()
    for family in plan.families:
        members = [t for t in plan.tests if t.family == family]
        p_values = {t.perturbation.id: stored.get(t.test_id) for t in members}
        decisions = correct_family(family, p_values, config.analysis)
        store.add_corrections(run_id, family, config.correction, config.alpha, decisions)


def _arm_labels(plan: AuditPlan) -> dict[str, str]:
    labels = {}
    for t in plan.tests:
        labels.setdefault(t.original.arm_id, f"original ({t.family})")
        labels.setdefault(t.perturbed.arm_id, f"{t.perturbation.id} ({t.family})")
    return labels


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
    config: AuditConfig, db: str = "dbpa.duckdb", out: str | None = None, runner: str = "threads"
) -> AuditOutcome:
    """Run the audit flow as ``dbpa run`` does: its flow run tagged with the audit and its
    models, its compute tasks on ``runner`` (see :func:`audit_with_runner`).

    With no Prefect server configured (the ephemeral default) the flow run sends no
    heartbeats: the server lives and dies with this process, so nothing would watch them,
    and the end of every flow run would wait up to 1 s for the heartbeat thread.
    """
    flow = audit_with_runner(runner)
    quiet = {} if PREFECT_API_URL.value() else {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
    with tags(*flow_run_tags(config)), temporary_settings(updates=quiet):
        return flow(config=config, db=db, out=out)  # type: ignore[no-any-return]
