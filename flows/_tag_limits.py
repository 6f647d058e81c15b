"""Ask Prefect for the tag concurrency limits of a burst of task runs before the burst starts.

Before a tagged task run starts, Prefect's task engine asks the server for a slot of each
limit named after its tags (one request at a time per tag set; a "no such limits" answer is
cached for 5 s). Against the ephemeral server (SQLite), that request often races the server's
recording of the task runs just created: its transaction reads, then writes, finds the
database locked and answers 503, and the client waits 2 s before asking again, while every
task run of the tag set waits in line behind it. In the pipeline benchmark this cost 2 s at
the start of sampling in most audits. Asked from the flow just before the burst is submitted,
the request does not race the burst's own records, and the burst's task runs find the
answer cached. Where limits exist, the slot taken here is given back at once, so they keep
working as Prefect documents; where one is full, nobody waits here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from uuid import uuid4

from prefect.client.schemas.objects import ConcurrencyLeaseHolder

# Private: the public ``prefect.concurrency.sync.concurrency`` logs a warning for every tag
# without a limit (the usual case), which this check must not do.
from prefect.concurrency._sync import concurrency
from prefect.context import TagsContext

logger = logging.getLogger(__name__)


def check_tag_limits(tags: Iterable[str] = ()) -> None:
    """Ask once for the limits of task runs tagged ``tags`` plus the tags of the context."""
    names = sorted(f"tag:{tag}" for tag in TagsContext.get().current_tags | set(tags))
    if not names:
        return
    holder = ConcurrencyLeaseHolder(type="task_run", id=uuid4())
    try:
        with concurrency(
            names, occupy=1, max_retries=0, lease_duration=60, holder=holder, suppress_warnings=True
        ):
            pass
    except Exception as exc:  # a full limit or an unreachable API: the task runs will wait
        logger.debug("tag limits %s not checked ahead: %s", names, exc)
