"""The audit flow against a scripted provider: wall time against the ideal, and a re-run.

100 perturbations, k=20, 200 ms per request, 16 requests in flight, one output per request:
the ideal sampling time is 101 arms x 20 outputs x 0.2 s / 16 = 25.25 s. The audit's wall time
(sample, embed, 100 permutation tests, corrections, reports) is measured against it in the
same run, after a small warm-up audit has started Prefect's ephemeral server. Then the finished
audit is run again: it must make no model call.

Also measured in the same run, as a floor: the same 2020 outputs sampled through dbpa's sampler
alone (litellm, the in-flight bound, one thread per arm and as many arms at once as the
audit's sample tasks; no Prefect, no DuckDB) against the same provider. audit / floor is what
the pipeline adds on this machine at this moment; floor / ideal is what litellm and the
machine cost.

The scripted provider runs in its own process, as a real provider would: in the audit's
process its request handling would compete with the audit for the interpreter lock.

What this suite found (profiled with py-spy; the fixes are in the code): task runs carry no
tags (Prefect's concurrency-slot request per tagged task run met "database is locked" 503s
on the ephemeral server and waited 2 s each); no flow-run heartbeats without a server (their
thread made every audit wait up to 1 s at its end); arms are embedded and tested as their
sample task runs end; arms and planned tests are one Arrow INSERT, not ``executemany``; the
cost comes from litellm's response only; the report's data is one query. The floor is
litellm: about 8 ms of Python per request on the event loop. Ruled out by measurement: one
event loop instead of one thread per arm, DuckDB's per-output insert, all sample task runs at
once, one arm per thread.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._provider import RemoteProvider, remote_provider
from benchmarks._results import ResultFile
from dbpa.config import parse_config
from dbpa.llm import sample
from dbpa.specs import Message, ModelSpec
from tests.support.scripted_server import Rule

KEY_ENV = "DBPA_BENCH_KEY"
RULES = (Rule("", [("Rest and drink fluids.", 2), ("See a doctor if it lasts.", 1)]),)


def _config(server: RemoteProvider, perturbations: int, k: int, concurrency: int) -> dict[str, Any]:
    variants = [
        f"Question {i}: my flu has lasted {i % 7 + 2} days, what now?" for i in range(perturbations)
    ]
    return {
        "name": f"bench-{perturbations}",
        "models": [
            {
                "model": "openai/scripted",
                "api_base": server.api_base,
                "api_key_env": KEY_ENV,
                "max_concurrency": concurrency,
                "max_n": 1,
            }
        ],
        "embedder": {
            "backend": "litellm",
            "model": "openai/scripted",
            "api_base": server.api_base,
            "api_key_env": KEY_ENV,
        },
        "prompt": "My flu has lasted two days. What now?",
        "perturbations": [{"kind": "prompt", "variants": variants}],
        "k": k,
        "n_permutations": 1999,
        "seed": 1,
    }


def _floor(spec: ModelSpec, arms: int, k: int) -> float:
    """Seconds to sample ``arms`` x ``k`` outputs of ``spec`` through dbpa's sampler alone."""
    from flows.audit import SAMPLE_TASK_RUNS, SAMPLING_THREADS  # imports Prefect

    def fill(arm: int) -> int:
        prompt = (Message(role="user", content=f"Floor question {arm}: my flu, what now?"),)
        return len(sample(spec, prompt, range(k), seed=arm))

    start = time.perf_counter()
    arms_in_flight = SAMPLING_THREADS * math.ceil(arms / SAMPLE_TASK_RUNS)  # as in the audit
    with ThreadPoolExecutor(max_workers=arms_in_flight) as pool:
        assert sum(pool.map(fill, range(arms))) == arms * k
    return time.perf_counter() - start


def main(quick: bool = False) -> None:
    os.environ.setdefault(KEY_ENV, "sk-bench")
    from flows.audit import run_audit  # imports Prefect: after the environment is set

    perturbations, k, latency, concurrency = (20, 10, 0.2, 16) if quick else (100, 20, 0.2, 16)
    result_file = ResultFile("pipeline", quick)
    ideal = (perturbations + 1) * k * latency / concurrency
    with tempfile.TemporaryDirectory() as tmp, remote_provider(RULES, latency) as server:
        out = str(Path(tmp) / "reports")
        warm = parse_config(_config(server, 2, 4, concurrency) | {"n_permutations": 199})
        run_audit(warm, str(Path(tmp) / "warm.duckdb"), out)
        config = parse_config(_config(server, perturbations, k, concurrency))
        floor = _floor(config.models[0], perturbations + 1, k)

        db = str(Path(tmp) / "bench.duckdb")
        chat_before = server.requests().chat
        start = time.perf_counter()
        run_audit(config, db, out)
        first = time.perf_counter() - start
        after = server.requests()
        calls = after.chat - chat_before

        start = time.perf_counter()
        run_audit(config, db, out)
        rerun = time.perf_counter() - start
        rerun_calls = server.requests().total - after.total

    result_file.table(
        f"pipeline: {perturbations} perturbations, k={k}, {latency * 1000:.0f} ms latency, "
        f"concurrency {concurrency}",
        ["measure", "value", "baseline", "ratio", "target", "ok"],
        [
            ["sampler alone (s)", floor, ideal, floor / ideal, "", ""],
            ["audit wall time (s)", first, ideal, first / ideal, "<= 1.25", first / ideal <= 1.25],
            ["audit / sampler alone", first, floor, first / floor, "", ""],
            [
                "chat requests",
                calls,
                (perturbations + 1) * k,
                calls / ((perturbations + 1) * k),
                "== 1",
                calls == (perturbations + 1) * k,
            ],
            ["re-run wall time (s)", rerun, 10.0, rerun / 10.0, "<= 1", rerun <= 10.0],
            ["re-run model calls", rerun_calls, 0, "", "== 0", rerun_calls == 0],
        ],
    )
    result_file.write()
