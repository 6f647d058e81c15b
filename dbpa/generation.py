"""Generated perturbations: the generator arms of a config's paraphrase specs, and the
binding of their stored outputs into the config.

A paraphrase spec is generated as an ordinary arm (the generator model, the instruction
around the original prompt, ``n`` outputs) with its own seed, stored in the record's
``arms`` and ``samples`` like every arm: the model, its messages and its outputs are in
the record, a re-run asks only for missing outputs (none, once generated), and the same
spec gives the same arm in every audit and epoch that uses it. Over a set of prompts a
spec has one generator arm per prompt (the instruction around that prompt: the same arm
as an audit of that prompt alone), each prompt's outputs screened and filtered on their
own, then grouped across the prompts (``ParaphraseSpec.bind_set``).
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
from dbpa.specs import Message, content_hash

GENERATION_EPOCH = "generated"
"""The epoch of every generator arm: fixed, so a new epoch (a scheduled tick) re-uses the
paraphrases and its arms stay comparable with the previous ticks'."""

Embed = Callable[[Sequence[str]], NDArray[np.floating]]
"""Texts -> their (n, d) embedding vectors (the audit's embedder)."""
JobKey = tuple[int, str | None]
"""(spec position, prompt id; None in an audit of one prompt): one generator arm's outputs."""


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
    prompt: str | None = None
    """The id of the prompt it paraphrases in a set of prompts; None: the audit's one prompt."""

    @property
    def key(self) -> JobKey:
        """(spec position, prompt id): what its outputs are filed under."""
        return (self.position, self.prompt)

    @property
    def label(self) -> str:
        """How logs and progress name it: ``paraphrases of perturbations[i] (MODEL)``, over
        a set ``paraphrases of perturbations[i] for prompt 'ID' (MODEL)``."""
        of = "" if self.prompt is None else f" for prompt {self.prompt!r}"
        return f"paraphrases of perturbations[{self.position}]{of} ({self.spec.model.label})"


def generator_jobs(config: AuditConfig) -> tuple[GeneratorJob, ...]:
    """One job per paraphrase spec of ``config`` not generated yet and, over a set of
    prompts, per prompt, in order. The arm and its seed depend on the spec and the prompt's
    content only: an audit of one prompt, and a set holding it, share that prompt's arm."""
    jobs = []
    for position, spec in config.ungenerated:
        for pid, original in config.prompt_set:
            messages = spec.generation_messages(original)
            arm = Arm.of(spec.model, messages, GENERATION_EPOCH, seed=spec.seed)
            seed = int(content_hash("generation-seed", spec.seed, arm.arm_id)[:12], 16)
            prompt = None if config.prompts is None else pid
            jobs.append(GeneratorJob(position, spec, arm, seed, prompt))
    return tuple(jobs)


def missing_outputs(jobs: Sequence[GeneratorJob], reader: SampleReader) -> dict[JobKey, list[int]]:
    """Job key -> the output indices of its generator arm not in the record yet."""
    stored = reader.sample_indices([j.arm.arm_id for j in jobs])
    return {j.key: [i for i in range(j.spec.n) if i not in stored[j.arm.arm_id]] for j in jobs}


def stored_outputs(jobs: Sequence[GeneratorJob], reader: SampleReader) -> dict[JobKey, list[str]]:
    """Job key -> its generator's stored outputs (index below n), in index order (all n of
    them once generated)."""
    if not jobs:
        return {}
    texts = reader.arm_texts([j.arm.arm_id for j in jobs], max(j.spec.n for j in jobs))
    return {
        j.key: [
            str(t)
            for t in texts[(texts.arm_id == j.arm.arm_id) & (texts.idx < j.spec.n)]
            .sort_values("idx")
            .text
        ]
        for j in jobs
    }


def bind_generated(
    config: AuditConfig,
    outputs: Mapping[JobKey, Sequence[str]],
    embed: Embed | None = None,
) -> AuditConfig:
    """``config`` with every ungenerated paraphrase spec bound to its generators' ``outputs``
    (job key -> the n texts in index order): each prompt's cleaned, screened, and, for a
    spec with ``min_similarity``, filtered by the cosine similarity of ``embed``'s vectors
    to that prompt's; over a set, grouped (``ParaphraseSpec.bind_set``). ValueError naming
    the spec (and the prompt) when outputs are missing, ``embed`` is needed but not given,
    or no paraphrase of a spec (of a prompt) is left."""
    bound: dict[int, ParaphraseSpec] = {}
    for position, spec in config.ungenerated:
        per_prompt = {}
        for pid, original in config.prompt_set:
            prompt = None if config.prompts is None else pid
            of = "" if prompt is None else f" prompt {prompt!r}:"
            where = f"perturbations[{position}] (paraphrase):{of}"
            kept = _bound(spec, original, outputs.get((position, prompt)), embed, where)
            per_prompt[pid] = kept.generated or ()
            if prompt is None:
                bound[position] = kept
        if config.prompts is not None:
            bound[position] = spec.bind_set(per_prompt)
    return config.with_generated(bound) if bound else config


def _bound(
    spec: ParaphraseSpec,
    original: Sequence[Message],
    texts: Sequence[str] | None,
    embed: Embed | None,
    where: str,
) -> ParaphraseSpec:
    """``spec`` bound to the generator outputs ``texts`` for the prompt ``original``;
    ValueError starting with ``where`` (see :func:`bind_generated`)."""
    if texts is None or len(texts) != spec.n:
        found = 0 if texts is None else len(texts)
        raise ValueError(f"{where} {found} of its {spec.n} generated outputs are stored")
    prompt = next(m.content for m in reversed(original) if m.role == "user")
    screened = screen_paraphrases(prompt, texts)
    similarities = None
    if spec.min_similarity is not None:
        if embed is None:
            raise ValueError(f"{where} min_similarity needs the embedder")
        similarities = _similarities(prompt, screened, embed)
    spec = spec.bind(screened, similarities)
    if not any(p.dropped is None for p in spec.generated or ()):
        reasons = sorted({str(p.dropped) for p in spec.generated or ()})
        raise ValueError(
            f"{where} every one of its {spec.n} paraphrases was dropped "
            f"({'; '.join(reasons)}); check the generator model and its instruction"
        )
    return spec


def embed_with(config: AuditConfig) -> Embed:
    """``config``'s embedder as an ``Embed``; the model loads on the first call only (so not
    at all when no spec filters by similarity)."""

    def embed(texts: Sequence[str]) -> NDArray[np.floating]:
        return get_embedder(config.embedder).embed(list(texts)).vectors

    return embed


def dropped_paraphrases(
    config: AuditConfig,
) -> list[tuple[int, str | None, GeneratedParaphrase]]:
    """(spec position, prompt id or None for the one prompt, paraphrase) of every generated
    paraphrase the family leaves out, in spec, prompt and output order."""
    found: list[tuple[int, str | None, GeneratedParaphrase]] = []
    for i, spec in enumerate(config.perturbations):
        if not isinstance(spec, ParaphraseSpec):
            continue
        per_prompt = spec.generated_per_prompt or {None: spec.generated or ()}
        for pid, paraphrases in per_prompt.items():
            found += [(i, pid, p) for p in paraphrases if p.dropped is not None]
    return found


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
