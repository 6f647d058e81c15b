"""Sampling through dbpa (litellm, retries, bounds) against raw HTTP to the same xllamacpp server.

Both paths ask the embedded SmolLM2 for the same outputs: the same prompt, ``max_tokens``
and per-output seeds (dbpa's block seeds, one choice per request), at the same parallelism,
so they generate the same tokens. Rounds come in pairs, run back to back in alternating order
(raw-dbpa, dbpa-raw, ...), because the machine may be shared and its speed drifts; reported
are the median round of each path, the median of the per-pair ratios dbpa / raw (target
>= 0.9), the load average before and after, and the process CPU time per round of each path
(llama.cpp's threads included; the difference is dbpa's own work, and it is far less
sensitive to other processes than wall time).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks._results import ResultFile
from dbpa.llm import block_seed, local_server, sample
from dbpa.specs import Message, ModelSpec

LOCAL = "local/smollm2-135m"
SEED = 2024
PROMPT = (
    Message(
        role="user",
        content="A 61-year-old woman with diabetes asks whether she should take a statin. "
        "What would you tell her?",
    ),
)


@dataclass(frozen=True)
class Round:
    """One timed pass of a path."""

    seconds: float
    cpu_seconds: float
    """CPU time of the whole process (llama.cpp's threads included): robust to a busy machine."""
    tokens: int
    texts: tuple[str, ...]

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def outputs_per_s(self) -> float:
        return len(self.texts) / self.seconds


def main(quick: bool) -> None:
    result_file = ResultFile("sampling", quick)
    outputs, max_tokens, parallel, pairs = (16, 32, 8, 2) if quick else (32, 64, 8, 6)
    model = ModelSpec(model=LOCAL, max_concurrency=parallel, params={"max_tokens": max_tokens})
    address = local_server(LOCAL).address
    _raw(address, 1, max_tokens, parallel)  # warm both paths (imports, connections)
    _dbpa(model, 1)
    load_before = os.getloadavg()[0]
    paths: dict[str, Callable[[], Round]] = {
        "raw": lambda: _raw(address, outputs, max_tokens, parallel),
        "dbpa": lambda: _dbpa(model, outputs),
    }
    results: dict[str, list[Round]] = {"raw": [], "dbpa": []}
    for pair in range(pairs):
        for path in ("raw", "dbpa") if pair % 2 == 0 else ("dbpa", "raw"):
            results[path].append(paths[path]())
    load_after = os.getloadavg()[0]
    rows = []
    for path, rounds in results.items():
        median = sorted(rounds, key=lambda r: r.tokens_per_s)[len(rounds) // 2]
        rows.append(
            [
                path,
                parallel,
                len(median.texts),
                median.tokens,
                median.seconds,
                median.tokens_per_s,
                median.outputs_per_s,
                statistics.median(r.cpu_seconds for r in rounds),
                " ".join(f"{r.tokens_per_s:.0f}" for r in rounds),
            ]
        )
    result_file.table(
        f"sampling: {LOCAL}, {outputs} outputs x max_tokens {max_tokens}, "
        f"median of {pairs} rounds per path",
        [
            "path",
            "parallel",
            "outputs",
            "tokens",
            "seconds",
            "tokens/s",
            "outputs/s",
            "cpu s",
            "rounds",
        ],
        rows,
    )
    ratios = [
        d.tokens_per_s / r.tokens_per_s
        for d, r in zip(results["dbpa"], results["raw"], strict=True)
    ]
    cpu = statistics.median(r.cpu_seconds for r in results["dbpa"]) / statistics.median(
        r.cpu_seconds for r in results["raw"]
    )
    same = all(d.texts == results["raw"][0].texts for d in results["dbpa"])
    result_file.note(
        f"dbpa / raw throughput, median of paired rounds: {statistics.median(ratios):.3f} "
        f"(target >= 0.9; pairs: {' '.join(f'{x:.2f}' for x in ratios)}); same texts: {same}; "
        f"load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} cores"
    )
    result_file.note(f"process CPU time per round, dbpa / raw (medians): {cpu:.3f}")
    result_file.write()


def _raw(address: str, outputs: int, max_tokens: int, parallel: int) -> Round:
    """``outputs`` single-choice requests, ``parallel`` at a time, straight to the server."""

    async def run() -> list[dict[str, Any]]:
        gate = asyncio.Semaphore(parallel)
        limits = httpx.Limits(max_connections=parallel)
        async with httpx.AsyncClient(base_url=address, timeout=300, limits=limits) as client:

            async def one(index: int) -> dict[str, Any]:
                body = {
                    "messages": [m.model_dump() for m in PROMPT],
                    "max_tokens": max_tokens,
                    "temperature": 0.8,
                    "seed": block_seed(SEED, index),
                }
                async with gate:
                    response = await client.post("/v1/chat/completions", json=body)
                response.raise_for_status()
                result: dict[str, Any] = response.json()
                return result

            return await asyncio.gather(*(one(i) for i in range(outputs)))

    start, cpu = time.perf_counter(), time.process_time()
    answers = asyncio.run(run())
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    texts = tuple(str(a["choices"][0]["message"]["content"]) for a in answers)
    tokens = sum(int(a["usage"]["completion_tokens"]) for a in answers)
    return Round(seconds, cpu, tokens, texts)


def _dbpa(model: ModelSpec, outputs: int) -> Round:
    start, cpu = time.perf_counter(), time.process_time()
    generations = sample(model, PROMPT, range(outputs), seed=SEED)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    tokens = sum(g.completion_tokens or 0 for g in generations)
    return Round(seconds, cpu, tokens, tuple(g.text for g in generations))
