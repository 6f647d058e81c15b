"""A head start on sampling while Prefect's temporary server starts.

Sampling needs the model, the record and the plan, not Prefect: ``dbpa run`` asks for the
first outputs of every arm short of k while its flow waits for the server, and stores them in
the record, where the flow's sampling tasks find them (they only ask for what is missing). The
texts are the ones the flow would have got: output ``i`` of an arm depends on the arm's seed
and ``i`` alone (see ``dbpa.llm``), whoever asks.

The head start asks for one *chunk* per arm: its first missing outputs, in whole requests
(about ``OUTPUTS_PER_CHUNK``). The rest is left to the flow's tasks, which Prefect retries
and shows; the head start only gets the requests going while Prefect starts.
:meth:`HeadStart.stop` lets the chunks in flight finish, hands out no more and closes the
record before the flow opens it, so no output is asked twice. A model that fails is left
alone for the rest of the head start (its error reaches the user once, from the flow); short
retry waits keep ``stop`` prompt, and so does giving up at the first failed connection: the
model's connect budget is spent by the flow's tasks, on the clock that failure started
(``dbpa.llm.endpoint_for``).
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dbpa.arms import Arm
    from dbpa.plan import AuditPlan
    from dbpa.specs import Generation


class SampleWriter(Protocol):
    """Where the head start stores its outputs (``storage.Store`` is one)."""

    def add_samples(self, arm_id: str, outputs: Sequence[Generation]) -> None: ...


ARMS_AT_ONCE = 8
"""Chunks in flight at once."""
OUTPUTS_PER_CHUNK = 4
"""Outputs asked per chunk (rounded up to whole requests of the model)."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Chunk:
    """Output indices of one arm, asked together."""

    arm: Arm
    seed: int
    indices: tuple[int, ...]


def chunks(plan: AuditPlan, stored: dict[str, set[int]]) -> list[Chunk]:
    """The first chunk of missing outputs of every arm short of k (whole requests), in the
    plan's order of arms."""
    from dbpa.llm import choices_per_request

    found: list[Chunk] = []
    for arm in plan.arms:
        per_request = choices_per_request(arm.model)
        size = per_request * max(1, -(-OUTPUTS_PER_CHUNK // per_request))
        missing = [i for i in range(plan.k) if i not in stored.get(arm.arm_id, set())]
        groups: dict[int, list[int]] = {}
        for i in missing:
            groups.setdefault(i // size, []).append(i)
        if groups:
            first = groups[min(groups)]
            found.append(Chunk(arm, plan.arm_seed(arm), tuple(first)))
    return found


class HeadStart:
    """Sampling in background threads until :meth:`stop`."""

    def __init__(self, plan: AuditPlan, db: str | Path) -> None:
        # What the threads use is imported here, in the caller's thread: imports running in
        # two threads at once (this one goes on to import Prefect) can deadlock.
        import storage
        from dbpa.llm import ModelError, RetryPolicy, sample

        self._open, self._sample, self._model_error = storage.Store, sample, ModelError
        self._retry = RetryPolicy(max_delay_s=1.0, max_retry_after_s=1.0)
        self._plan, self._db = plan, db
        self._stopping = threading.Event()
        self._failed_models: set[str] = set()
        self._lock = threading.Lock()
        self.stored = 0
        """Outputs stored so far."""
        self._thread = threading.Thread(target=self._run, name="dbpa-head-start", daemon=True)
        # A signal can end the run before its caller holds this object to stop it (measured:
        # in ``start()`` below); the interpreter's exit then killed the threads inside DuckDB,
        # which aborts the process. Stopped at exit instead, before daemon threads are killed.
        atexit.register(self.stop)
        self._thread.start()

    def stop(self) -> int:
        """Hand out no more work, wait for the chunks in flight, close the record; the number
        of outputs stored."""
        self._stopping.set()
        if self._thread.ident is not None:  # started
            self._thread.join()
        atexit.unregister(self.stop)
        return self.stored

    def _run(self) -> None:
        try:
            with self._open(self._db) as store:
                stored = store.sample_indices([a.arm_id for a in self._plan.arms])
                work: queue.SimpleQueue[Chunk] = queue.SimpleQueue()
                for chunk in chunks(self._plan, stored):
                    work.put(chunk)
                workers = [
                    threading.Thread(target=self._work, args=(store, work), daemon=True)
                    for _ in range(ARMS_AT_ONCE)
                ]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
        except Exception as exc:  # the flow opens the record itself and reports what is wrong
            _log.debug("head start ended early: %s", exc)

    def _work(self, store: SampleWriter, work: queue.SimpleQueue[Chunk]) -> None:
        while not self._stopping.is_set():
            try:
                chunk = work.get_nowait()
            except queue.Empty:
                return
            model = chunk.arm.model.model_copy(update={"connect_budget_s": 0.0})
            with self._lock:
                if model.label in self._failed_models:
                    continue

            def keep(outputs: list[Generation], arm_id: str = chunk.arm.arm_id) -> None:
                store.add_samples(arm_id, outputs)
                with self._lock:
                    self.stored += len(outputs)

            try:
                self._sample(
                    model,
                    chunk.arm.messages,
                    chunk.indices,
                    seed=chunk.seed,
                    on_outputs=keep,
                    retry=self._retry,
                )
            except self._model_error as exc:  # the flow meets it again and reports it once
                _log.debug("head start: %s left alone: %s", model.label, exc)
                with self._lock:
                    self._failed_models.add(model.label)
            except Exception as exc:
                _log.debug("head start: %s: %s", chunk.arm.arm_id, exc)
