"""The audit's sample phase: every arm filled to k outputs, in task runs on a thread pool.

Sampling yields the complete arms of each of its task runs as that task run ends, so the
audit flow embeds and tests them while other arms still sample; an error of that early work
is held until every sampling task run has ended, so no output sampled meanwhile is lost.
Sampling always runs in the flow's process, the only DuckDB writer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from prefect import get_run_logger
from prefect.exceptions import ExternalSignal
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import ThreadPoolTaskRunner

import storage
from dbpa.arms import Arm
from dbpa.config import AuditConfig
from dbpa.llm import SpendCap, SpendCapReached, allow_requests, stop_requests
from dbpa.plan import AuditPlan
from dbpa.progress import Counter
from dbpa.spend import model_cap_keys
from flows._progress import ProgressArtifact
from tasks.sample import ArmJob, ArmsFailed, SampleOutcome, sample_arms


def batches(items: Sequence[Any], max_batches: int, min_size: int = 1) -> list[list[Any]]:
    """``items`` in at most ``max_batches`` runs of equal size (at least ``min_size``)."""
    size = max(min_size, math.ceil(len(items) / max_batches))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


class Sampling:
    """The arms still short of k outputs, sampled in task runs on a pool of ``threads``.

    Made by :func:`sample_phase`. :meth:`completed_arms` starts the task runs and yields
    each one's complete arms as it ends; :meth:`finish` records the arms that failed
    permanently and raises the first error held meanwhile.
    """

    def __init__(
        self,
        plan: AuditPlan,
        store: storage.Store,
        db: str,
        run_id: str,
        todo: list[Arm],
        counter: Counter,
        task_runs: int,
        threads: int,
        progress_key: str,
        cap: SpendCap | None = None,
    ) -> None:
        self._plan, self._store, self._db, self._run_id = plan, store, db, run_id
        self._cap = cap
        self._progress_key = progress_key
        self._todo, self._counter = todo, counter
        self._task_runs, self._threads = task_runs, threads
        self._labels = arm_labels(plan)
        self._held: Exception | None = None
        self._failures: dict[str, str] = {}

    def completed_arms(self, background: ExitStack) -> Iterator[set[str]]:
        """Submit every sampling task run (at most ``task_runs`` per model) and yield the
        arms of each that hold all k outputs, as it ends, on this thread. Nothing more is
        yielded once an error is held. The progress artifact's last update is left to
        finish in ``background``."""
        if not self._todo:
            return
        by_model: dict[str, list[Arm]] = {}
        for arm in self._todo:
            by_model.setdefault(arm.model.label, []).append(arm)
        arms_of: dict[PrefectFuture[SampleOutcome], set[str]] = {}
        runner: ThreadPoolTaskRunner[SampleOutcome] = ThreadPoolTaskRunner(
            max_workers=self._threads
        )
        with runner, requests_stopped_on_signal():
            for arms in by_model.values():
                for batch in batches(arms, self._task_runs):
                    arms_of[runner.submit(sample_arms, self._parameters(batch))] = {
                        a.arm_id for a in batch
                    }
            progress = ProgressArtifact(
                self._progress_key, f"sampled for run {self._run_id}", self._counter
            )
            background.callback(progress.stop)
            for future in as_completed(list(arms_of)):
                try:
                    outcome = future.result()
                except ArmsFailed as failed:  # the task run Failed; its other arms are full
                    outcome = failed.outcome
                except Exception as exc:  # a transient failure that outlived every retry
                    self._hold(exc)
                    continue
                self._failures.update(outcome.failures)
                if self._held is None:
                    yield arms_of[future] - set(outcome.failures)

    @contextmanager
    def holding_errors(self) -> Iterator[None]:
        """Hold an error of the work in the block until :meth:`finish`."""
        try:
            yield
        except Exception as exc:
            self._hold(exc)

    def finish(self) -> dict[str, str]:
        """Record the arms that failed permanently and log them (one error per model, each
        arm at INFO), and return them (arm_id -> why); raise the first error held instead if
        there is one."""
        logger = get_run_logger()
        arms = {a.arm_id: a for a in self._plan.arms} if self._failures else {}
        failed: dict[str, dict[str, None]] = {}  # model label -> its reasons, in order
        for arm_id, reason in self._failures.items():
            model = arms[arm_id].model
            self._store.add_arm_failure(self._run_id, arm_id, model.model, reason)
            logger.info("arm %s failed: %s", self._labels[arm_id], reason)
            failed.setdefault(model.label, {})[reason] = None
        for label, reasons in failed.items():
            of_model = [a for a in arms.values() if a.model.label == label]
            logger.error(
                "%d of %d arms of %s could not be sampled: %s",
                sum(1 for a in of_model if a.arm_id in self._failures),
                len(of_model),
                label,
                "; ".join(reasons),
            )
        if isinstance(self._held, SpendCapReached) and self._cap is not None:
            have = _stored_counts(self._plan, self._store)
            missing = self._plan.k * len(self._plan.arms) - sum(have.values())
            raise self._cap.reached(self._held, missing) from None
        if self._held is not None:
            raise self._held
        return dict(self._failures)

    def _hold(self, exc: Exception) -> None:
        self._held = self._held or exc

    def _parameters(self, batch: list[Arm]) -> dict[str, Any]:
        return _arm_jobs(self._plan, self._db, batch, self._labels, self._counter, self._cap)


@contextmanager
def sampled_meanwhile(
    plan: AuditPlan,
    store: storage.Store,
    db: str,
    task_runs: int,
    threads: int,
    cap: SpendCap | None = None,
) -> Iterator[None]:
    """Sample the arms of ``plan`` short of k in task runs while the block runs (under the
    run's spend ``cap``); leaving the block waits for them. Their outputs are in the record
    for the sampling phase, which meets their arms again (and with them any error, reported
    there)."""
    have = _stored_counts(plan, store)
    todo = [a for a in plan.arms if have[a.arm_id] < plan.k and not a.model.batch]
    labels = arm_labels(plan)
    runner: ThreadPoolTaskRunner[SampleOutcome] = ThreadPoolTaskRunner(max_workers=threads)
    with runner, requests_stopped_on_signal():
        futures = [
            runner.submit(sample_arms, _arm_jobs(plan, db, batch, labels, cap=cap))
            for batch in batches(todo, task_runs)
        ]
        yield
        for future in futures:
            future.wait()


@contextmanager
def requests_stopped_on_signal() -> Iterator[None]:
    """A signal that ends the run in the block (Ctrl-C; SIGTERM, which Prefect raises as a
    ``TerminationSignal`` during a flow) stops the model requests (``dbpa.llm.stop_requests``)
    before what encloses the block waits for the sampling tasks: a task runner's exit joins
    them, and each would otherwise finish its arm."""
    try:
        yield
    except (KeyboardInterrupt, ExternalSignal):
        stop_requests()
        raise


@contextmanager
def stop_lifted_at_the_end() -> Iterator[None]:
    """A run: a stop of the model requests in force in the block (a signal's, made in it or
    before it: ``dbpa run``'s handler, whose exception can be dropped on its way) lasts to its
    end, then is lifted, so that the process's next run samples (a library caller's, after a
    Ctrl-C). Entered first, so it ends once the block's own work is joined."""
    try:
        yield
    finally:
        allow_requests()


def _arm_jobs(
    plan: AuditPlan,
    db: str,
    batch: list[Arm],
    labels: dict[str, str],
    counter: Counter | None = None,
    cap: SpendCap | None = None,
) -> dict[str, Any]:
    """The parameters of a sampling task run of ``batch``."""
    first = labels[batch[0].arm_id]
    return {
        "db": db,
        "jobs": [ArmJob(arm=a, seed=plan.arm_seed(a)) for a in batch],
        "k": plan.k,
        "label": first if len(batch) == 1 else f"{len(batch)} arms from {first}",
        "counter": counter,
        "cap": cap,
    }


def sample_phase(
    plan: AuditPlan,
    store: storage.Store,
    db: str,
    run_id: str,
    task_runs: int,
    threads: int,
    progress_key: str,
    counter: Counter | None = None,
    cap: SpendCap | None = None,
) -> Sampling:
    """The sampling still to do: every arm short of k outputs (counted from what is stored).
    Outputs count on ``counter`` when given (a sequential audit's, across its looks), else on
    a counter of this phase; the progress artifact ``progress_key`` shows it. Requests
    are held to the run's spend ``cap`` (when the config sets one)."""
    logger = get_run_logger()
    have = _stored_counts(plan, store)
    todo = [a for a in plan.arms if have[a.arm_id] < plan.k and not a.model.batch]
    total = plan.k * len(plan.arms)
    missing = total - sum(have.values())
    if counter is None:
        counter = Counter("sample", total, done=total - missing, unit="outputs")
    if todo:
        logger.info("sampling %d outputs for %d arms (k=%d)", missing, len(todo), plan.k)
    else:
        logger.info("sampling: all %d outputs already stored (k=%d)", total, plan.k)
    return Sampling(plan, store, db, run_id, todo, counter, task_runs, threads, progress_key, cap)


def spend_cap(config: AuditConfig, store: storage.Store, arms: Sequence[Arm]) -> SpendCap | None:
    """The run's spend cap (None when neither the run nor a model sets ``max_cost_usd``),
    counting what the stored outputs of ``arms`` (the arms the run samples) cost already."""
    model_caps = model_cap_keys(config)
    if config.max_cost_usd is None and not model_caps:
        return None
    cap = SpendCap(config.max_cost_usd, 0.0, model_caps)
    count_stored(cap, store, arms)
    return cap


def count_stored(cap: SpendCap, store: storage.Store, arms: Sequence[Arm]) -> None:
    """Count on ``cap`` what the stored outputs of ``arms`` cost, each on its model."""
    for label in {a.model.label for a in arms}:
        cap.add_spent(stored_cost(store, [a for a in arms if a.model.label == label]), label)


def stored_cost(store: storage.Store, arms: Sequence[Arm]) -> float:
    """USD the stored outputs of ``arms`` cost (outputs of unknown cost count 0)."""
    if not arms:
        return 0.0
    costs = store.samples([a.arm_id for a in arms])["cost_usd"]
    return float(costs.fillna(0.0).sum())


def _stored_counts(plan: AuditPlan, store: storage.Store) -> dict[str, int]:
    """Outputs of index below k stored for each arm of ``plan``."""
    present = store.sample_indices([a.arm_id for a in plan.arms])
    return {a: sum(1 for i in idx if i < plan.k) for a, idx in present.items()}


def arm_labels(plan: AuditPlan) -> dict[str, str]:
    """A readable label of every arm: its perturbation (``original``, ``replicate r of the
    original``), over a set of prompts its prompt (``on q7``), and family."""
    labels: dict[str, str] = {}
    for t in plan.unit_tests:
        on = "" if t.prompt_id is None else f" on {t.prompt_id}"
        labels.setdefault(t.original.arm_id, f"original{on} ({t.family})")
        labels.setdefault(t.perturbed.arm_id, f"{t.perturbation.id}{on} ({t.family})")
        for arm in plan.replicates_of(t.original):
            what = f"replicate {arm.replicate} of the original{on}"
            labels.setdefault(arm.arm_id, f"{what} ({t.family})")
    for arm in plan.arms:  # replicates, and an original whose family has no test (yet)
        what = f"replicate {arm.replicate} of the original" if arm.replicate else "original"
        labels.setdefault(arm.arm_id, f"{what} ({arm.model.label})")
    return labels
