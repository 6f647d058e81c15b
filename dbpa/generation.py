"""Generated perturbations: the generator arms of a config's paraphrase specs, and the
binding of their stored outputs into the config.

A paraphrase spec is generated as an ordinary arm (the generator model, the instruction
around the original prompt, ``n`` outputs) with its own seed, stored in the record's
``arms`` and ``samples`` like every arm: the model, its messages and its outputs are in
the record, a re-run asks only for missing outputs (none, once generated), and the same
spec gives the same arm in every audit and epoch that uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dbpa.arms import Arm
from dbpa.config import AuditConfig
from dbpa.embedding import get_embedder
from dbpa.perturbations import GeneratedParaphrase, ParaphraseSpec, screen_paraphrases
from dbpa.specs import content_hash

GENERATION_EPOCH = "generated"
"""The epoch of every generator arm: fixed, so a new epoch (a scheduled tick) re-uses the
paraphrases and its arms stay comparable with the previous ticks'."""

Embed = Callable[[Sequence[str]], NDArray[np.floating]]
"""Texts -> their (n, d) embedding vectors (the audit's embedder)."""


class SampleReader(Protocol):
    """What reading stored generator outputs needs from the record (``storage.Store``)."""

    def sample_indices(self, arm_ids: Sequence[str]) -> dict[str, set[int]]: ...

    def arm_texts(self, arm_ids: Sequence[str], k: int) -> pd.DataFrame: ...


@dataclass(frozen=True)
class GeneratorJob:
    """The arm that generates one paraphrase spec's texts."""

    position: int
    """The spec's position in the config's ``perturbations``."""
    spec: ParaphraseSpec
    arm: Arm
    seed: int
    """Base seed of the arm's requests (from the spec's seed and the arm)."""

    @property
    def label(self) -> str:
        """How logs and progress name it: ``paraphrases of perturbations[i] (MODEL)``."""
        return f"paraphrases of perturbations[{self.position}] ({self.spec.model.label})"


def generator_jobs(config: AuditConfig) -> tuple[GeneratorJob, ...]:
    """One job per paraphrase spec of ``config`` not generated yet, in order."""
    jobs = []
    for position, spec in config.ungenerated:
        messages = spec.generation_messages(config.messages)
        arm = Arm.of(spec.model, messages, GENERATION_EPOCH, seed=spec.seed)
        seed = int(content_hash("generation-seed", spec.seed, arm.arm_id)[:12], 16)
        jobs.append(GeneratorJob(position, spec, arm, seed))
    return tuple(jobs)


def missing_outputs(jobs: Sequence[GeneratorJob], reader: SampleReader) -> dict[int, list[int]]:
    """Position -> the output indices of its generator arm not in the record yet."""
    stored = reader.sample_indices([j.arm.arm_id for j in jobs])
    return {j.position: [i for i in range(j.spec.n) if i not in stored[j.arm.arm_id]] for j in jobs}


def stored_outputs(jobs: Sequence[GeneratorJob], reader: SampleReader) -> dict[int, list[str]]:
    """Position -> its generator's stored outputs (index below n), in index order (all n of
    them once generated)."""
    if not jobs:
        return {}
    texts = reader.arm_texts([j.arm.arm_id for j in jobs], max(j.spec.n for j in jobs))
    return {
        j.position: [
            str(t)
            for t in texts[(texts.arm_id == j.arm.arm_id) & (texts.idx < j.spec.n)]
            .sort_values("idx")
            .text
        ]
        for j in jobs
    }


def bind_generated(
    config: AuditConfig,
    outputs: Mapping[int, Sequence[str]],
    embed: Embed | None = None,
) -> AuditConfig:
    """``config`` with every ungenerated paraphrase spec bound to its generator's ``outputs``
    (position -> the n texts in index order): cleaned, screened, and, for a spec with
    ``min_similarity``, filtered by the cosine similarity of ``embed``'s vectors to the
    original prompt's. ValueError naming the spec when outputs are missing, ``embed`` is
    needed but not given, or no paraphrase of a spec is left."""
    bound: dict[int, ParaphraseSpec] = {}
    prompt = next(m.content for m in reversed(config.messages) if m.role == "user")
    for position, spec in config.ungenerated:
        where = f"perturbations[{position}] (paraphrase)"
        texts = outputs.get(position)
        if texts is None or len(texts) != spec.n:
            found = 0 if texts is None else len(texts)
            raise ValueError(f"{where}: {found} of its {spec.n} generated outputs are stored")
        screened = screen_paraphrases(prompt, texts)
        similarities = None
        if spec.min_similarity is not None:
            if embed is None:
                raise ValueError(f"{where}: min_similarity needs the embedder")
            similarities = _similarities(prompt, screened, embed)
        spec = spec.bind(screened, similarities)
        if not any(p.dropped is None for p in spec.generated or ()):
            reasons = sorted({str(p.dropped) for p in spec.generated or ()})
            raise ValueError(
                f"{where}: every one of its {spec.n} paraphrases was dropped "
                f"({'; '.join(reasons)}); check the generator model and its instruction"
            )
        bound[position] = spec
    return config.with_generated(bound) if bound else config


def embed_with(config: AuditConfig) -> Embed:
    """``config``'s embedder as an ``Embed``; the model loads on the first call only (so not
    at all when no spec filters by similarity)."""

    def embed(texts: Sequence[str]) -> NDArray[np.floating]:
        return get_embedder(config.embedder).embed(list(texts)).vectors

    return embed


def dropped_paraphrases(config: AuditConfig) -> list[tuple[int, GeneratedParaphrase]]:
    """(spec position, paraphrase) of every generated paraphrase the family leaves out."""
    return [
        (i, p)
        for i, spec in enumerate(config.perturbations)
        if isinstance(spec, ParaphraseSpec)
        for p in spec.generated or ()
        if p.dropped is not None
    ]


def _similarities(
    prompt: str, screened: Sequence[GeneratedParaphrase], embed: Embed
) -> dict[int, float]:
    """Output index -> cosine similarity to the prompt, for the paraphrases still kept."""
    kept = [p for p in screened if p.dropped is None]
    if not kept:
        return {}
    vectors = np.asarray(embed([prompt, *(p.text for p in kept)]), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    cosines = unit[1:] @ unit[0]
    return {p.index: float(c) for p, c in zip(kept, cosines, strict=True)}
