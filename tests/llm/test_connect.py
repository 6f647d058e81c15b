"""An endpoint that refuses connections: named with its address, retried for the model's
connect budget (shared by every arm of the process), then one permanent error; through the
real litellm client against a port nobody listens on."""

from __future__ import annotations

import math
import random
import socket
import time

import pytest

from dbpa.llm import (
    PermanentModelError,
    Retrier,
    RetryPolicy,
    UnreachableModelError,
    endpoint_for,
    litellm,
    sample,
)
from dbpa.llm._endpoints import FORGET_AFTER_S, Endpoint
from dbpa.llm._errors import connect_failure
from dbpa.specs import DEFAULT_CONNECT_BUDGET_S, EmbedderSpec, ModelSpec
from tests.support.scripted_server import Fault

from .conftest import MESSAGES


@pytest.fixture
def refused_base() -> str:
    """The api_base of a port that refuses connections: bound, then closed, so nothing
    listens (the kernel hands ports out in turn: another socket is unlikely to take it)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}/v1"


def _refused_spec(api_base: str, **fields: object) -> ModelSpec:
    return ModelSpec(model="openai/scripted", api_base=api_base, **fields)  # type: ignore[arg-type]


def _error_from(api_base: str, timeout: float = 5.0) -> Exception:
    """What litellm raises for one request to ``api_base`` (which must fail)."""
    try:
        litellm().completion(
            model="openai/scripted",
            api_base=api_base,
            api_key="k",
            messages=[{"role": "user", "content": "hi"}],
            num_retries=0,
            max_retries=0,
            timeout=timeout,
        )
    except Exception as exc:
        return exc
    raise AssertionError(f"{api_base} answered")


def test_a_refused_connection_is_named_and_fails_after_the_budget(refused_base: str) -> None:
    budget = 2.0
    warnings: list[str] = []
    start = time.perf_counter()
    with pytest.raises(UnreachableModelError) as info:
        sample(
            _refused_spec(refused_base, connect_budget_s=budget, max_retries=0),
            MESSAGES,
            range(8),
            seed=1,
            warn=warnings.append,
        )
    elapsed = time.perf_counter() - start
    assert str(info.value) == (
        f"model 'openai/scripted': connection refused by {refused_base}; gave up after 2 s "
        "(connect_budget_s)"
    )
    assert isinstance(info.value, PermanentModelError)  # never retried by the task or flow
    assert info.value.__cause__ is None
    assert info.value.__context__ is None
    # max_retries=0 stops no connect retry: the budget governs; the first request of a
    # process takes up to a second more (litellm's lazy imports), the last attempt little.
    assert budget <= elapsed < budget + 10.0  # loose: a loaded machine (seen 6.3 s at load 15)
    assert warnings == [
        f"model 'openai/scripted': connection refused by {refused_base}; retrying for up to "
        "2 s (connect_budget_s)"
    ]


def test_the_budget_is_spent_once_for_every_arm_of_the_model(refused_base: str) -> None:
    """Each later arm makes one attempt: well under the budget, which it would spend again
    if it retried (3 s: one refused attempt took up to 0.8 s with the suite running, where
    a budget of 1 s failed the check once, 2026-11-28)."""
    budget = 3.0
    spec = _refused_spec(refused_base, connect_budget_s=budget)
    warnings: list[str] = []
    with pytest.raises(UnreachableModelError):
        sample(spec, MESSAGES, range(4), seed=1, warn=warnings.append)
    for seed in (2, 3):  # later arms of the model: one attempt each, no new warning
        start = time.perf_counter()
        with pytest.raises(UnreachableModelError, match="gave up after 3 s"):
            sample(spec, MESSAGES, range(4), seed=seed, warn=warnings.append)
        assert time.perf_counter() - start < budget
    assert len(warnings) == 1


def test_the_default_budget_is_a_minute_of_retries_then_one_error(refused_base: str) -> None:
    """The retry loop on a simulated clock: the real client's failures, fake waits."""
    error = _error_from(refused_base)
    now = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    def refused() -> None:
        raise error

    retrier = Retrier(
        model="m",
        max_retries=0,
        policy=RetryPolicy(),
        rng=random.Random(0),
        connect_budget_s=_refused_spec(refused_base).connect_budget_s,
        address=refused_base,
        clock=lambda: now[0],
    )
    with pytest.raises(UnreachableModelError, match="gave up after 60 s"):
        retrier.call(refused, sleep)
    assert DEFAULT_CONNECT_BUDGET_S == 60.0
    assert now[0] == pytest.approx(60.0)  # the last wait ends exactly at the budget
    assert all(0 <= w <= 30.0 for w in waits)  # RetryPolicy's backoff cap
    assert 4 <= len(waits) <= 60  # backoff, not a busy loop


def test_an_endpoint_that_answers_again_ends_the_outage(refused_base: str) -> None:
    error = _error_from(refused_base)
    now = [0.0]
    endpoint = Endpoint()
    answers = iter([error, error, "ok"])

    def flaky() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def sleep(seconds: float) -> None:
        now[0] += seconds

    retrier = Retrier(
        model="m",
        max_retries=0,
        policy=RetryPolicy(base_delay_s=4.0, max_delay_s=4.0),
        rng=random.Random(1),
        connect_budget_s=10.0,
        endpoint=endpoint,
        clock=lambda: now[0],
    )
    assert retrier.call(flaky, sleep) == "ok"
    now[0] += 9.0  # a new outage: the whole budget again, not 10 s minus what went before
    assert endpoint.failed_to_connect(now[0]) == 0.0


def test_an_outage_nobody_retried_for_a_while_is_forgotten() -> None:
    endpoint = Endpoint()
    assert endpoint.failed_to_connect(100.0) == 0.0
    assert endpoint.failed_to_connect(130.0) == 30.0
    assert endpoint.report_once()
    assert not endpoint.report_once()
    later = 130.0 + FORGET_AFTER_S + 1
    assert endpoint.failed_to_connect(later) == 0.0  # a process sampling again hours later
    assert endpoint.report_once()  # and it is reported again


def test_endpoints_are_shared_per_model_address_and_key_variable() -> None:
    one = endpoint_for("openai/a", "http://h/v1", "KEY")
    assert one is endpoint_for("openai/a", "http://h/v1", "KEY")
    assert one is not endpoint_for("openai/b", "http://h/v1", "KEY")
    assert one is not endpoint_for("openai/a", None, "KEY")
    assert one is not endpoint_for("openai/a", "http://h/v1", "OTHER_KEY")


def test_a_budget_of_zero_fails_at_the_first_refusal(refused_base: str) -> None:
    start = time.perf_counter()
    with pytest.raises(UnreachableModelError, match="gave up after 0 s"):
        sample(_refused_spec(refused_base, connect_budget_s=0), MESSAGES, [0], seed=1)
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize("fault", ["500", "503", "timeout"])
def test_failures_of_a_server_that_answered_are_no_connect_failures(
    make_server, fault: str
) -> None:
    """They go on being retried max_retries times (tests/llm/test_retry.py)."""
    server = make_server(timeout_sleep=2.0)
    server.push_faults(Fault(fault))  # type: ignore[arg-type]
    assert connect_failure(_error_from(server.api_base, timeout=0.5), server.api_base) is None


def test_the_address_comes_from_the_error_when_the_spec_names_none(refused_base: str) -> None:
    port = refused_base.split(":")[2].split("/")[0]
    assert connect_failure(_error_from(refused_base), None) in (
        f"connection refused by 127.0.0.1:{port}",  # aiohttp names host and port
        "connection refused by the provider's endpoint",  # a client that does not
    )


@pytest.mark.parametrize("spec", [ModelSpec, EmbedderSpec])
@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf])
def test_a_connect_budget_must_be_a_finite_number_of_seconds(spec: type, value: float) -> None:
    fields = {"model": "openai/x"} if spec is ModelSpec else {"backend": "litellm"}
    with pytest.raises(ValueError, match="connect_budget_s"):
        spec(**fields, connect_budget_s=value)


def test_a_default_budget_is_left_out_of_the_dump_and_another_kept() -> None:
    assert "connect_budget_s" not in ModelSpec(model="openai/x").model_dump()
    assert ModelSpec(model="openai/x", connect_budget_s=5).model_dump()["connect_budget_s"] == 5
    kept = ModelSpec(model="openai/x", connect_budget_s=5)
    assert ModelSpec.model_validate(kept.model_dump(mode="json")) == kept
