"""The arms of ``batch: true`` models, filled by provider batches.

:class:`BatchedSampling` first sends every missing request of those arms as batches (split
by the provider's limits), each stored in the record as soon as the provider created it; the
requests of batches still open in the record (a run that stopped while it waited) are not
sent again. :meth:`BatchedSampling.wait` then polls the open batches with backoff
(:data:`FIRST_POLL_S` doubling to :data:`MOST_POLL_S`), stores the answers of each finished
one, and sends the requests that failed or expired inside a batch again, in a new batch
(up to the model's ``max_retries`` rounds; after that the arm fails, as a permanent error
does). A batch past its deadline (the provider's 24 h window) is cancelled and collected.

How long a flow run waits is the caller's ``wait_s``: ``dbpa run`` waits until every batch
is collected (the command's own process); a scheduled tick waits ``wait_s`` and then raises
:class:`BatchesPending`, on which it schedules a run of its deployment for the same epoch at
the next poll and ends (``flows.scheduled.come_back``), so no worker is held while the
provider works.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.exceptions import MissingContextError
from prefect.runtime import flow_run

import storage
from dbpa.arms import Arm
from dbpa.llm import (
    BatchRequest,
    BatchState,
    Prices,
    SpendCap,
    TransientModelError,
    batch_prices,
    batch_requests,
    check_batchable,
    collect,
    poll,
    prompt_tokens_high,
    split,
    submit,
)
from dbpa.llm import cancel as cancel_batch
from dbpa.plan import AuditPlan
from dbpa.specs import ModelSpec
from storage import StoredBatch, StoredRequest
from tasks.artifacts import artifact_key

FIRST_POLL_S = 5.0
"""Seconds before the first poll of a batch; each poll without news doubles it."""
MOST_POLL_S = 600.0
"""The longest wait between two polls (the wait a scheduled tick asks to be retried after)."""
SUBMIT_TRIES = 3
"""Tries of a batch whose creation failed transiently (nothing of it was stored)."""


class BatchesPending(Exception):
    """Provider batches still run after the flow run's wait: everything answered is stored,
    and the same run started again (or retried) collects them."""

    def __init__(self, batches: int, requests: int, deadline: str, poll_in_s: float) -> None:
        self.batches, self.requests, self.deadline = batches, requests, deadline
        self.poll_in_s = poll_in_s
        super().__init__(
            f"waiting for {batches} provider batch(es) of {requests} request(s), due by "
            f"{deadline}; every answer so far is stored, and the same run started again "
            f"collects them (next poll in {poll_in_s:.0f} s)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.batches, self.requests, self.deadline, self.poll_in_s))


@dataclass
class _Round:
    """What one model's batches did in this flow run."""

    tries: dict[str, int] = field(default_factory=dict)
    """custom_id -> times its request was sent in this flow run."""
    reasons: dict[str, str] = field(default_factory=dict)
    """custom_id -> why it last failed."""


class BatchedSampling:
    """The arms of ``plan`` whose model has ``batch: true``, filled to k by batches."""

    def __init__(
        self,
        plan: AuditPlan,
        store: storage.Store,
        audit: str,
        cap: SpendCap | None = None,
        *,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.arms = [a for a in plan.arms if a.model.batch]
        self._plan, self._store, self._audit, self._cap = plan, store, audit, cap
        self._sleep = sleep
        self._models = {a.model.label: a.model for a in self.arms}
        self._seeds = {a.arm_id: plan.arm_seed(a) for a in self.arms}
        self._rounds = {label: _Round() for label in self._models}
        self._failures: dict[str, str] = {}
        for model in self._models.values():
            check_batchable(model)
        if cap is not None:  # batches an earlier run created are in flight: held
            for batch in self._open():
                if batch.reserved_usd is not None:
                    cap.hold(batch.reserved_usd, batch.model)

    @property
    def arm_ids(self) -> set[str]:
        return {a.arm_id for a in self.arms}

    def submit(self) -> int:
        """Send every missing request of the arms not in an open batch; the requests sent."""
        sent = 0
        for label, model in self._models.items():
            arms = [
                a for a in self.arms if a.model.label == label and a.arm_id not in self._failures
            ]
            sent += self._submit_model(model, arms)
        return sent

    def wait(self, wait_s: float | None) -> dict[str, str]:
        """Poll, collect and send failed requests again until every batch is collected
        (``wait_s`` None) or ``wait_s`` seconds passed (then :class:`BatchesPending`); the
        arms that failed (arm_id -> reason)."""
        start = time.monotonic()
        delay = FIRST_POLL_S
        while True:
            news = self._poll_all()
            if news:
                self.submit()  # the requests that failed in a batch, in a new one
                delay = FIRST_POLL_S
            open_ = self._open()
            if not open_:
                return dict(self._failures)
            self._show(open_)
            if wait_s is not None and time.monotonic() - start + delay > wait_s:
                raise BatchesPending(
                    len(open_),
                    sum(len(b.requests) for b in open_),
                    min(b.deadline for b in open_).isoformat(timespec="minutes"),
                    delay,
                )
            self._sleep(delay)
            if not news:
                delay = min(2 * delay, MOST_POLL_S)

    # ------------------------------------------------------------------------------ parts

    def _open(self) -> list[StoredBatch]:
        return [
            b for b in self._store.open_batches(sorted(self.arm_ids)) if b.model in self._models
        ]

    def _submit_model(self, model: ModelSpec, arms: Sequence[Arm]) -> int:
        if not arms:
            return 0
        log = _logger()
        ids = [a.arm_id for a in arms]
        present = self._store.sample_indices(ids)
        pending: dict[str, set[int]] = {a: set() for a in ids}
        for batch in self._open():
            for r in batch.requests:
                if r.arm_id in pending:
                    pending[r.arm_id].update(r.indices)
        requests: list[BatchRequest] = []
        for arm in arms:
            missing = [
                i for i in range(self._plan.k) if i not in present[arm.arm_id] | pending[arm.arm_id]
            ]
            if missing:
                requests += batch_requests(
                    model, arm.arm_id, arm.messages, missing, seed=self._seeds[arm.arm_id]
                )
        requests = self._within_retries(model, requests)
        limits = check_batchable(model)
        prices = batch_prices(model) if self._cap is not None else None
        for chunk in split(requests, limits):
            reserved = self._reserve(model, chunk, prices)
            batch = self._create(model, chunk, reserved)
            log.info(
                "model %s: batch %s of %d request(s) sent, due by %s",
                model.label,
                batch.batch_id,
                len(chunk),
                batch.deadline.isoformat(timespec="minutes"),
            )
        return len(requests)

    def _within_retries(self, model: ModelSpec, requests: list[BatchRequest]) -> list[BatchRequest]:
        """The requests still to be tried; the arms of those tried too often fail."""
        tries = self._rounds[model.label].tries
        kept = []
        for r in requests:
            if tries.get(r.custom_id, 0) > model.max_retries:
                reason = self._rounds[model.label].reasons.get(r.custom_id, "no answer")
                self._failures[r.arm_id] = (
                    f"model {model.label!r}: request {r.custom_id} failed in "
                    f"{tries[r.custom_id]} batches: {reason}"
                )
            else:
                kept.append(r)
        return [r for r in kept if r.arm_id not in self._failures]

    def _reserve(
        self, model: ModelSpec, chunk: list[BatchRequest], prices: Prices | None
    ) -> float | None:
        if self._cap is None or prices is None or not self._cap.caps(model.label):
            return None
        arms = {a.arm_id: a for a in self.arms}
        most = 0.0
        for r in chunk:
            messages = [m.model_dump() for m in arms[r.arm_id].messages]
            most += prices.request_most(prompt_tokens_high(messages), r.n)
        self._cap.reserve(most, model.label)
        return most

    def _create(
        self, model: ModelSpec, chunk: list[BatchRequest], reserved: float | None
    ) -> StoredBatch:
        metadata = {"dbpa_audit": self._audit[:500], "dbpa_model": model.label[:500]}
        for attempt in range(SUBMIT_TRIES):
            try:
                submitted = submit(model, chunk, metadata)
                break
            except TransientModelError:
                if attempt + 1 == SUBMIT_TRIES:
                    self._release(model, reserved)
                    raise
                self._sleep(FIRST_POLL_S * 2**attempt)
            except BaseException:
                self._release(model, reserved)
                raise
        stored = [StoredRequest(r.custom_id, r.arm_id, r.indices, r.seed) for r in chunk]
        self._store.add_batch(
            submitted.batch_id,
            model.label,
            submitted.input_file_id,
            stored,
            reserved,
            submitted.deadline,
            "validating",
        )
        tries = self._rounds[model.label].tries
        for r in chunk:
            tries[r.custom_id] = tries.get(r.custom_id, 0) + 1
        return self._store.batches([submitted.batch_id])[0]

    def _release(self, model: ModelSpec, reserved: float | None) -> None:
        if reserved is not None and self._cap is not None:
            self._cap.release(reserved, model.label)

    def _poll_all(self) -> bool:
        """Poll every open batch, collect the finished ones; whether one finished."""
        news = False
        log = _logger()
        for batch in self._open():
            model = self._models[batch.model]
            try:
                state = poll(model, batch.batch_id)
            except TransientModelError as exc:
                log.warning("batch %s: %s (polled again later)", batch.batch_id, exc)
                continue
            if not state.done and datetime.now(UTC) > batch.deadline:
                log.warning("batch %s: past its deadline, cancelled", batch.batch_id)
                cancel_batch(model, batch.batch_id)
                continue
            if not state.done:
                self._store.update_batch(batch.batch_id, state.status)
                continue
            self._collect(model, batch, state)
            news = True
        return news

    def _collect(self, model: ModelSpec, batch: StoredBatch, state: BatchState) -> None:
        arms = {a.arm_id: a for a in self.arms}
        requests = [_request(r) for r in batch.requests if r.arm_id in arms]
        prices = batch_prices(model)
        collected = collect(model, state, requests, prices)
        spent = 0.0
        for arm_id, outputs in collected.outputs.items():
            self._store.add_samples(arm_id, outputs)
            spent += sum(g.cost_usd or 0.0 for g in outputs)
        if batch.reserved_usd is not None and self._cap is not None:
            self._cap.settle(batch.reserved_usd, spent, model.label)
        self._store.update_batch(batch.batch_id, state.status, collected=True)
        reasons = self._rounds[model.label].reasons
        reasons.update(collected.failed)
        _logger().info(
            "batch %s %s: %d output(s) stored, %d request(s) to send again",
            batch.batch_id,
            state.status,
            sum(len(o) for o in collected.outputs.values()),
            len(collected.failed),
        )

    def _show(self, open_: list[StoredBatch]) -> None:
        """The waiting state in the UI: a table of the open batches."""
        rows = "\n".join(
            f"| {b.batch_id} | {b.model} | {len(b.requests)} | {b.status} | "
            f"{b.deadline.isoformat(timespec='minutes')} |"
            for b in open_
        )
        if flow_run.id is None:  # outside a flow run: no UI to show it in
            return
        try:
            create_markdown_artifact(
                key=artifact_key(self._audit, "batches"),
                markdown=(
                    f"## {self._audit}: waiting for {len(open_)} provider batch(es)\n\n"
                    "| batch | model | requests | status | deadline |\n|---|---|---|---|---|\n"
                    f"{rows}\n"
                ),
                description="Provider batches still running",
            )
        except Exception as exc:  # the UI card matters less than the run
            _logger().debug("batches artifact not written: %s", exc)


def _logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """The flow run's logger; this module's outside one."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def _request(r: StoredRequest) -> BatchRequest:
    return BatchRequest(r.custom_id, r.arm_id, r.indices, r.seed, "")
