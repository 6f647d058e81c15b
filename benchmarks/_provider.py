"""The scripted OpenAI-compatible provider in a process of its own, for the benchmarks.

In the audit's process its request handling would compete with the audit for the
interpreter lock; a real provider is elsewhere too.
"""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection

from tests.support.scripted_server import Rule, ScriptedServer


@dataclass(frozen=True)
class Requests:
    """What the provider has served so far."""

    chat: int
    """Chat completion requests."""
    total: int
    """Requests to any endpoint."""
    repeated: int
    """Chat requests for a (prompt, seed) asked before."""


class RemoteProvider:
    """A ScriptedServer in a child process, asked for its counts over a pipe."""

    def __init__(self, conn: Connection, api_base: str) -> None:
        self._conn, self.api_base = conn, api_base

    def requests(self) -> Requests:
        """The requests served so far."""
        self._conn.send("counts")
        return Requests(*self._conn.recv())


def _serve(conn: Connection, rules: Sequence[Rule], latency: float) -> None:
    with ScriptedServer(rules=rules, latency=latency) as server:
        conn.send(server.api_base)
        while conn.recv() == "counts":
            asked = Counter(
                (str(r.get("messages")), r.get("seed"))
                for r in list(server.counts.requests)
                if "messages" in r
            )
            conn.send(
                (
                    server.counts.by_endpoint["/v1/chat/completions"],
                    server.counts.total,
                    sum(n - 1 for n in asked.values()),
                )
            )


@contextmanager
def remote_provider(rules: Sequence[Rule], latency: float) -> Iterator[RemoteProvider]:
    """A scripted provider answering by ``rules`` after ``latency`` seconds, in a child."""
    ours, theirs = mp.get_context("spawn").Pipe()
    child = mp.get_context("spawn").Process(
        target=_serve, args=(theirs, tuple(rules), latency), daemon=True
    )
    child.start()
    try:
        yield RemoteProvider(ours, ours.recv())
    finally:
        ours.send("stop")
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
