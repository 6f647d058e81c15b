"""The sample record: arms, samples and embeddings."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dbpa.specs import EmbeddingBatch, text_hash
from tests.storage.conftest import engine_error, make_arm, make_gen


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
    got = store.arms_vectors([arm.arm_id], "emb", 3)[arm.arm_id]
    expected = {h: v for h, v in zip(hashes, vectors, strict=True)}
    np.testing.assert_array_equal(got, [expected[text_hash(t)] for t in ["same", "same", "other"]])
    truncated = {h: t for h, t in zip(hashes, [False, True], strict=True)}
    expected_truncated = sum(truncated[text_hash(t)] for t in ["same", "same", "other"])
    assert store.truncated_counts([arm.arm_id], "emb", 3) == {arm.arm_id: expected_truncated}
    assert store.arms_vectors([arm.arm_id], "emb", 4) == {}  # 3 embedded of the 4 needed


def test_outputs_from_many_threads_are_each_stored_once(store):
    arms = [make_arm(f"prompt {a}") for a in range(16)]

    def fill(arm):
        for i in range(12):
            store.add_samples(arm.arm_id, [make_gen(i, f"{arm.arm_id} {i}")])
        store.add_samples(arm.arm_id, [make_gen(i, "again") for i in range(12)])  # all stored
        return arm.arm_id

    with ThreadPoolExecutor(max_workers=16) as pool:
        assert sorted(pool.map(fill, arms)) == sorted(a.arm_id for a in arms)
    stored = store.samples([a.arm_id for a in arms])
    assert len(stored) == 16 * 12
    assert not stored.duplicated(["arm_id", "idx"]).any()
    assert all(
        text == f"{arm} {i}"
        for arm, i, text in stored[["arm_id", "idx", "text"]].itertuples(index=False)
    )


def test_a_bad_output_fails_its_own_call_only(store):
    arms = [make_arm(f"prompt {a}") for a in range(8)]
    bad = make_gen(1)
    object.__setattr__(bad, "index", "not an int")
    start = threading.Barrier(8)

    def write(a):
        start.wait()
        outputs = [make_gen(0), bad] if a == 3 else [make_gen(0), make_gen(1)]
        try:
            store.add_samples(arms[a].arm_id, outputs)
        except engine_error(store):
            return a
        return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert [a for a in pool.map(write, range(8)) if a is not None] == [3]
    stored = store.samples([a.arm_id for a in arms])
    assert len(stored) == 7 * 2
    assert arms[3].arm_id not in set(stored.arm_id)


def test_the_first_outputs_of_each_arm(store):
    arms = [make_arm("a"), make_arm("b")]
    for arm in arms:
        store.add_samples(arm.arm_id, [make_gen(i) for i in range(5)])
    first = store.samples([a.arm_id for a in arms], first=2)
    assert sorted(first.idx.tolist()) == [0, 0, 1, 1]
    assert len(store.samples(first=3)) == 6
    assert len(store.samples([arms[0].arm_id])) == 5
