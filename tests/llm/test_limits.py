"""The process-wide in-flight bound: across loops and threads, with cancellation."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dbpa.llm._limits import InFlightLimit, limit_for
from dbpa.specs import ModelSpec


class _Probe:
    """Counts holders of a slot and remembers the most at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    async def hold(self, limit: InFlightLimit, bound: int, seconds: float) -> None:
        async with limit.slot(bound):
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            await asyncio.sleep(seconds)
            with self.lock:
                self.now -= 1


def test_bound_holds_across_event_loops_in_threads() -> None:
    limit, probe = InFlightLimit(), _Probe()

    def run_loop() -> None:
        async def many() -> None:
            await asyncio.gather(*(probe.hold(limit, 3, 0.02) for _ in range(10)))

        asyncio.run(many())

    threads = [threading.Thread(target=run_loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert probe.most == 3
    assert limit.in_flight == 0


def test_each_caller_brings_its_own_limit() -> None:
    limit, probe = InFlightLimit(), _Probe()

    async def mixed() -> None:
        wide = [probe.hold(limit, 4, 0.05) for _ in range(8)]
        narrow = [probe.hold(limit, 1, 0.05) for _ in range(3)]
        await asyncio.gather(*wide, *narrow)

    asyncio.run(mixed())
    assert probe.most == 4
    assert limit.in_flight == 0


def test_a_cancelled_waiter_gives_back_nothing_it_did_not_take() -> None:
    limit = InFlightLimit()

    async def scenario() -> None:
        holder = asyncio.create_task(_Probe().hold(limit, 1, 0.1))
        await asyncio.sleep(0.01)
        waiter = asyncio.create_task(_Probe().hold(limit, 1, 0.0))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await holder
        assert limit.in_flight == 0
        await asyncio.wait_for(_Probe().hold(limit, 1, 0.0), 1.0)  # the slot is free again

    asyncio.run(scenario())


def test_specs_of_one_endpoint_share_one_counter() -> None:
    a = ModelSpec(model="openai/m", api_base="http://127.0.0.1:1/v1", params={"temperature": 1})
    b = ModelSpec(model="openai/m", api_base="http://127.0.0.1:1/v1", max_concurrency=2)
    c = ModelSpec(model="openai/m", api_base="http://127.0.0.1:2/v1")
    assert limit_for(a) is limit_for(b)
    assert limit_for(a) is not limit_for(c)
