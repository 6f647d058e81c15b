"""The scripted provider's draws without seeds: random across calls, yet one conversation's
answers do not depend on the order in which other conversations arrive."""

from __future__ import annotations

import httpx

from tests.support.scripted_server import Rule, ScriptedServer

RULES = [Rule("", [(f"answer {i}", 1.0) for i in range(8)])]


def _answers(server: ScriptedServer, order: list[str]) -> dict[str, list[list[str]]]:
    """Each system prompt of ``order`` asked in turn, 4 choices a call: the texts per prompt."""
    seen: dict[str, list[list[str]]] = {}
    with httpx.Client(base_url=server.api_base) as client:
        for system in order:
            body = {
                "model": "scripted",
                "n": 4,
                "seed": 7,  # ignored
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": "Should I see a doctor?"},
                ],
            }
            reply = client.post("/chat/completions", json=body).json()
            seen.setdefault(system, []).append([c["message"]["content"] for c in reply["choices"]])
    return seen


def test_unseeded_draws_do_not_depend_on_other_conversations_order():
    with ScriptedServer(rules=RULES, ignore_seed=True) as server:
        first = _answers(server, ["a", "b", "a", "b", "a"])
    with ScriptedServer(rules=RULES, ignore_seed=True) as server:
        second = _answers(server, ["b", "b", "a", "a", "a"])
    assert first == second
    calls = first["a"]
    assert len({tuple(c) for c in calls}) > 1  # a call does not repeat the one before
    assert calls[0] != first["b"][0]  # nor another conversation's


def test_the_server_seed_changes_the_draws():
    with ScriptedServer(rules=RULES, ignore_seed=True, seed=1) as server:
        one = _answers(server, ["a", "a"])
    with ScriptedServer(rules=RULES, ignore_seed=True, seed=2) as server:
        two = _answers(server, ["a", "a"])
    assert one != two
