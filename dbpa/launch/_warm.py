"""The warm-ups that follow from what a run still has to do (``_work``).

``dbpa run`` loads nothing the record makes unnecessary: a finished audit asks no model and
embeds nothing, so its re-run imports neither litellm nor torch and starts no local model.
What a run needs first is loaded while Prefect's server starts: litellm and the local
models' servers (or, with nothing to sample, the report package). The embedder (torch and
sentence-transformers, the heaviest import) loads in a background thread once the first
output is stored, so that it does not slow the way to the first model request, is ready
early for the first arms' embedding, and is not loaded at all when every request fails. The
flow loads whatever it uses on first use as before, so a warm-up only ever saves time; the
errors of the background ones are left for the flow to meet and report.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dbpa import progress

from ._work import PendingWork

if TYPE_CHECKING:
    from dbpa.specs import EmbedderSpec


def warm_up(work: PendingWork) -> None:
    """Load what the run needs first: the servers of the local models among ``work.models``
    in background threads (native work), then litellm when something is to be sampled, else
    the report package (such a run goes straight to its report), in this thread: imports
    hold the interpreter lock anyway, and imports in two threads at once can deadlock."""
    if not work.models:
        importlib.import_module("dbpa.report")
        return
    from dbpa.llm import litellm, local_server
    from dbpa.specs import LOCAL_MODEL_PREFIX

    for model in sorted(m for m in work.models if m.startswith(LOCAL_MODEL_PREFIX)):
        _background(f"dbpa-warm-{model}", lambda model=model: local_server(model))
    litellm()


@contextmanager
def embedder_warmed(spec: EmbedderSpec, work: PendingWork) -> Iterator[None]:
    """Inside the block, load the embedder of ``spec`` in a background thread: at once when
    nothing is to be sampled, else once the first output is stored (nothing when no
    output needs a vector)."""
    if not work.embedding:
        yield
        return
    from dbpa.embedding import get_embedder

    def load() -> None:
        get_embedder(spec)

    if not work.models:
        _background("dbpa-warm-embedder", load)
        yield
        return
    with progress.listen(_once_sampled(lambda: _background("dbpa-warm-embedder", load))):
        yield


def _once_sampled(start: Callable[[], None]) -> progress.Listener:
    """A progress listener that calls ``start`` once, at the first output sampled."""
    first: dict[str, int] = {}
    lock = threading.Lock()

    def listener(update: progress.Progress) -> None:
        if update.phase != "sample":
            return
        with lock:
            before = first.setdefault("done", update.done)
            if update.done <= before or first.get("started"):
                return
            first["started"] = 1
        start()

    return listener


WARM_UP_WAIT = 120.0
"""Seconds the end of a run waits, at most, for the warm-ups still loading."""

_started: list[threading.Thread] = []


def wait_for_warm_ups(timeout: float = WARM_UP_WAIT) -> None:
    """Wait until the background warm-ups have ended (``timeout`` seconds at most, in all).

    A run can end while one still loads (a re-run with nothing to sample). A daemon thread
    stopped by the interpreter's exit in the middle of an import never releases the import
    lock, and a finalizer that imports (litellm's HTTP handlers do) then waits for it
    forever: the command would print its results and never exit."""
    deadline = time.monotonic() + timeout
    while _started:
        _started.pop().join(max(0.0, deadline - time.monotonic()))


def _background(name: str, load: Callable[[], object]) -> None:
    def run() -> None:
        with contextlib.suppress(Exception):  # the flow meets and reports it on first use
            load()

    thread = threading.Thread(target=run, name=name, daemon=True)
    _started.append(thread)
    thread.start()
