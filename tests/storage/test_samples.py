"""The sample record: arms, samples and embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from dbpa.specs import EmbeddingBatch, text_hash
from tests.storage.conftest import make_arm, make_gen


def test_first_write_wins_for_a_sample(store):
    arm = make_arm()
    store.add_samples(arm.arm_id, [make_gen(0, "first")])
    store.add_samples(arm.arm_id, [make_gen(0, "second")])
    assert store.samples([arm.arm_id]).text.tolist() == ["first"]


def test_embeddings_are_cached_per_text_and_embedder(store):
    arm = make_arm()
    store.add_samples(arm.arm_id, [make_gen(0, "same"), make_gen(1, "same"), make_gen(2, "other")])
    hashes = sorted({text_hash("same"), text_hash("other")})
    assert store.missing_embeddings("emb", hashes) == set(hashes)
    vectors = np.array([[1, 0], [0, 1]], dtype=np.float32)
    store.add_embeddings("emb", hashes, EmbeddingBatch(vectors, np.array([False, True])))
    assert store.missing_embeddings("emb", hashes) == set()
    assert store.missing_embeddings("another", hashes) == set(hashes)
    got = store.arm_vectors(arm.arm_id, "emb", 3)
    expected = {h: v for h, v in zip(hashes, vectors, strict=True)}
    np.testing.assert_array_equal(got, [expected[text_hash(t)] for t in ["same", "same", "other"]])
    truncated = {h: t for h, t in zip(hashes, [False, True], strict=True)}
    expected_truncated = sum(truncated[text_hash(t)] for t in ["same", "same", "other"])
    assert store.truncated_counts([arm.arm_id], "emb", 3) == {arm.arm_id: expected_truncated}
    with pytest.raises(LookupError, match="has 3 embedded outputs of the 4 needed"):
        store.arm_vectors(arm.arm_id, "emb", 4)
