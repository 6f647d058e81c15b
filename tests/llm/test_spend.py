"""The spend cap in the sampler, against the scripted server through litellm."""

from __future__ import annotations

import pytest

from dbpa.llm import (
    PermanentModelError,
    SpendCap,
    SpendCapReached,
    UnknownPriceError,
    model_prices,
    sample,
)
from dbpa.specs import ModelSpec
from tests.support.scripted_server import Rule

from .conftest import MESSAGES, spec_for

pytestmark = pytest.mark.usefixtures("key_in_env")

IN, OUT, MAX_TOKENS = 1e-6, 1e-5, 50
PRICED = {"input_cost_per_token": IN, "output_cost_per_token": OUT, "params": {"max_tokens": 50}}
# The user message of MESSAGES: 35 bytes of content, 4 of role, 8 tokens per message and 8
# more: 35 + 4 + 16 = 55 prompt tokens at most, and 50 completion tokens.
RESERVED = 55 * IN + MAX_TOKENS * OUT
ANSWER = [Rule("", [("one two three", 1.0)])]  # 3 completion tokens on the scripted server
# the scripted server counts the prompt's words (8) and the answer's (3)
ANSWERED = 8 * IN + 3 * OUT


def test_requests_in_flight_count_against_the_cap(make_server) -> None:
    server = make_server(rules=ANSWER, latency=0.3)
    model = spec_for(server, max_concurrency=8, **PRICED)
    cap = SpendCap(3.5 * RESERVED)  # three reservations fit, a fourth does not
    delivered: list[object] = []
    with pytest.raises(SpendCapReached) as caught:
        sample(model, MESSAGES, range(8), seed=1, on_outputs=delivered.extend, cap=cap)
    # without the in-flight reservations all eight would go out before the first answer
    assert server.counts.by_endpoint["/v1/chat/completions"] == 3
    assert len(delivered) == 3  # the requests in flight delivered
    assert cap.spent == pytest.approx(3 * ANSWERED)
    assert cap.reserved == pytest.approx(0.0, abs=1e-12)
    assert caught.value.cap == cap.cap


def test_a_closed_cap_sends_nothing_more(make_server) -> None:
    server = make_server(rules=ANSWER)
    model = spec_for(server, **PRICED)
    cap = SpendCap(RESERVED / 2)
    with pytest.raises(SpendCapReached):
        sample(model, MESSAGES, range(2), seed=1, cap=cap)
    cap_after = SpendCap(1.0, spent_usd=0.0)
    outputs = sample(model, MESSAGES, range(2), seed=1, cap=cap_after)  # a larger cap sends
    assert len(outputs) == 2
    assert server.counts.by_endpoint["/v1/chat/completions"] == 2


def test_stored_cost_is_at_the_specs_own_prices(make_server) -> None:
    server = make_server(rules=ANSWER)
    outputs = sample(spec_for(server, **PRICED), MESSAGES, range(2), seed=1)
    assert [g.cost_usd for g in outputs] == pytest.approx([ANSWERED, ANSWERED])


def test_a_cap_counts_what_was_spent_before() -> None:
    cap = SpendCap(1.0, spent_usd=0.75)
    cap.reserve(0.25)
    with pytest.raises(SpendCapReached):
        cap.reserve(0.01)
    with pytest.raises(SpendCapReached):  # closed: even a request that would fit
        cap.reserve(0.0)


def test_an_unpriced_model_is_not_sent_under_a_cap(make_server) -> None:
    server = make_server(rules=ANSWER)
    with pytest.raises(UnknownPriceError, match="input_cost_per_token and output_cost_per_token"):
        sample(spec_for(server), MESSAGES, range(1), seed=1, cap=SpendCap(1.0))
    assert server.counts.by_endpoint["/v1/chat/completions"] == 0


def test_a_priced_model_without_max_tokens_is_not_sent_under_a_cap(make_server) -> None:
    server = make_server(rules=ANSWER)
    model = spec_for(server, input_cost_per_token=IN, output_cost_per_token=OUT)
    with pytest.raises(PermanentModelError, match="max_tokens"):
        sample(model, MESSAGES, range(1), seed=1, cap=SpendCap(1.0))
    assert server.counts.by_endpoint["/v1/chat/completions"] == 0


def test_the_embedded_model_costs_nothing() -> None:
    prices = model_prices(ModelSpec(model="local/smollm2-135m"))
    assert (prices.input_per_token, prices.output_per_token) == (0.0, 0.0)


@pytest.mark.parametrize("cap", [0, -1.0])
def test_a_cap_not_above_0_is_refused(cap: float) -> None:
    with pytest.raises(ValueError, match="max_cost_usd"):
        SpendCap(cap)


def test_the_line_says_spent_cap_missing_and_how_to_resume() -> None:
    line = SpendCapReached(0.5, 0.4, missing=12).line("dbpa run a.yaml")
    assert "$0.5000 spent of max_cost_usd=$0.4" in line
    assert "12 output(s) still missing" in line
    assert "dbpa run a.yaml --set max_cost_usd=0.9" in line


def test_a_models_own_cap_stops_that_model_only(make_server) -> None:
    server = make_server(rules=ANSWER)
    capped = spec_for(server, name="capped", **PRICED)
    free = spec_for(server, name="free", **PRICED)
    key = "models.0.max_cost_usd"
    cap = SpendCap(None, model_caps={"capped": (key, 1.5 * RESERVED)})  # one request fits
    with pytest.raises(SpendCapReached) as caught:
        sample(capped, MESSAGES, range(3), seed=1, cap=cap)
    assert caught.value.key == key
    assert f"resume with a larger cap: dbpa run a.yaml --set {key}=" in caught.value.line(
        "dbpa run a.yaml"
    )
    assert server.counts.by_endpoint["/v1/chat/completions"] == 1
    assert len(sample(free, MESSAGES, range(3), seed=1, cap=cap)) == 3  # no cap of its own
    assert server.counts.by_endpoint["/v1/chat/completions"] == 4
    assert cap.spent == pytest.approx(ANSWERED)  # no cap holds the free model: not counted


def test_the_runs_cap_and_a_models_both_hold() -> None:
    cap = SpendCap(1.0, model_caps={"a": ("models.0.max_cost_usd", 0.5)})
    cap.reserve(0.4, "a")
    with pytest.raises(SpendCapReached, match=r"models\.0\.max_cost_usd=\$0\.5"):
        cap.reserve(0.2, "a")
    cap.reserve(0.5, "b")  # the run's cap: 0.4 + 0.5 reserved
    with pytest.raises(SpendCapReached, match=r"of max_cost_usd=\$1;"):
        cap.reserve(0.2, "b")


@pytest.mark.parametrize("usd", [0, -0.5])
def test_a_models_cap_not_above_0_is_refused(usd: float) -> None:
    with pytest.raises(ValueError, match=r"models\.1\.max_cost_usd"):
        SpendCap(None, model_caps={"m": ("models.1.max_cost_usd", usd)})


def test_a_hold_counts_whatever_the_cap_says_and_settles_like_a_reservation() -> None:
    cap = SpendCap(1.0)
    cap.hold(1.5, "m")  # a batch created before the cap was lowered
    assert cap.reserved == pytest.approx(1.5)
    with pytest.raises(SpendCapReached):
        cap.reserve(0.01, "m")
    cap.settle(1.5, 0.4, "m")
    assert (cap.spent, cap.reserved) == (pytest.approx(0.4), pytest.approx(0.0))
