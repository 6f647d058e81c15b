"""A synthetic run of hundreds (or thousands) of perturbations, built quickly through the
``Store`` API: one model, k=8 outputs per arm, every write one batch (but the outputs, which
the store takes one arm at a time: handed in from several threads, it commits them in
groups)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np

import dbpa.analysis
from dbpa.analysis import AnalysisSpec, decide_family, run_test
from dbpa.arms import Arm
from dbpa.specs import EmbeddingBatch, Generation, Message, ModelSpec, content_hash, text_hash
from storage import Store
from tests.report.conftest import DIM, EMBEDDER

K = 8
LABELS = ("control", "target", None)
N_BOOTSTRAP = 100
"""Fewest resamples of each test's effect interval (B = ``n_permutations`` when larger): the
fewest ``effect_interval`` takes, where a run's intervals take at least
``dbpa.analysis.MIN_BOOTSTRAP`` (1000: about 60 of the 75 CPU-s of 1000 perturbations).
These reports show each interval's estimate and bounds, not how precise they are (that is
tests/stats/test_interval.py's)."""


def perturbation_ids(m: int) -> list[str]:
    """``p000``, ``p001``, ... in family order."""
    width = max(3, len(str(m - 1)))
    return [f"p{i:0{width}d}" for i in range(m)]


def shifted_ids(m: int) -> set[str]:
    """The perturbations whose outputs move (every 15th from the 8th); the others keep the
    original's distribution."""
    return set(perturbation_ids(m)[7::15])


@dataclass(frozen=True)
class Built:
    db: Path
    run_id: str


def build_large(db: Path, m: int, n_permutations: int = 499) -> Built:
    """One model and ``m`` perturbations (the first two thirds of kind template, the rest
    prompt; labels control, target, none in turn), tested with B = ``n_permutations`` and
    corrected by Holm at 0.05; effect intervals of at least ``N_BOOTSTRAP`` resamples."""
    rng = np.random.default_rng(3)
    analysis = AnalysisSpec(n_permutations=n_permutations, alpha=0.05, correction="holm")
    model = ModelSpec(model="openai/gpt-4", name="gpt-4")
    prompt = (Message(role="user", content="What should I do about a cough?"),)
    config = {
        "name": "large",
        "models": [{"model": "openai/gpt-4", "name": "gpt-4"}],
        "prompt": [message.model_dump() for message in prompt],
        "k": K,
        "embedder": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2"},
        "n_permutations": n_permutations,
        "alpha": 0.05,
        "correction": "holm",
        "seed": 3,
    }
    original = Arm.of(model, prompt, "0")
    arms = [original]
    rows, records = [], []
    centre = rng.normal(size=DIM) + 2.0
    vectors = {original.arm_id: centre + 0.35 * rng.normal(size=(K, DIM))}
    shifted = shifted_ids(m)
    for i, pid in enumerate(perturbation_ids(m)):
        kind = "template" if 3 * i < 2 * m else "prompt"
        messages = (Message(role="user", content=f"Perturbation number {i}. {prompt[0].content}"),)
        arm = Arm.of(model, messages, "0")
        arms.append(arm)
        shift = 2.4 * (pid in shifted) * rng.normal(size=DIM) / np.sqrt(DIM)
        vectors[arm.arm_id] = centre + shift + 0.35 * rng.normal(size=(K, DIM))
        test_id = content_hash("test", original.arm_id, arm.arm_id)
        rows.append(
            {
                "family": "gpt-4",
                "perturbation_id": pid,
                "position": i,
                "kind": kind,
                "label": LABELS[i % 3],
                "description": f"Perturbation number {i}.",
                "original_arm": original.arm_id,
                "perturbed_arm": arm.arm_id,
                "test_id": test_id,
            }
        )
        with mock.patch.object(dbpa.analysis, "MIN_BOOTSTRAP", N_BOOTSTRAP):
            record = run_test(
                test_id,
                vectors[original.arm_id],
                vectors[arm.arm_id],
                original_arm=original.arm_id,
                perturbed_arm=arm.arm_id,
                embedder=EMBEDDER,
                analysis=analysis,
            )
        records.append(record)
    with Store(db) as store:
        store.start_run(
            "large-run",
            audit="large",
            config=config,
            config_hash=content_hash(config),
            epoch="0",
            flow_run_id=None,
            versions={"dbpa": "0.1.0"},
        )
        store.add_arms(arms)
        texts = {arm.arm_id: [f"{arm.arm_id[:8]} answer {j}" for j in range(K)] for arm in arms}
        with ThreadPoolExecutor(max_workers=8) as pool:  # the store commits them in groups
            list(
                pool.map(
                    lambda arm_id: store.add_samples(
                        arm_id, [_output(j, t) for j, t in enumerate(texts[arm_id])]
                    ),
                    texts,
                )
            )
        hashes = [text_hash(t) for arm in arms for t in texts[arm.arm_id]]
        flat = [vectors[arm.arm_id] for arm in arms]
        batch = EmbeddingBatch(np.vstack(flat).astype(np.float32), np.zeros(len(hashes), bool))
        store.add_embeddings(EMBEDDER, hashes, batch)
        store.add_tests(records)
        store.add_family("large-run", rows)
        decisions = decide_family(
            {r["perturbation_id"]: t.p_value for r, t in zip(rows, records, strict=True)}, analysis
        )
        store.add_corrections("large-run", "gpt-4", "holm", 0.05, decisions)
        store.finish_run("large-run", "completed")
    return Built(db=db, run_id="large-run")


def _output(index: int, text: str) -> Generation:
    return Generation(
        index=index,
        text=text,
        status="ok",
        finish_reason="stop",
        prompt_tokens=9,
        completion_tokens=3,
        cost_usd=None,
        latency_s=0.1,
        seed=index,
        request_id=f"req-{index}",
    )
