"""Flow retries for failures a retry can fix, and none for the others.

Prefect retries a flow run on its server: when the run proposes Failed, the server's
``RetryFailedFlows`` rule schedules it again while its run count is within the run's policy
``retries`` (the flow's ``retries``, copied at its start). Flows have no
``retry_condition_fn`` (Prefect 3.8 has it for tasks only), so a flow run whose failure is
permanent sets its own policy's retries to 0 just before it fails: the server then lets it
fail, once, and the UI shows Failed instead of AwaitingRetry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run

from dbpa.config import ConfigError
from dbpa.llm import PermanentModelError, SpendCapReached
from flows.audit import AuditIncomplete

PERMANENT: tuple[type[Exception], ...] = (
    AuditIncomplete,
    PermanentModelError,
    ConfigError,
    SpendCapReached,
)
"""Failures a retry a minute later would meet again: arms that failed permanently (a
rejected key, an unknown model, a bad request, an endpoint unreachable for its whole connect
budget), an embedder or generator that did, a config that cannot be used, a spend cap
reached (it fails once, its line in the UI, until the cap is raised)."""


@contextmanager
def retried_unless_permanent() -> Iterator[None]:
    """Inside a flow with ``retries``: a :data:`PERMANENT` error raised in the block fails the
    flow run without a retry; any other error is retried as the flow says."""
    try:
        yield
    except PERMANENT:
        _no_more_retries()
        raise


def _no_more_retries() -> None:
    """Set this flow run's retries to 0 on the server (a failure to do so is logged, and
    the run may then be retried once more: the original error still propagates)."""
    run_id = flow_run.id
    if run_id is None:
        return
    try:
        with get_client(sync_client=True) as client:
            policy = client.read_flow_run(run_id).empirical_policy
            client.update_flow_run(
                run_id, empirical_policy=policy.model_copy(update={"retries": 0})
            )
    except Exception as exc:  # the run's own error matters more than this one
        get_run_logger().warning("could not cancel the retry of this flow run: %s", exc)
