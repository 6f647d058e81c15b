"""Audit records of several ticks, built through the Store API with chosen embeddings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dbpa.config import AuditConfig, parse_config
from dbpa.plan import plan_audit
from dbpa.specs import EmbeddingBatch, Generation, content_hash, text_hash
from storage import Store

UNUSED = "http://127.0.0.1:9/v1"
"""Never called: these records are written directly."""
BASE: dict[str, Any] = {
    "name": "drifty",
    "prompt": "Is the sky blue?",
    "models": [{"model": "openai/x", "name": "m", "api_base": UNUSED}],
    "perturbations": [
        {"kind": "prompt", "variants": [{"text": "Is the sky blue today?"}, {"text": "Sky: blue?"}]}
    ],
    "embedder": {"backend": "litellm", "model": "openai/e", "api_base": UNUSED},
    "k": 12,
    "n_permutations": 499,
    "seed": 1,
}
ROLES = ("original", "prompt-is-the-sky-blue-today", "prompt-sky-blue")
DIM = 16


def record_tick(
    store: Store,
    epoch: str,
    *,
    shift: Mapping[str, float] | None = None,
    outputs: Mapping[str, np.ndarray] | None = None,
    status: str = "completed",
    **overrides: Any,
) -> AuditConfig:
    """One tick of the ``drifty`` audit: every arm's outputs embedded around a centre of its
    own (fixed across ticks), moved by ``shift[role]`` at this tick; ``outputs[role]``, when
    given, are the role's embeddings (k x ``DIM``) instead. Over a set of prompts (``prompts``
    in ``overrides``, and ``prompt=None``) a role is ``original on <prompt id>``."""
    config = parse_config({**BASE, "epoch": epoch, **overrides})
    plan = plan_audit(config)
    run_id = f"drifty-{epoch}"
    store.start_run(
        run_id,
        audit=config.name,
        config=config.model_dump(mode="json"),
        config_hash=config.fingerprint(),
        epoch=epoch,
        flow_run_id=None,
        versions={},
    )
    store.add_arms(plan.arms)
    store.add_family(run_id, [t.row() for t in plan.tests])
    roles: dict[str, str] = {}
    for t in plan.unit_tests:  # over a set of prompts, the role on each prompt
        on = "" if t.prompt_id is None else f" on {t.prompt_id}"
        roles.setdefault(t.original.arm_id, f"original{on}")
        roles.setdefault(t.perturbed.arm_id, f"{t.perturbation.id}{on}")
    for arm in plan.arms:
        role = roles[arm.arm_id]
        texts = [f"{epoch} {role} {i}" for i in range(config.k)]
        store.add_samples(arm.arm_id, [_generation(i, t) for i, t in enumerate(texts)])
        vectors = (outputs or {}).get(role)
        if vectors is None:
            vectors = _vectors(role, arm.arm_id, config.k, (shift or {}).get(role, 0.0))
        store.add_embeddings(
            plan.embedder,
            [text_hash(t) for t in texts],
            EmbeddingBatch(vectors, np.zeros(config.k, dtype=bool)),
        )
    store.finish_run(run_id, status)
    return config


def _vectors(role: str, arm_id: str, k: int, shift: float) -> np.ndarray:
    centre = np.random.default_rng(int(content_hash("centre", role)[:12], 16)).normal(size=DIM)
    noise = np.random.default_rng(int(arm_id[:12], 16)).normal(size=(k, DIM))
    vectors = centre + 0.5 * noise
    vectors[:, 0] += shift
    return vectors.astype(np.float32)


def _generation(index: int, text: str) -> Generation:
    return Generation(
        index=index,
        text=text,
        status="ok",
        finish_reason="stop",
        prompt_tokens=5,
        completion_tokens=5,
        cost_usd=None,
        latency_s=0.01,
        seed=index,
        request_id=f"req-{index}",
    )
