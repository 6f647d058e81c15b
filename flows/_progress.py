"""The sampling progress artifact, kept up to date from its own thread.

It belongs to the run the user watches: the root of the flow run tree (the tick's run of a
scheduled audit, whose ``audit`` is a subflow; the ``audit`` run itself under ``dbpa run``).

Every artifact write is a Prefect API call, and against the ephemeral server (SQLite) a
write now and then answers 503 and the client waits 2 s before it tries again. Written from
the flow's thread, such a wait would delay the start of sampling or the moment the flow
notices that sampling is over; from this thread it delays only the artifact.
"""

from __future__ import annotations

import contextvars
import threading
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import ProgressArtifact as PrefectProgressArtifact
from prefect.artifacts import update_progress_artifact
from prefect.runtime import flow_run

from dbpa.progress import Counter

UPDATE_INTERVAL_S = 2.0
"""Seconds between two updates of the artifact."""


class ProgressArtifact:
    """A progress artifact ``key`` showing ``counter`` as a percentage until :meth:`stop`."""

    def __init__(self, key: str, description: str, counter: Counter) -> None:
        self._key, self._description, self._counter = key, description, counter
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

    def _run(self) -> None:
        try:
            root = flow_run.root_flow_run_id  # one API read when the run is a subflow
            artifact = PrefectProgressArtifact(
                progress=self._percent(),
                key=self._key,
                description=self._description,
                flow_run_id=UUID(str(root)) if root else None,
            )
            artifact_id = artifact.create().id  # type: ignore[union-attr]
            while not self._stopping.wait(UPDATE_INTERVAL_S):
                update_progress_artifact(artifact_id, self._percent())
            update_progress_artifact(artifact_id, self._percent())
        except Exception as exc:  # the artifact is a view; the audit goes on without it
            get_run_logger().warning("progress artifact %s not updated: %s", self._key, exc)
