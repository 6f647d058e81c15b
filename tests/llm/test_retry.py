"""Retries and fail-fast, against the scripted server through the real litellm client."""

from __future__ import annotations

import logging
import pickle
import random
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from dbpa.llm import (
    PermanentModelError,
    RetryPolicy,
    TransientModelError,
    sample,
)
from dbpa.llm._endpoints import FORGET_AFTER_S, Endpoint
from dbpa.llm._retry import retry_after_s
from tests.support.providers import KEY_ENV, SECRET
from tests.support.scripted_server import Fault, ScriptedServer

from .conftest import FAST_RETRY, MESSAGES, spec_for


@pytest.mark.usefixtures("key_in_env")
def test_429_waits_for_retry_after(server: ScriptedServer) -> None:
    server.push_faults(Fault("429", retry_after=1.0))
    start = time.perf_counter()
    outputs = sample(spec_for(server), MESSAGES, [0], seed=1, retry=FAST_RETRY)
    waited = time.perf_counter() - start
    assert [g.index for g in outputs] == [0]
    assert server.counts.by_endpoint["/v1/chat/completions"] == 2
    # FAST_RETRY alone would wait at most 0.01 s: the extra second is the Retry-After.
    assert 1.0 <= waited < 2.5


@pytest.mark.usefixtures("key_in_env")
def test_retry_after_is_capped(server: ScriptedServer) -> None:
    server.push_faults(Fault("429", retry_after=30.0))
    policy = RetryPolicy(base_delay_s=0.01, max_retry_after_s=0.2)
    start = time.perf_counter()
    sample(spec_for(server), MESSAGES, [0], seed=1, retry=policy)
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize(
    "faults",
    [
        [Fault("500")],
        [Fault("503")],
        [Fault("500"), Fault("503"), Fault("500")],
        [Fault("malformed")],
        [Fault("503", retry_after=0.1), Fault("malformed")],
    ],
    ids=["500", "503", "500-503-500", "malformed-json", "503-malformed"],
)
@pytest.mark.usefixtures("key_in_env")
def test_transient_errors_are_retried_then_succeed(
    server: ScriptedServer, faults: list[Fault]
) -> None:
    server.push_faults(*faults)
    outputs = sample(spec_for(server), MESSAGES, [0], seed=1, retry=FAST_RETRY)
    assert len(outputs) == 1
    assert outputs[0].status == "ok"
    assert server.counts.by_endpoint["/v1/chat/completions"] == len(faults) + 1


@pytest.mark.usefixtures("key_in_env")
def test_timeout_is_retried_without_waiting_for_the_server(make_server) -> None:
    server = make_server(timeout_sleep=5.0)
    server.push_faults(Fault("timeout"))
    start = time.perf_counter()
    outputs = sample(spec_for(server, timeout_s=0.5), MESSAGES, [0], seed=1, retry=FAST_RETRY)
    elapsed = time.perf_counter() - start
    assert len(outputs) == 1
    assert server.counts.faults["timeout"] == 1
    assert server.counts.by_endpoint["/v1/chat/completions"] == 2
    assert 0.5 <= elapsed < 3.0


@pytest.mark.usefixtures("key_in_env")
def test_retries_exhausted_raise_transient_error(server: ScriptedServer) -> None:
    server.push_faults(*[Fault("503")] * 10)
    with pytest.raises(TransientModelError) as info:
        sample(spec_for(server, max_retries=2), MESSAGES, [0], seed=1, retry=FAST_RETRY)
    assert server.counts.by_endpoint["/v1/chat/completions"] == 3
    assert "model 'openai/scripted'" in str(info.value)
    assert "still failing after 2 retries" in str(info.value)
    assert "503" in str(info.value)
    assert info.value.status_code == 503


def test_401_fails_at_once_naming_the_model_not_the_key(
    server: ScriptedServer,
    key_in_env: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server.push_faults(Fault("401"))
    caplog.set_level(logging.DEBUG)
    start = time.perf_counter()
    with pytest.raises(PermanentModelError) as info:
        sample(spec_for(server, name="my-model"), MESSAGES, range(8), seed=1)
    elapsed = time.perf_counter() - start
    # No retry of the rejected request and no backoff: the count is the check; the loose time
    # bound (one default backoff window is up to 0.5-30 s) only catches a wait, not load.
    assert server.counts.by_endpoint["/v1/chat/completions"] <= 8
    assert server.counts.faults["401"] == 1
    assert elapsed < 5.0
    message = str(info.value)
    assert "model 'my-model'" in message
    assert "401" in message
    assert f"${KEY_ENV}" in message  # where the key came from: its name
    assert "Incorrect API key provided: ***" in message  # the server quoted it; we did not
    assert key_in_env not in message
    assert key_in_env not in repr(info.value)
    assert info.value.__cause__ is None
    assert info.value.__context__ is None
    assert key_in_env not in caplog.text
    captured = capsys.readouterr()
    assert key_in_env not in captured.out + captured.err


@pytest.mark.usefixtures("key_in_env")
def test_permanent_error_stops_the_arm(server: ScriptedServer) -> None:
    server.push_faults(Fault("400"))
    delivered: list[int] = []
    with pytest.raises(PermanentModelError, match=r"model 'openai/scripted': .*HTTP 400"):
        sample(
            spec_for(server, max_concurrency=1),
            MESSAGES,
            range(20),
            seed=1,
            on_outputs=lambda gs: delivered.extend(g.index for g in gs),
        )
    # The first request failed; with one request in flight at a time nothing else was sent.
    assert server.counts.by_endpoint["/v1/chat/completions"] == 1
    assert delivered == []


@pytest.mark.usefixtures("key_in_env")
def test_outputs_delivered_before_a_failure_stay_delivered(server: ScriptedServer) -> None:
    server.push_faults(None, None, Fault("400"))
    delivered: list[int] = []
    with pytest.raises(PermanentModelError):
        sample(
            spec_for(server, max_concurrency=1),
            MESSAGES,
            range(5),
            seed=1,
            on_outputs=lambda gs: delivered.extend(g.index for g in gs),
        )
    assert delivered == [0, 1]


@pytest.mark.usefixtures("key_in_env")
def test_random_faults_are_all_recovered(make_server) -> None:
    server = make_server(fault_rates={"500": 0.2, "429": 0.1, "malformed": 0.1}, fault_seed=3)
    outputs = sample(
        spec_for(server, max_retries=8, max_n=2), MESSAGES, range(40), seed=5, retry=FAST_RETRY
    )
    assert [g.index for g in outputs] == list(range(40))
    assert sum(server.counts.faults.values()) > 0


def test_missing_key_variable_is_permanent(server: ScriptedServer, monkeypatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(
        PermanentModelError,
        match=rf"model 'openai/scripted': api_key_env: environment variable \${KEY_ENV} is not set",
    ):
        sample(spec_for(server), MESSAGES, [0], seed=1)
    assert server.counts.total == 0


def test_keyless_openai_compatible_server(server: ScriptedServer, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    outputs = sample(spec_for(server, api_key_env=None), MESSAGES, [0, 1], seed=1)
    assert len(outputs) == 2


# -- the policy itself --------------------------------------------------------------------


def test_backoff_is_full_jitter_within_an_exponential_window() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    rng = random.Random(0)
    for retry, window in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 4.0), (9, 4.0)]:
        delays = [policy.delay(retry, None, rng) for _ in range(400)]
        assert min(delays) >= 0.0
        assert max(delays) <= window
        assert max(delays) > 0.9 * window  # the whole window is used
        assert min(delays) < 0.1 * window


def test_backoff_is_reproducible_with_a_seeded_rng() -> None:
    policy = RetryPolicy()
    first = [policy.delay(r, None, random.Random(7)) for r in range(1, 6)]
    again = [policy.delay(r, None, random.Random(7)) for r in range(1, 6)]
    assert first == again


def test_retry_after_is_a_floor_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.1, max_delay_s=1.0, max_retry_after_s=10.0)
    rng = random.Random(1)
    assert all(3.0 <= policy.delay(1, 3.0, rng) <= 3.0 for _ in range(50))
    assert policy.delay(1, 500.0, rng) == 10.0


@pytest.mark.parametrize("name", ["base_delay_s", "max_delay_s", "max_retry_after_s"])
def test_policy_rejects_negative_values(name: str) -> None:
    with pytest.raises(ValueError, match=rf"{name}: must be >= 0, got -1"):
        RetryPolicy(**{name: -1})


class _Failure(Exception):
    def __init__(self, headers: dict[str, str] | None) -> None:
        super().__init__("failure")
        self.litellm_response_headers = headers


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_header_parsing(headers: dict[str, str] | None, expected: float) -> None:
    assert retry_after_s(_Failure(headers)) == expected


def test_retry_after_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    seconds = retry_after_s(_Failure({"retry-after": when}))
    assert seconds is not None
    assert 27.0 < seconds <= 30.0


@pytest.mark.parametrize("cls", [TransientModelError, PermanentModelError])
def test_model_errors_survive_pickling(cls: type[Exception]) -> None:
    error = cls("m", "HTTP 500: boom", 500)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls
    assert str(again) == "model 'm': HTTP 500: boom"
    assert (again.model, again.reason, again.status_code) == ("m", "HTTP 500: boom", 500)


def test_secret_looking_environment_values_are_redacted(server, monkeypatch) -> None:
    # litellm may pick a key from the provider's default variable: never echo it either.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.push_faults(Fault("401"))
    with pytest.raises(PermanentModelError) as info:
        sample(spec_for(server, api_key_env=None), MESSAGES, [0], seed=1)
    assert SECRET not in str(info.value)
    assert "***" in str(info.value)


@pytest.mark.usefixtures("key_in_env")
def test_a_rejected_key_is_asked_once_for_every_arm_of_the_model(server: ScriptedServer) -> None:
    """Arms of one model sampled one after the other, as task runs do: after the first
    401, no arm sends a request; each fails at once with the same message."""
    server.push_faults(*[Fault("401")] * 100)
    spec = spec_for(server, max_concurrency=2)
    messages: set[str] = set()
    for seed in range(5):
        with pytest.raises(PermanentModelError) as info:
            sample(spec, MESSAGES, range(8), seed=seed)
        messages.add(str(info.value))
    assert server.counts.by_endpoint["/v1/chat/completions"] <= 2  # those in flight together
    assert len(messages) == 1
    assert "AuthenticationError (HTTP 401)" in messages.pop()


@pytest.mark.usefixtures("key_in_env")
def test_a_bad_request_stops_only_its_own_arm(server: ScriptedServer) -> None:
    """A 400 may be one prompt's fault (its context too long): the next arm asks."""
    server.push_faults(Fault("400"))
    with pytest.raises(PermanentModelError, match="HTTP 400"):
        sample(spec_for(server, max_concurrency=1), MESSAGES, [0], seed=1)
    assert len(sample(spec_for(server, max_concurrency=1), MESSAGES, [0], seed=2)) == 1


def test_an_old_rejection_is_checked_again() -> None:
    endpoint = Endpoint()
    endpoint.reject(PermanentModelError("m", "bad request", 400), 0.0)
    assert endpoint.rejection(1.0) is None  # not endpoint-wide
    endpoint.reject(PermanentModelError("m", "no such model", 404), 0.0)
    known = endpoint.rejection(FORGET_AFTER_S)
    assert known is not None
    assert (known.model, known.reason, known.status_code) == ("m", "no such model", 404)
    assert endpoint.rejection(FORGET_AFTER_S + 1) is None
