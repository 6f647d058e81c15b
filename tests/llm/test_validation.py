"""Every validation and configuration error of the sampler names what is wrong."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dbpa.llm import PermanentModelError, choices_per_request, requests_needed, sample
from dbpa.specs import Message, ModelSpec
from tests.support.scripted_server import ScriptedServer

from .conftest import MESSAGES, spec_for

MODEL = ModelSpec(model="openai/gpt-4o-mini")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"model": "openai/gpt-4o-mini"},
            TypeError,
            "model: expected a dbpa.specs.ModelSpec, got str",
        ),
        ({"messages": []}, ValueError, "messages: empty; give at least one Message"),
        ({"messages": "hello"}, TypeError, "messages: expected a sequence of Message, got str"),
        (
            {"messages": [{"role": "user", "content": "hi"}]},
            TypeError,
            r"messages\[0\]: expected a dbpa.specs.Message, got dict",
        ),
        ({"indices": [0, -1]}, ValueError, "indices: -1 is negative; output indices start at 0"),
        ({"indices": [0, 3, 3]}, ValueError, "indices: 3 appears twice"),
        ({"indices": [0.0]}, TypeError, r"indices: expected integers, got 0.0 \(float\)"),
        ({"indices": [True]}, TypeError, "indices: expected integers, got True"),
        ({"indices": "012"}, TypeError, "indices: expected integers, got a string"),
        ({"seed": 1.5}, TypeError, "seed: expected an integer, got float"),
        ({"seed": "1"}, TypeError, "seed: expected an integer, got str"),
        ({"seed": False}, TypeError, "seed: expected an integer, got False"),
    ],
)
def test_arguments_are_checked_before_any_request(
    server: ScriptedServer, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {
        "model": spec_for(server),
        "messages": MESSAGES,
        "indices": [0],
        "seed": 0,
    } | kwargs
    with pytest.raises(error, match=f"^{message}$"):
        sample(
            arguments["model"], arguments["messages"], arguments["indices"], seed=arguments["seed"]
        )
    assert server.counts.total == 0


def test_numpy_integers_are_indices_and_seeds(server: ScriptedServer, key_in_env: str) -> None:
    outputs = sample(spec_for(server), MESSAGES, np.arange(3), seed=np.int64(4))
    assert [g.index for g in outputs] == [0, 1, 2]


def test_requests_needed_checks_indices() -> None:
    with pytest.raises(ValueError, match=r"^indices: -2 is negative; output indices start at 0$"):
        requests_needed(MODEL, [-2])


@pytest.mark.parametrize(
    ("param", "hint"),
    [
        ("seed", "it is set per request from the arm's seed"),
        ("timeout", "set ModelSpec.timeout_s instead"),
        ("num_retries", "set ModelSpec.max_retries instead"),
        ("max_retries", "set ModelSpec.max_retries instead"),
    ],
)
def test_params_that_dbpa_sets_itself_are_refused(
    server: ScriptedServer, param: str, hint: str
) -> None:
    model = spec_for(server, params={param: 1})
    with pytest.raises(
        PermanentModelError, match=f"^model 'openai/scripted': params: remove '{param}': {hint}$"
    ):
        sample(model, MESSAGES, [0], seed=0)
    assert server.counts.total == 0


def test_n_for_a_provider_without_n_is_refused() -> None:
    model = ModelSpec(model="anthropic/claude-3-5-haiku-20241022", max_n=4)
    with pytest.raises(
        PermanentModelError,
        match=r"^model 'anthropic/claude-3-5-haiku-20241022': max_n=4: anthropic models take no n "
        r"\(one choice per request\); set max_n to 1 or leave it unset$",
    ):
        choices_per_request(model)


def test_unknown_provider_is_a_permanent_error() -> None:
    model = ModelSpec(model="no-such-model-xyz")
    with pytest.raises(
        PermanentModelError,
        match=r"^model 'no-such-model-xyz': unknown model: BadRequestError.*"
        r"LLM Provider NOT provided",
    ):
        sample(model, MESSAGES, [0], seed=0)


def test_unknown_local_model_is_a_permanent_error() -> None:
    with pytest.raises(
        PermanentModelError,
        match=r"^model 'local/nope': unknown local model; known: local/smollm2-135m$",
    ):
        sample(ModelSpec(model="local/nope"), [Message(role="user", content="hi")], [0], seed=0)
