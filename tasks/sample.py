"""Sample arms: ask the model until each arm holds k outputs, storing each as it arrives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.states import Failed

import storage
from dbpa.arms import Arm
from dbpa.llm import PermanentModelError, SpendCap, TransientModelError, Warn, sample
from dbpa.progress import Counter
from dbpa.specs import Generation

ARMS_IN_FLIGHT = 32
"""Arms of one task sampled at once (each waits on its own requests in a thread)."""


@dataclass(frozen=True)
class ArmJob:
    """An arm to fill and the base seed of its requests."""

    arm: Arm
    seed: int


@dataclass(frozen=True)
class SampleOutcome:
    """What a sampling task achieved."""

    sampled: int
    """Outputs stored by this task."""
    failures: dict[str, str]
    """arm_id -> permanent error message (model and reason)."""


class ArmsFailed(Exception):
    """Arms of a sampling task run failed permanently: the task run ends Failed with this
    error, which carries what the task run achieved (the flow goes on with the other arms)."""

    def __init__(self, outcome: SampleOutcome) -> None:
        reasons = sorted(set(outcome.failures.values()))
        super().__init__(f"{len(outcome.failures)} arm(s) failed: {'; '.join(reasons)}")
        self.outcome = outcome

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.outcome,))


def _transient_only(task: Any, task_run: Any, state: Any) -> bool:
    """Retry the task only when the provider kept failing transiently (not after
    :class:`ArmsFailed`, nor any other error)."""
    try:
        state.result()
    except TransientModelError:
        return True
    except Exception:
        return False
    return False


@task(
    name="sample",
    task_run_name="sample {label}",
    cache_policy=NO_CACHE,  # the record is the cache: a cached outcome would repeat its failures
    retries=2,
    retry_delay_seconds=[10, 60],
    retry_condition_fn=_transient_only,
)
def sample_arms(
    db: str,
    jobs: list[ArmJob],
    k: int,
    label: str,
    counter: Counter | None = None,
    cap: SpendCap | None = None,
) -> SampleOutcome | State[Any]:
    """Fill every arm of ``jobs`` up to k outputs, asking only for the missing ones (so a
    retry or a resumed run never requests a stored output again); a permanent model error
    ends that arm only. The arms of the batch are sampled concurrently. With arms that
    failed permanently the task run ends Failed with :class:`ArmsFailed` (no retry: it
    would fail again), its message the reasons; the flow reports them once per model.
    ``cap``: the run's spend cap; once it is reached the task raises ``SpendCapReached``
    (not retried) after its arms' answers in flight are stored."""
    store = storage.get(db)
    present = store.sample_indices([j.arm.arm_id for j in jobs])
    threads = min(len(jobs), ARMS_IN_FLIGHT)
    warn = get_run_logger().warning
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dbpa-arm") as pool:
        futures = {
            job.arm.arm_id: pool.submit(
                _fill,
                store,
                job,
                [i for i in range(k) if i not in present[job.arm.arm_id]],
                counter,
                warn,
                cap,
            )
            for job in jobs
        }
    failures: dict[str, str] = {}
    sampled = 0
    for arm_id, future in futures.items():
        error = future.exception()
        if isinstance(error, PermanentModelError):
            failures[arm_id] = str(error)
        elif error is not None:
            raise error  # transient failures that outlived the sampler's retries
        else:
            sampled += future.result()
    outcome = SampleOutcome(sampled=sampled, failures=failures)
    if failures:
        failed = ArmsFailed(outcome)
        return Failed(message=str(failed), data=failed)
    return outcome


def _fill(
    store: storage.Store,
    job: ArmJob,
    missing: list[int],
    counter: Counter | None,
    warn: Warn,
    cap: SpendCap | None,
) -> int:
    if not missing:
        return 0

    def keep(outputs: list[Generation]) -> None:
        store.add_samples(job.arm.arm_id, outputs)
        if counter is not None:
            counter.add(len(outputs))

    return len(
        sample(
            job.arm.model,
            job.arm.messages,
            missing,
            seed=job.seed,
            on_outputs=keep,
            warn=warn,
            cap=cap,
        )
    )
