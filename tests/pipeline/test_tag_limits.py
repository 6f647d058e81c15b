"""The tag-limit check the audit flow makes before a burst of tagged task runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from prefect import tags
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.sync import concurrency

from flows._tag_limits import check_tag_limits

pytestmark = pytest.mark.usefixtures("prefect_harness")

LIMIT = "tag:model:limited"


@pytest.fixture
def one_slot_limit() -> Iterator[str]:
    """A Prefect concurrency limit of one slot on the tag ``model:limited``."""
    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=LIMIT, limit=1))
        try:
            yield LIMIT
        finally:
            client.delete_global_concurrency_limit_by_name(LIMIT)


def _active_slots(name: str) -> int:
    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(name).active_slots


def _finishes(fn, *args) -> bool:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    thread.join(timeout=60)
    return not thread.is_alive()


def test_tags_without_limits_are_checked_quietly(caplog):
    with tags("audit:quiet"):
        check_tag_limits(["model:nobody-limits-this"])
    assert not [r for r in caplog.records if r.levelname in {"WARNING", "ERROR"}]


def test_a_slot_taken_by_the_check_is_given_back(one_slot_limit):
    with tags("audit:limited"):
        check_tag_limits(["model:limited"])
    assert _active_slots(one_slot_limit) == 0


def test_a_full_limit_does_not_hold_up_the_check(one_slot_limit):
    with concurrency(one_slot_limit, occupy=1):  # another run holds the only slot
        assert _finishes(check_tag_limits, ["model:limited"])
        assert _active_slots(one_slot_limit) == 1
