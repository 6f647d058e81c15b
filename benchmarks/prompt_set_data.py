"""Real outputs of the embedded model over a set of prompts (``python -m benchmarks prompt_sets``).

``python -m benchmarks.prompt_set_data`` samples, once, ``OUTPUTS`` answers of the embedded
SmolLM2-135M-Instruct (xllamacpp) to each of the ``PROMPTS`` in each of the ``ARMS`` (an
original and three subtle changes), embeds them with the embedded all-MiniLM-L6-v2 and
tokenises them with SmolLM2's own tokenizer (the server's ``/tokenize``, read from the GGUF:
nothing is downloaded), and writes ``data/prompt_sets_smollm2.npz``: the texts, the token ids
and the float16 embeddings. The benchmark subsamples these arms without replacement.

Output i of arm a on prompt p is sampled with seed ``SEED + 1000 * a + p`` (dbpa's per-request
block seeds), so a rerun gives the same texts on the same xllamacpp build. Each worker process
(``--arms 0,1``) is pinned to one core before its server starts, so the server runs one
thread: on two cores that other jobs keep busy, its default (one thread per core) decoded 1.2
tokens/s against 23 on one thread (measured 2026-11-27). ``--merge`` embeds the workers'
outputs and writes the file.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data" / "prompt_sets_smollm2.npz"
PARTS = Path("/tmp") / "dbpa_prompt_set_parts"
"""Where the workers leave each arm's texts and tokens for ``--merge``."""
MODEL = "local/smollm2-135m"
OUTPUTS = 40
"""Outputs per arm and prompt: an audit draws 10 of them, two disjoint draws for a null."""
MAX_TOKENS = 48
SEED = 20261127
SYSTEM = "You are a helpful assistant."
SYSTEM_CHANGED = "You are a friendly assistant."
"""The one-word change of the system prompt."""

PROMPTS = (
    "Why is the sky blue?",
    "Give me a tip for sleeping better.",
    "What is a good name for a pet cat?",
    "Explain what a black hole is.",
    "Suggest a healthy breakfast.",
    "What should I pack for a weekend trip?",
    "How do plants make food?",
    "Write one sentence about the ocean.",
    "What is the capital of Australia?",
    "How can I learn to play the guitar?",
    "Describe a rainy day in one sentence.",
    "What are the benefits of exercise?",
    "Tell me a fun fact about elephants.",
    "How does a rainbow form?",
    "What is the best way to save money?",
    "Recommend a book for a long flight.",
    "Why do leaves change color in autumn?",
    "How do I make a cup of tea?",
    "What is photosynthesis?",
    "What causes earthquakes?",
)


@dataclass(frozen=True)
class ArmSpec:
    """One way of asking the model: sampling parameters and system prompt."""

    name: str
    params: dict[str, Any]
    system: str = SYSTEM


ARMS = (
    ArmSpec("original", {"temperature": 1.0, "top_p": 1.0}),
    ArmSpec("temperature_0.8", {"temperature": 0.8, "top_p": 1.0}),
    ArmSpec("top_p_0.9", {"temperature": 1.0, "top_p": 0.9}),
    ArmSpec("system_friendly", {"temperature": 1.0, "top_p": 1.0}, SYSTEM_CHANGED),
)
"""The original arm and three subtle changes (llama.cpp's other sampler defaults: top_k 40,
min_p 0.05, in every arm)."""


def _tokenize(address: str, text: str) -> list[int]:
    request = urllib.request.Request(
        f"{address}/tokenize",
        data=json.dumps({"content": text}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        tokens: list[int] = json.loads(response.read())["tokens"]
    return tokens


def sample_arms(arms: list[int], core: int) -> None:
    """Sample and tokenise the arms ``arms`` on one core; one JSON file per arm in ``PARTS``."""
    os.sched_setaffinity(0, {core})
    from dbpa.llm import local_server, sample, stop_local_server
    from dbpa.specs import Message, ModelSpec

    address = local_server(MODEL).address
    PARTS.mkdir(exist_ok=True)
    start = time.perf_counter()
    for a in arms:
        arm = ARMS[a]
        spec = ModelSpec(model=MODEL, params={**arm.params, "max_tokens": MAX_TOKENS})
        texts: list[list[str]] = []
        for p, prompt in enumerate(PROMPTS):
            messages = [
                Message(role="system", content=arm.system),
                Message(role="user", content=prompt),
            ]
            outputs = sample(spec, messages, range(OUTPUTS), seed=SEED + 1000 * a + p)
            texts.append([o.text for o in outputs])
            print(f"{arm.name} prompt {p}: {time.perf_counter() - start:.0f} s", flush=True)
        tokens = [[_tokenize(address, t) for t in row] for row in texts]
        part = {"texts": texts, "tokens": tokens, "seconds": time.perf_counter() - start}
        (PARTS / f"{arm.name}.json").write_text(json.dumps(part))
    stop_local_server()


def merge() -> None:
    """Embed the workers' texts and write ``DATA``."""
    from dbpa.embedding import get_embedder
    from dbpa.specs import EmbedderSpec

    parts = [json.loads((PARTS / f"{arm.name}.json").read_text()) for arm in ARMS]
    texts = [t for part in parts for row in part["texts"] for t in row]
    tokens = [t for part in parts for row in part["tokens"] for t in row]
    vectors = get_embedder(EmbedderSpec()).embed(texts).vectors
    shape = (len(ARMS), len(PROMPTS), OUTPUTS)
    lengths = np.array([len(t) for t in tokens])
    padded = np.full((len(tokens), int(lengths.max())), -1, dtype=np.int32)
    for i, row in enumerate(tokens):
        padded[i, : len(row)] = row
    np.savez_compressed(
        DATA,
        arms=np.array([arm.name for arm in ARMS]),
        prompts=np.array(PROMPTS),
        texts=np.array(texts).reshape(shape),
        tokens=padded.reshape(*shape, -1),
        embeddings=vectors.astype(np.float16).reshape(*shape, -1),
        meta=json.dumps(
            {
                "model": MODEL,
                "max_tokens": MAX_TOKENS,
                "seed": SEED,
                "arms": {arm.name: {**arm.params, "system": arm.system} for arm in ARMS},
                "embedder": "all-MiniLM-L6-v2",
                "tokenizer": "SmolLM2-135M-Instruct (the GGUF's, via the server's /tokenize)",
                "worker_seconds_when_done": {
                    arm.name: round(part["seconds"]) for arm, part in zip(ARMS, parts, strict=True)
                },
            }
        ),
    )
    print(f"wrote {DATA} ({DATA.stat().st_size / 2**20:.2f} MiB)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prompt_set_data")
    parser.add_argument("--arms", help="comma-separated arm indices to sample (a worker)")
    parser.add_argument("--core", type=int, default=0, help="the core a worker is pinned to")
    parser.add_argument("--merge", action="store_true", help="embed the workers' outputs")
    args = parser.parse_args()
    if args.merge:
        merge()
    else:
        sample_arms([int(a) for a in args.arms.split(",")], args.core)
