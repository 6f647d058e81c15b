"""The sampling progress artifact, kept up to date from its own thread.

It belongs to the run the user watches: the root of the flow run tree (the tick's run of a
scheduled audit; the ``audit`` run itself under ``dbpa run``). Its key is the audit's
(``<audit>-progress``), so the Artifacts page keeps one card per audit, and a run has one
version of it: a retried tick, or the next look of a sequential audit, updates the version
its run already has. The card shows the percentage, and its description the counts.

Every artifact write is a Prefect API call, and against the ephemeral server (SQLite) a
write now and then answers 503 and the client waits 2 s before it tries again. Written from
the flow's thread, such a wait would delay the start of sampling or the moment the flow
notices that sampling is over; from this thread it delays only the artifact. A write that
fails is tried again at the next update, and the final figure up to ``FINAL_ATTEMPTS`` times.
"""

from __future__ import annotations

import contextvars
import threading
import time
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import ProgressArtifact as PrefectProgressArtifact
from prefect.artifacts import update_progress_artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)
from prefect.runtime import flow_run

from dbpa.progress import Counter

UPDATE_INTERVAL_S = 2.0
"""Seconds between two updates of the artifact."""
FINAL_ATTEMPTS = 5
"""Tries of the last write (each after ``UPDATE_INTERVAL_S``)."""


class ProgressArtifact:
    """A progress artifact ``key`` showing ``counter`` until :meth:`stop`."""

    def __init__(self, key: str, what: str, counter: Counter) -> None:
        self._key, self._what, self._counter = key, what, counter
        self._id: UUID | None = None
        self._failed = False
        self._stopping = threading.Event()
        context = contextvars.copy_context()  # the flow run the artifact belongs to
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="dbpa-progress", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Write the final figure and end the thread (waits for it)."""
        self._stopping.set()
        self._thread.join()

    def _percent(self) -> float:
        return 100.0 * self._counter.done / max(self._counter.total, 1)

    def description(self) -> str:
        """The counts, under the card's percentage."""
        done, total = self._counter.done, self._counter.total
        return f"{done:,} of {total:,} outputs ({self._percent():.1f}%) {self._what}"

    def _run(self) -> None:
        self._write()
        while not self._stopping.wait(UPDATE_INTERVAL_S):
            self._write()
        for attempt in range(FINAL_ATTEMPTS):
            if attempt:
                time.sleep(UPDATE_INTERVAL_S)
            if self._write():
                return
        get_run_logger().warning(
            "progress artifact %s: the final figure could not be written", self._key
        )

    def _write(self) -> bool:
        """Create (or find) the run's version of the artifact, or update it; False when the
        API call failed (it is tried again at the next update)."""
        try:
            if self._id is None:
                self._id = self._find() or self._create()
            else:
                update_progress_artifact(self._id, self._percent(), self.description())
        except Exception as exc:  # the artifact is a view; the audit goes on without it
            if not self._failed:
                get_run_logger().warning(
                    "progress artifact %s not updated (tried again at the next update): %s",
                    self._key,
                    exc,
                )
            self._failed = True
            return False
        return True

    def _root(self) -> UUID | None:
        root = flow_run.root_flow_run_id  # one API read when the run is a subflow
        return UUID(str(root)) if root else None

    def _find(self) -> UUID | None:
        """This run's version of the key, if it made one already (a retry, a later look)."""
        root = self._root()
        if root is None:
            return None
        with get_client(sync_client=True) as client:
            found = client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    key=ArtifactFilterKey(any_=[self._key]),
                    flow_run_id=ArtifactFilterFlowRunId(any_=[root]),
                ),
                limit=1,
            )
        if not found:
            return None
        update_progress_artifact(found[0].id, self._percent(), self.description())
        return found[0].id

    def _create(self) -> UUID:
        artifact = PrefectProgressArtifact(
            progress=self._percent(),
            key=self._key,
            description=self.description(),
            flow_run_id=self._root(),
        )
        created: UUID = artifact.create().id  # type: ignore[union-attr]
        return created
