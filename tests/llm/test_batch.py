"""Provider batches through litellm's Files + Batches API, against the scripted server."""

from __future__ import annotations

import json
import time

import pytest

from dbpa.llm import (
    BATCH_DISCOUNT,
    BatchLimits,
    BatchUnsupportedError,
    PermanentModelError,
    TransientModelError,
    batch_prices,
    batch_requests,
    block_seed,
    check_batchable,
    collect,
    poll,
    sample,
    split,
    submit,
)
from dbpa.specs import ModelSpec
from tests.support.scripted_server import BatchScript, Fault

from .conftest import MESSAGES, spec_for

pytestmark = pytest.mark.usefixtures("key_in_env")

META = {"dbpa_audit": "test"}


def _run(server, model, requests, *, wait: float = 5.0):
    """Submit ``requests`` as one batch and poll it until it is done."""
    batch = submit(model, requests, META)
    end = time.monotonic() + wait
    while not (state := poll(model, batch.batch_id)).done:
        assert time.monotonic() < end, state
        time.sleep(0.05)
    return batch, state


def test_a_batch_answers_what_the_sampler_would(make_server) -> None:
    server = make_server()
    model = spec_for(server, max_n=2)
    requests = batch_requests(model, "arm1", MESSAGES, range(5), seed=7)
    assert [r.custom_id for r in requests] == ["arm1/0", "arm1/1", "arm1/2"]
    assert [r.indices for r in requests] == [(0, 1), (2, 3), (4,)]
    assert [r.seed for r in requests] == [block_seed(7, b) for b in range(3)]
    assert [json.loads(r.line)["body"].get("n") for r in requests] == [2, 2, None]
    batch, state = _run(server, model, requests)
    assert (state.status, state.total, state.completed, state.failed) == ("completed", 3, 3, 0)
    assert batch.input_file_id.startswith("file-")
    got = collect(model, state, requests, None)
    assert got.failed == {}
    online = sample(model, MESSAGES, range(5), seed=7)
    batched = sorted(got.outputs["arm1"], key=lambda g: g.index)
    assert [(g.index, g.text, g.seed) for g in batched] == [
        (g.index, g.text, g.seed) for g in online
    ]
    assert server.counts.by_endpoint["/v1/batches"] == 1


def test_failed_expired_and_cancelled_requests_come_back_as_failed(make_server) -> None:
    server = make_server(
        batch_script=[
            BatchScript(fail_every=2),
            BatchScript(delay_s=0.2, outcome="expired", answered=1),
            BatchScript(outcome="cancelled", answered=2),
            BatchScript(outcome="failed"),
        ]
    )
    model = spec_for(server)
    requests = batch_requests(model, "a", MESSAGES, range(3), seed=1)
    _, partial = _run(server, model, requests)
    got = collect(model, partial, requests, None)
    assert set(got.failed) == {"a/1"}
    assert "HTTP 500" in got.failed["a/1"]
    assert sorted(g.index for g in got.outputs["a"]) == [0, 2]

    _, expired = _run(server, model, requests)
    assert expired.status == "expired"
    got = collect(model, expired, requests, None)
    assert set(got.failed) == {"a/1", "a/2"}
    assert "batch_expired" in got.failed["a/2"]

    _, cancelled = _run(server, model, requests)  # cancelled by someone else, 2 answered
    got = collect(model, cancelled, requests, None)
    assert cancelled.status == "cancelled"
    assert (sorted(g.index for g in got.outputs["a"]), set(got.failed)) == ([0, 1], {"a/2"})

    _, failed = _run(server, model, requests)
    got = collect(model, failed, requests, None)
    assert failed.status == "failed"
    assert (got.outputs, set(got.failed)) == ({}, {"a/0", "a/1", "a/2"})


def test_outputs_are_priced_at_the_batch_price(make_server) -> None:
    server = make_server()
    model = spec_for(
        server, input_cost_per_token=2e-6, output_cost_per_token=1e-5, params={"max_tokens": 9}
    )
    prices = batch_prices(model)
    assert (prices.input_per_token, prices.output_per_token) == (1e-6, 5e-6)
    requests = batch_requests(model, "a", MESSAGES, range(1), seed=1)
    _, state = _run(server, model, requests)
    (output,) = collect(model, state, requests, prices).outputs["a"]
    expected = output.prompt_tokens * 1e-6 + output.completion_tokens * 5e-6
    assert output.cost_usd == pytest.approx(expected)


def test_the_price_maps_batch_prices_win_over_the_discount() -> None:
    prices = batch_prices(ModelSpec(model="openai/gpt-4o-mini"))
    assert prices.input_per_token == pytest.approx(7.5e-8)  # the map's batch price
    assert prices.output_per_token == pytest.approx(3e-7)
    assert BATCH_DISCOUNT == 0.5


def test_batches_are_split_by_requests_and_bytes(make_server) -> None:
    model = spec_for(make_server())
    requests = batch_requests(model, "a", MESSAGES, range(7), seed=1)
    line = len(requests[0].line.encode()) + 1
    assert [len(b) for b in split(requests, BatchLimits(3, 10**6))] == [3, 3, 1]
    assert [len(b) for b in split(requests, BatchLimits(100, 2 * line + 1))] == [2, 2, 2, 1]
    with pytest.raises(ValueError, match="above a batch's limit"):
        split(requests, BatchLimits(100, line - 1))


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("local/smollm2-135m", "has no batch API"),
        ("anthropic/claude-3-5-haiku-20241022", "'anthropic', which has no batch API"),
    ],
)
def test_a_provider_without_a_batch_api_is_named(model: str, why: str) -> None:
    with pytest.raises(BatchUnsupportedError, match=why) as caught:
        check_batchable(ModelSpec(model=model, name="m1"))
    assert "model 'm1': batch: true" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "error"), [("500", TransientModelError), ("400", PermanentModelError)]
)
def test_a_batch_endpoint_answering_an_error_is_a_model_error(make_server, kind, error) -> None:
    server = make_server(script=[Fault(kind, endpoint="/v1/batches")])
    model = spec_for(server, max_retries=0)
    requests = batch_requests(model, "a", MESSAGES, range(1), seed=1)
    with pytest.raises(error, match="create_batch"):
        submit(model, requests, META)
