"""Generator arms of paraphrase specs and the binding of their outputs into the config."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dbpa.config import parse_config
from dbpa.generation import (
    GENERATION_EPOCH,
    bind_generated,
    dropped_paraphrases,
    generator_jobs,
    missing_outputs,
)

PROMPT = "Is the sky blue?"


def config(epoch: str = "0", **spec: object):
    return parse_config(
        {
            "name": "x",
            "models": [{"model": "openai/gpt-4o-mini"}],
            "prompt": PROMPT,
            "epoch": epoch,
            "perturbations": [
                {"kind": "prompt", "variants": ["Is the sky really blue?"]},
                {"kind": "paraphrase", "n": 3, **spec},
            ],
        }
    )


def test_a_generator_arm_is_the_same_in_every_epoch_and_seeded_by_the_spec():
    (job,) = generator_jobs(config())
    assert job.position == 1
    assert job.arm.epoch == GENERATION_EPOCH
    assert job.arm.model.model == "local/smollm2-135m"
    assert PROMPT in job.arm.messages[0].content
    (later,) = generator_jobs(config(epoch="tick-2"))
    assert (later.arm, later.seed) == (job.arm, job.seed)
    # Pinned: the arm (and its outputs in existing records) of an audit of one prompt.
    assert job.arm.arm_id == "631daa97f53ea3bfd0e87d3eb9c6d619"
    assert job.seed == 166324276140878
    (reseeded,) = generator_jobs(config(seed=1))
    assert reseeded.arm.arm_id != job.arm.arm_id  # another seed generates anew
    assert reseeded.seed != job.seed


class Stored:
    def __init__(self, indices: dict[str, set[int]]) -> None:
        self.indices = indices

    def sample_indices(self, arm_ids: Sequence[str]) -> dict[str, set[int]]:
        return {a: self.indices.get(a, set()) for a in arm_ids}


def test_missing_outputs_are_those_not_stored():
    (job,) = generator_jobs(config())
    assert missing_outputs([job], Stored({})) == {(1, None): [0, 1, 2]}
    assert missing_outputs([job], Stored({job.arm.arm_id: {0, 2, 7}})) == {(1, None): [1]}


def test_binding_makes_the_family_and_keeps_the_rest_of_the_config():
    cfg = config()
    bound = bind_generated(cfg, {(1, None): ["Is the heaven blue?", PROMPT, "1. Sky: blue?"]})
    assert not bound.ungenerated
    assert [p.id for p in bound.family] == [
        "prompt-is-the-sky-really-blue",
        "paraphrase-1",
        "paraphrase-3",
    ]
    assert bound.model_dump()["perturbations"][0] == cfg.model_dump()["perturbations"][0]
    assert [(i, pid, p.dropped) for i, pid, p in dropped_paraphrases(bound)] == [
        (1, None, "same as the original")
    ]
    assert "generated_per_prompt" not in bound.model_dump()["perturbations"][1]


def test_binding_needs_every_output():
    with pytest.raises(ValueError, match=r"perturbations\[1\] \(paraphrase\): 2 of its 3"):
        bind_generated(config(), {(1, None): ["a?", "b?"]})


def test_the_filter_uses_cosine_similarity_to_the_original():
    vectors = {PROMPT: [1.0, 0.0], "near?": [3.0, 1.0], "far?": [0.0, 2.0], "mid?": [1.0, 1.0]}

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.array([vectors[t] for t in texts])

    bound = bind_generated(
        config(min_similarity=0.8), {(1, None): ["near?", "far?", "mid?"]}, embed
    )
    assert [p.id for p in bound.family][1:] == ["paraphrase-1"]
    similarities = [p.similarity for p in bound.perturbations[1].generated]
    assert similarities == pytest.approx([3 / 10**0.5, 0.0, 2**-0.5])
    with pytest.raises(ValueError, match="min_similarity needs the embedder"):
        bind_generated(config(min_similarity=0.8), {(1, None): ["near?", "far?", "mid?"]})


def test_a_spec_with_every_paraphrase_dropped_is_an_error():
    with pytest.raises(ValueError, match="every one of its 3 paraphrases was dropped"):
        bind_generated(config(), {(1, None): ["", PROMPT, " "]})
