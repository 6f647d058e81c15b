"""The sampler against the scripted server: blocks, seeds, resume, bounds, delivery, records."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbpa.llm import (
    PermanentModelError,
    SamplingStopped,
    _runner,
    allow_requests,
    block_seed,
    choices_per_request,
    litellm,
    requests_needed,
    sample,
    sample_async,
    stop_requests,
)
from dbpa.llm._providers import route_for
from dbpa.llm._sampler import _split, _Usage
from dbpa.specs import Generation, Message, ModelSpec
from tests.support.scripted_server import Output, Rule, ScriptedServer

from .conftest import FAST_RETRY, MESSAGES, spec_for

pytestmark = pytest.mark.usefixtures("key_in_env")

MANY_ANSWERS = [Rule("", [(f"answer {a}", 1.0) for a in range(50)])]


def _texts(outputs: list[Generation]) -> dict[int, str]:
    return {g.index: g.text for g in outputs}


def test_n_is_sent_per_block_with_derived_seeds(make_server) -> None:
    server = make_server(rules=MANY_ANSWERS)
    outputs = sample(spec_for(server, max_n=4), MESSAGES, range(10), seed=42)
    bodies = sorted(server.counts.requests, key=lambda b: b["seed"])
    assert sorted((b.get("n", 1), b["seed"]) for b in bodies) == sorted(
        [(4, block_seed(42, 0)), (4, block_seed(42, 1)), (2, block_seed(42, 2))]
    )
    assert [g.index for g in outputs] == list(range(10))
    by_block = {g.index // 4: g.request_id for g in outputs}
    assert all(g.request_id == by_block[g.index // 4] for g in outputs)
    assert len(set(by_block.values())) == 3
    assert all(g.seed == block_seed(42, g.index // 4) for g in outputs)
    assert requests_needed(spec_for(server, max_n=4), range(10)) == 3


def test_the_same_seed_gives_the_same_texts(make_server) -> None:
    server = make_server(rules=MANY_ANSWERS)
    first = sample(spec_for(server, max_n=4), MESSAGES, range(16), seed=7)
    again = sample(spec_for(server, max_n=4, max_concurrency=1), MESSAGES, range(16), seed=7)
    other = sample(spec_for(server, max_n=4), MESSAGES, range(16), seed=8)
    assert _texts(first) == _texts(again)
    assert _texts(first) != _texts(other)
    assert len(set(_texts(first).values())) > 5  # i.i.d. draws, not one answer repeated


@pytest.mark.parametrize("max_n", [1, 3, 4])
def test_a_resumed_run_gives_the_texts_of_a_full_run(make_server, max_n: int) -> None:
    server = make_server(rules=MANY_ANSWERS)
    model = spec_for(server, max_n=max_n)
    full = _texts(sample(model, MESSAGES, range(12), seed=3))
    missing = [1, 5, 6, 11]
    resumed = _texts(sample(model, MESSAGES, missing, seed=3))
    assert resumed == {i: full[i] for i in missing}


def test_a_partial_block_asks_up_to_its_highest_offset(make_server) -> None:
    server = make_server(rules=MANY_ANSWERS)
    model = spec_for(server, max_n=4)
    full = _texts(sample(model, MESSAGES, range(8), seed=3))
    server.counts.requests.clear()
    resumed = sample(model, MESSAGES, [6], seed=3)
    assert _texts(resumed) == {6: full[6]}
    assert [b.get("n", 1) for b in server.counts.requests] == [3]  # offsets 0-1 dropped


def test_on_outputs_sees_each_request_as_it_returns(make_server) -> None:
    server = make_server(latency=0.3)
    seen: list[tuple[float, list[int]]] = []
    start = time.perf_counter()
    outputs = sample(
        spec_for(server, max_n=2, max_concurrency=1),
        MESSAGES,
        range(6),
        seed=0,
        on_outputs=lambda gs: seen.append((time.perf_counter() - start, [g.index for g in gs])),
    )
    assert sorted(i for _, batch in seen for i in batch) == list(range(6))
    assert [len(batch) for _, batch in seen] == [2, 2, 2]
    times = [t for t, _ in seen]
    assert times[1] - times[0] > 0.2
    assert times[2] - times[1] > 0.2
    assert [g.index for g in outputs] == list(range(6))


def test_on_outputs_runs_in_the_calling_thread(server: ScriptedServer) -> None:
    threads: set[int] = set()
    sample(
        spec_for(server),
        MESSAGES,
        range(3),
        seed=0,
        on_outputs=lambda _: threads.add(threading.get_ident()),
    )
    assert threads == {threading.get_ident()}


# Cancelling a request while litellm prepares it in its thread pool leaves litellm's inner
# coroutine unawaited: litellm's warning, expected when an arm is stopped mid-flight.
@pytest.mark.filterwarnings("ignore:coroutine 'OpenAIChatCompletion.acompletion':RuntimeWarning")
def test_an_error_in_on_outputs_stops_the_arm(make_server) -> None:
    server = make_server(latency=0.05)

    def fail(_: list[Generation]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        sample(spec_for(server, max_concurrency=1), MESSAGES, range(20), seed=0, on_outputs=fail)
    time.sleep(0.2)
    assert server.counts.total < 5


def test_a_stopping_process_sends_nothing_more_and_keeps_what_was_in_flight(
    make_server, monkeypatch
) -> None:
    """``stop_requests`` (a signal) while 3 requests are in flight and 9 wait for a slot: the
    3 deliver, the 9 are never sent, and the arm raises SamplingStopped; once stopping, a
    new arm sends nothing, until ``allow_requests``."""
    monkeypatch.setattr(_runner, "_stopped", [])  # the process's flag, for this test only
    server = make_server(latency=0.5)
    model = spec_for(server, max_concurrency=3)
    delivered: list[Generation] = []
    failure: list[BaseException] = []

    def arm() -> None:
        try:
            sample(model, MESSAGES, range(12), seed=0, on_outputs=delivered.extend)
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=arm)
    thread.start()
    while server.counts.by_endpoint["/v1/chat/completions"] < 3:
        time.sleep(0.01)
    stop_requests()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert server.counts.by_endpoint["/v1/chat/completions"] == 3
    assert len(delivered) == 3
    assert len(failure) == 1
    assert isinstance(failure[0], SamplingStopped)
    assert "9 request(s) of the arm not sent" in str(failure[0])
    with pytest.raises(SamplingStopped, match=r"2 request\(s\) of the arm not sent"):
        sample(model, MESSAGES, range(2), seed=1)
    assert server.counts.by_endpoint["/v1/chat/completions"] == 3
    allow_requests()  # a new run of the process (each audit flow ends so)
    assert len(sample(model, MESSAGES, range(2), seed=1)) == 2
    assert server.counts.by_endpoint["/v1/chat/completions"] == 5


def test_concurrency_is_bounded(make_server) -> None:
    server = make_server(latency=0.15)
    sample(spec_for(server, max_concurrency=3), MESSAGES, range(12), seed=0)
    assert server.counts.max_in_flight == 3


def test_arms_of_one_model_share_the_bound(make_server) -> None:
    server = make_server(latency=0.1)
    model = spec_for(server, max_concurrency=3)
    other_params = spec_for(server, max_concurrency=3, params={"temperature": 0.5})

    async def both() -> None:
        await asyncio.gather(
            sample_async(model, MESSAGES, range(8), seed=1),
            sample_async(other_params, MESSAGES, range(8), seed=2),
        )

    asyncio.run(both())
    assert server.counts.max_in_flight == 3
    assert server.counts.by_endpoint["/v1/chat/completions"] == 16


def test_blocking_calls_in_threads_share_the_bound(make_server) -> None:
    server = make_server(latency=0.1)
    model = spec_for(server, max_concurrency=2)
    threads = [
        threading.Thread(target=sample, args=(model, MESSAGES, range(6)), kwargs={"seed": s})
        for s in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert server.counts.by_endpoint["/v1/chat/completions"] == 18
    assert server.counts.max_in_flight == 2


def test_empty_and_filtered_outputs_are_recorded(make_server) -> None:
    rules = [
        Rule(
            "",
            [
                Output("A fine answer.", 1.0),
                Output("", 1.0),
                Output("   ", 1.0),
                Output(None, 1.0, finish_reason="content_filter"),
            ],
        )
    ]
    server = make_server(rules=rules)
    outputs = sample(spec_for(server), MESSAGES, range(40), seed=0)
    assert [g.index for g in outputs] == list(range(40))  # nothing dropped, nothing padded
    kinds = {(g.status, g.finish_reason, g.text) for g in outputs}
    assert kinds == {
        ("ok", "stop", "A fine answer."),
        ("empty", "stop", ""),
        ("empty", "stop", "   "),
        ("filtered", "content_filter", ""),
    }


def test_single_choice_requests_record_the_request_usage(
    server: ScriptedServer, key_in_env: str
) -> None:
    outputs = sample(spec_for(server), MESSAGES, range(4), seed=0)
    assert key_in_env not in repr(outputs)
    prompt_words = len(MESSAGES[0].content.split())
    for g in outputs:
        assert g.prompt_tokens == prompt_words
        assert g.completion_tokens == len(g.text.split())
        assert g.cost_usd is None  # litellm has no price for "scripted"
        assert g.latency_s > 0


def test_a_priced_model_records_its_price_from_the_cost_map(make_server) -> None:
    server = make_server(models=("gpt-4o-mini",))
    outputs = sample(spec_for(server, model="openai/gpt-4o-mini"), MESSAGES, range(3), seed=0)
    price = litellm().model_cost["gpt-4o-mini"]
    for g in outputs:
        expected = (
            g.prompt_tokens * price["input_cost_per_token"]
            + g.completion_tokens * price["output_cost_per_token"]
        )
        assert g.cost_usd == pytest.approx(expected, rel=1e-9)
        assert g.cost_usd > 0


def test_several_choices_without_usage_per_choice_give_no_completion_tokens(
    server: ScriptedServer,
) -> None:
    # An OpenAI-compatible server is not known to count every choice in its usage.
    outputs = sample(spec_for(server, max_n=4), MESSAGES, range(4), seed=0)
    assert [g.completion_tokens for g in outputs] == [None] * 4
    prompt_words = len(MESSAGES[0].content.split())
    assert sum(g.prompt_tokens or 0 for g in outputs) == prompt_words


def test_usage_shares_sum_to_the_request_when_usage_covers_every_choice(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused")
    route = route_for(ModelSpec(model="openai/gpt-4o-mini"))
    response = SimpleNamespace(
        usage=SimpleNamespace(prompt_tokens=11, completion_tokens=103),
        _hidden_params={"response_cost": 0.003},
    )
    usage = _Usage.of(response, route, delivered=4, asked=4)
    assert sum(usage.prompt_tokens) == 11  # type: ignore[arg-type]
    assert sum(usage.completion_tokens) == 103  # type: ignore[arg-type]
    assert usage.cost_usd == pytest.approx(0.003 / 4)


@given(total=st.integers(0, 10**6), parts=st.integers(1, 200))
def test_split_sums_exactly_and_evenly(total: int, parts: int) -> None:
    shares = _split(total, parts)
    assert sum(shares) == total  # type: ignore[arg-type]
    assert max(shares) - min(shares) <= 1  # type: ignore[operator]


def test_request_counts_per_prompt(make_server) -> None:
    server = make_server(rules=[Rule("flu", [("rest", 1.0)]), Rule("", [("other", 1.0)])])
    flu = (Message(role="user", content="I have the flu"),)
    cold = (Message(role="user", content="I have a cold"),)
    sample(spec_for(server, max_n=3), flu, range(7), seed=0)
    sample(spec_for(server), cold, range(2), seed=0)
    assert server.counts.by_prompt == {"I have the flu": 3, "I have a cold": 2}
    assert server.counts.by_endpoint == {"/v1/chat/completions": 5}


def test_sync_and_async_give_the_same_outputs(make_server) -> None:
    server = make_server(rules=MANY_ANSWERS)
    model = spec_for(server, max_n=2)
    blocking = sample(model, MESSAGES, range(6), seed=9)
    awaited = asyncio.run(sample_async(model, MESSAGES, range(6), seed=9))
    assert _texts(blocking) == _texts(awaited)


def test_no_indices_no_requests(server: ScriptedServer) -> None:
    assert sample(spec_for(server), MESSAGES, [], seed=0) == []
    assert server.counts.total == 0


def test_a_server_ignoring_n_is_a_permanent_error(make_server) -> None:
    server = make_server(ignore_n=True)
    with pytest.raises(
        PermanentModelError,
        match=r"model 'openai/scripted': asked for 4 choices, got 1: the server ignores n; "
        r"set max_n=1",
    ):
        sample(spec_for(server, max_n=4), MESSAGES, range(4), seed=0, retry=FAST_RETRY)


def test_n_above_the_server_limit_is_a_permanent_error(make_server) -> None:
    server = make_server(max_n=2)
    with pytest.raises(PermanentModelError, match=r"HTTP 400.*n must be between 1 and 2"):
        sample(spec_for(server, max_n=4), MESSAGES, range(4), seed=0)


# -- choices per request ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ModelSpec(model="openai/gpt-4o-mini"), 16),
        (ModelSpec(model="gpt-4o-mini"), 16),
        (ModelSpec(model="openai/gpt-4o-mini", max_n=5), 5),
        (ModelSpec(model="anthropic/claude-3-5-haiku-20241022"), 1),
        (ModelSpec(model="openai/my-model", api_base="http://127.0.0.1:9/v1"), 1),
        (ModelSpec(model="openai/my-model", api_base="http://127.0.0.1:9/v1", max_n=8), 8),
        (ModelSpec(model="mistral/mistral-small-latest"), 1),
        (ModelSpec(model="local/smollm2-135m"), 1),
        (ModelSpec(model="local/smollm2-135m", max_n=4), 4),
    ],
    ids=lambda v: v.model if isinstance(v, ModelSpec) else str(v),
)
def test_choices_per_request(spec: ModelSpec, expected: int) -> None:
    assert choices_per_request(spec) == expected


def test_requests_needed_counts_blocks() -> None:
    model = ModelSpec(model="openai/gpt-4o-mini", max_n=4)
    assert requests_needed(model, range(10)) == 3
    assert requests_needed(model, [0, 1, 2, 3]) == 1
    assert requests_needed(model, [3, 4]) == 2
    assert requests_needed(model, []) == 0


def test_block_seeds_are_stable_distinct_and_in_range() -> None:
    seeds = [block_seed(0, b) for b in range(1000)]
    assert len(set(seeds)) == 1000
    assert all(0 <= s < 2**31 for s in seeds)
    assert block_seed(0, 5) == block_seed(0, 5) != block_seed(1, 5)
    # The derivation, spelled out: changing it would silently break resuming stored arms.
    digest = hashlib.sha256(b'["dbpa.llm.block_seed",7,3]').hexdigest()[:32]
    assert block_seed(7, 3) == int(digest, 16) % 2**31
