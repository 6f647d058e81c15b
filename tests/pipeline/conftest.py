"""A scripted provider and audit configs that point at it (models and embeddings)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.scripted_server import Rule, ScriptedServer

KEY_ENV = "DBPA_PIPELINE_TEST_KEY"

# Medical personas answer like the original; the comedian and the child do not.
RULES = (
    Rule("comedian", [("Why did the flu cross the road? Rest!", 1), ("Knock knock, it's flu.", 1)]),
    Rule("child", [("My tummy hurts and I want my mum.", 1), ("Ask a grown-up!", 1)]),
    Rule(
        "",
        [
            ("Rest, drink fluids and see a doctor if it gets worse.", 2),
            ("See a doctor if your fever lasts more than three days.", 1),
            ("Most flu gets better with rest at home.", 1),
        ],
    ),
)

ONE_ANSWER_EACH = (
    Rule("comedian", [("Knock knock, it's flu.", 1)]),
    Rule("child", [("Ask a grown-up!", 1)]),
    Rule("", [("Rest, drink fluids and see a doctor if it gets worse.", 1)]),
)
"""The same personas answering one text each, every time (a deterministic model). Only a
target's observed split and its mirror image reach its observed statistic, so its p-value is
the smallest B allows. Under ``RULES`` other splits can tie or beat it, depending on the hashed
embeddings and the arms' seeds (which depend on the server's random port)."""

BASE: dict[str, Any] = {
    "name": "persona-test",
    "prompt": "My flu has lasted two days. Should I see a doctor?",
    "perturbations": [
        {
            "kind": "personas",
            "values": [
                {"value": "doctor", "label": "control"},
                {"value": "nurse", "label": "control"},
                {"value": "comedian", "label": "target"},
                {"value": "child", "label": "target"},
            ],
        },
    ],
    "k": 8,
    "n_permutations": 199,
    "seed": 7,
}


@pytest.fixture(autouse=True)
def _key_and_cwd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The provider key in the environment; a temp working directory (reports go there)."""
    monkeypatch.setenv(KEY_ENV, "sk-pipeline-test")
    monkeypatch.chdir(tmp_path)


ROTATING = (
    *ONE_ANSWER_EACH[:2],
    Rule(
        "",
        [
            ("Rest, drink fluids and see a doctor if it gets worse.", 1),
            ("See a doctor if your fever lasts more than three days.", 1),
        ],
        rotate=True,
    ),
)
"""The comedian and the child answer one text each; the original and the medical personas
two texts in turn, so every arm of an even k holds each half the time: arms that vary, and
certain decisions (a target's split is the only one that reaches its statistic, a
control's arms are equal)."""


@pytest.fixture
def provider() -> Iterator[ScriptedServer]:
    with ScriptedServer(rules=RULES, embedding_dimension=24) as server:
        yield server


@pytest.fixture
def one_answer_provider() -> Iterator[ScriptedServer]:
    """The provider answering by ``ONE_ANSWER_EACH``."""
    with ScriptedServer(rules=ONE_ANSWER_EACH, embedding_dimension=24) as server:
        yield server


@pytest.fixture
def rotating_provider() -> Iterator[ScriptedServer]:
    """The provider answering by ``ROTATING``."""
    with ScriptedServer(rules=ROTATING, embedding_dimension=24) as server:
        yield server


def make_config(server: ScriptedServer, **overrides: Any) -> dict[str, Any]:
    """An audit config dict whose model and embedder are the scripted server."""
    config = copy.deepcopy(BASE)
    config["models"] = [
        {
            "model": "openai/scripted",
            "api_base": server.api_base,
            "api_key_env": KEY_ENV,
            "max_concurrency": 8,
            "max_n": 1,
        }
    ]
    config["embedder"] = {
        "backend": "litellm",
        "model": "openai/scripted",
        "api_base": server.api_base,
        "api_key_env": KEY_ENV,
    }
    config.update(overrides)
    return config


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    def write(config: dict[str, Any], name: str = "audit.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(config))
        return path

    return write


def follows_the_rule(df: Any, alpha: float) -> None:
    """Every row of ``df`` (results indexed by perturbation id) decided by the three-way rule:
    equivalent when the adjusted equivalence p-value passes; else changed when the change test
    rejected; else inconclusive."""
    for r in df.itertuples():
        want = (
            "equivalent"
            if r.adjusted_equivalence_p <= alpha
            else "changed"
            if r.reject
            else "inconclusive"
        )
        assert r.decision == want, r.Index
