"""Synthetic prompt sets: every prompt its own answer distribution, a share of them moved.

Each prompt gets its own orthonormal answer space (``_synthetic``), its own mixture of 1-4
answer types (Dirichlet weights) and its own wording spread, so the prompts' answer
distributions differ as real prompts' do. A perturbation moves a given share of the prompts
(the first ones; prompts are exchangeable) by one of ``SHAPES``; the others' perturbed arms
are drawn like their originals.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from benchmarks._synthetic import AnswerSpace, Arm, answer_space, sample

Matrix = np.ndarray


@dataclass(frozen=True)
class PromptModel:
    """How one prompt's answers are drawn."""

    space: AnswerSpace
    arm: Arm


def prompt_models(rng: np.random.Generator, n_prompts: int, *, d: int = 384) -> list[PromptModel]:
    """``n_prompts`` prompts with different answer distributions."""
    models = []
    for _ in range(n_prompts):
        n_types = int(rng.integers(1, 5))
        weights = rng.dirichlet(np.ones(n_types)) * 0.9 + 0.1 / n_types
        padded = tuple(weights) + (0.0,) * (4 - n_types)
        arm = Arm(weights=(*padded, 0.0), detail=float(rng.uniform(0.25, 0.6)))
        models.append(PromptModel(answer_space(rng, d=d, n_types=5), arm))
    return models


def _reweighted(arm: Arm, size: float) -> Arm:
    """A share ``size`` of the answers moves to a fifth answer type the original never gives."""
    weights = np.asarray(arm.weights) * (1.0 - size)
    weights[-1] += size
    return replace(arm, weights=tuple(weights))


def _drifted(arm: Arm, size: float) -> Arm:
    """Every answer drifts by ``size`` along a direction no original answer uses."""
    return replace(arm, drift=size)


SHAPES = {"new answer type": _reweighted, "drift": _drifted}
"""How a moved prompt's perturbed arm differs from its original."""


def prompt_set(
    rng: np.random.Generator,
    models: list[PromptModel],
    k: int,
    *,
    moved: int,
    shape: str,
    size: float,
) -> tuple[list[Matrix], list[Matrix]]:
    """(originals, perturbed): k outputs per arm per prompt; the first ``moved`` prompts'
    perturbed arms are changed by ``shape`` of ``size``."""
    originals, perturbed = [], []
    for i, model in enumerate(models):
        changed = SHAPES[shape](model.arm, size) if i < moved else model.arm
        originals.append(sample(rng, model.space, model.arm, k))
        perturbed.append(sample(rng, model.space, changed, k))
    return originals, perturbed
