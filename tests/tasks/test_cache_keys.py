"""Every cached task's key changes with any content its result is computed from."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dbpa.analysis import AnalysisSpec
from dbpa.specs import EmbedderSpec
from tasks.correct import correct_family
from tasks.embed import embed_texts
from tasks.permutation import TestJob, run_tests


def _key(task: Any, **parameters: Any) -> str:
    context = SimpleNamespace(task=SimpleNamespace(name=task.name))
    return task.cache_key_fn(context, parameters)


def _jobs(original: np.ndarray, perturbed: np.ndarray, test_id: str = "t1") -> list[TestJob]:
    return [TestJob(test_id, "arm-o", "arm-p", original, perturbed)]


@pytest.fixture
def vectors() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((8, 4)).astype(np.float32),
        rng.standard_normal((8, 4)).astype(np.float32),
    )


def _test_key(jobs: list[TestJob], embedder: str = "e", **analysis: Any) -> str:
    spec = AnalysisSpec(**analysis)
    return _key(run_tests, jobs=jobs, embedder=embedder, analysis=spec, label="x")


def test_a_test_key_is_the_same_for_the_same_content(vectors):
    a, b = vectors
    assert _test_key(_jobs(a, b)) == _test_key(_jobs(a.copy(), b.copy()))


@pytest.mark.parametrize("arm", [0, 1])
def test_a_test_key_changes_with_the_vectors_under_the_same_test_id(vectors, arm):
    """Two records of one config hold the same test ids over different outputs."""
    changed = [v.copy() for v in vectors]
    changed[arm][3, 2] += np.float32(1e-3)
    assert _test_key(_jobs(*vectors)) != _test_key(_jobs(*changed))


def test_a_test_key_changes_with_the_shape_and_type_of_the_vectors(vectors):
    a, b = vectors
    assert _test_key(_jobs(a, b)) != _test_key(_jobs(a.astype(np.float64), b))
    assert _test_key(_jobs(a, b)) != _test_key(_jobs(a.reshape(4, 8), b))


@pytest.mark.parametrize(
    "setting",
    [{"n_permutations": 999}, {"omega": "jsd"}, {"similarity": "neg_l2"}, {"alpha": 0.01}],
)
def test_a_test_key_changes_with_every_analysis_setting(vectors, setting):
    assert _test_key(_jobs(*vectors)) != _test_key(_jobs(*vectors), **setting)


def test_a_test_key_changes_with_the_embedder_and_the_test_id(vectors):
    assert _test_key(_jobs(*vectors)) != _test_key(_jobs(*vectors), embedder="other")
    assert _test_key(_jobs(*vectors)) != _test_key(_jobs(*vectors, test_id="t2"))


def _embed_key(texts: list[str], model: str = "all-MiniLM-L6-v2") -> str:
    spec = EmbedderSpec(backend="litellm", model=model)
    return _key(embed_texts, texts=texts, embedder=spec, label="x")


def test_an_embedding_key_changes_with_the_texts_and_the_embedder():
    assert _embed_key(["a", "b"]) == _embed_key(["a", "b"])
    assert _embed_key(["a", "b"]) != _embed_key(["a", "c"])
    assert _embed_key(["a", "b"]) != _embed_key(["b", "a"])
    assert _embed_key(["a", "b"]) != _embed_key(["a", "b"], model="text-embedding-3-small")


def _correct_key(**overrides: Any) -> str:
    parameters: dict[str, Any] = {
        "family": "f",
        "p_values": {"x": 0.01, "y": 0.2},
        "analysis": AnalysisSpec(),
        "equivalence_p": {"x": 0.5, "y": 0.01},
        "margin": 0.1,
    }
    return _key(correct_family, **{**parameters, **overrides})


@pytest.mark.parametrize(
    "change",
    [
        {"p_values": {"x": 0.01, "y": 0.3}},
        {"p_values": {"x": 0.2, "y": 0.01}},
        {"analysis": AnalysisSpec(correction="bh")},
        {"analysis": AnalysisSpec(alpha=0.1)},
        {"equivalence_p": {"x": 0.5, "y": 0.02}},
        {"margin": 0.2},
    ],
)
def test_a_correction_key_changes_with_every_input_it_decides_from(change):
    assert _correct_key() == _correct_key()
    assert _correct_key() != _correct_key(**change)
