"""Audits on a shared record (issue 50): what a team that schedules several audits at once gets
from one PostgreSQL record instead of one DuckDB file, end to end.

(1) 8 audits (5 arms: an original and 4 personas, k = 20; a prompt of its own each, so that no
audit reuses another's outputs) against the scripted OpenAI-compatible server in a process of
its own, answering every request (chat and embeddings) after 1 s, as a hosted model does:
one ``dbpa run`` after another on one local file (one writer: the only way it can), against 4
``dbpa run`` at a time on the shared record (a new one starts when one ends). Goal: >= 3x
faster. (2) One audit alone, the same audit on each record, alternating: the shared record
against the local file (goal: <= 1.3x slower). (3) The writes of a 1,000-perturbation audit
through ``storage.Store`` in one process, as an audit makes them (the arms; an arm's 20 outputs
a write; 256 vectors of 384 floats a write; 50 tests a write, each with its null distribution
of B = 19,999; the run, its family and corrections): the shared record against the file.

Every ``dbpa run`` is a fresh process with Prefect's temporary server (what ``dbpa run``
starts), in a Prefect home of its own slot (one initialized by an untimed flow run, copied).
PostgreSQL is a throwaway cluster on this machine with the server's default (durable)
settings, made as the tests make theirs (``tests/support/postgres.py``); the password goes in
``PGPASSWORD``, never in the URL.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks._provider import remote_provider
from benchmarks._results import ResultFile
from tests.support.postgres import PostgresServer, throwaway_cluster
from tests.support.scripted_server import Rule

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "DBPA_BENCH_KEY"
RULES = (
    Rule("comedian", [("Why did the flu cross the road? Rest!", 1), ("Knock knock, flu.", 1)]),
    Rule("child", [("My tummy hurts and I want my mum.", 1), ("Ask a grown-up!", 1)]),
    Rule("", [("Rest, drink fluids and see a doctor if it gets worse.", 2), ("Rest.", 1)]),
)
PERSONAS = ("doctor", "nurse", "comedian", "child")
BARE_FLOW = "from prefect import flow\nflow(lambda: None, name='init')()\n"
SHARED_GOAL, ALONE_GOAL = 3.0, 1.3


@dataclass(frozen=True)
class Sizes:
    """What one run of the suite measures."""

    audits: int
    at_once: int
    k: int
    latency: float
    alone_pairs: int
    perturbations: int
    permutations: int


FULL = Sizes(audits=8, at_once=4, k=20, latency=1.0, alone_pairs=2, perturbations=1_000,
             permutations=19_999)  # fmt: skip
QUICK = Sizes(audits=4, at_once=2, k=8, latency=0.3, alone_pairs=1, perturbations=100,
              permutations=1_999)  # fmt: skip


def _config(name: str, api_base: str, k: int) -> dict[str, Any]:
    """An audit of 5 arms whose prompt is its own (``name`` in it)."""
    scripted = {"model": "openai/scripted", "api_base": api_base, "api_key_env": KEY_ENV}
    return {
        "name": name,
        "models": [{**scripted, "max_concurrency": 8, "max_n": 1}],
        "embedder": {"backend": "litellm", **scripted},
        "prompt": f"My flu has lasted two days. Should I see a doctor? (audit {name})",
        "perturbations": [
            {
                "kind": "personas",
                "values": [
                    {"value": p, "label": "control" if i < 2 else "target"}
                    for i, p in enumerate(PERSONAS)
                ],
            }
        ],
        "k": k,
        "n_permutations": 999,
        "seed": 1,
    }


class _Runs:
    """``dbpa run`` processes, each in the Prefect home of a slot."""

    def __init__(self, tmp: Path, slots: int, server: PostgresServer, api_base: str) -> None:
        self.tmp, self.api_base = tmp, api_base
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PG"))}
        base |= {
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
            "DO_NOT_TRACK": "1",
            "PYTHONPATH": str(ROOT),
            "PGPASSWORD": server.password,
            KEY_ENV: "sk-bench",
        }
        first = tmp / "home-0"
        self.envs = [base | {"PREFECT_HOME": str(first)}]
        _checked([sys.executable, "-c", BARE_FLOW], self.envs[0])  # migrations, untimed
        for slot in range(1, slots):
            shutil.copytree(first, tmp / f"home-{slot}")
            self.envs.append(base | {"PREFECT_HOME": str(tmp / f"home-{slot}")})

    def config(self, name: str, k: int) -> Path:
        path = self.tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump(_config(name, self.api_base, k)))
        return path

    def run(self, config: Path, db: str, slot: int = 0) -> float:
        """Wall seconds of ``dbpa run CONFIG --db DB`` to its exit (which must be 0)."""
        out = self.tmp / "reports" / config.stem
        command = [sys.executable, "-m", "dbpa.cli", "run", str(config), "--db", db]
        start = time.perf_counter()
        _checked([*command, "--out", str(out)], self.envs[slot])
        return time.perf_counter() - start

    def batch(self, configs: Sequence[Path], db: str, at_once: int) -> float:
        """Wall seconds of every audit of ``configs`` on ``db``, ``at_once`` at a time."""
        slots = list(range(at_once))
        start = time.perf_counter()
        with ThreadPoolExecutor(at_once) as pool:
            futures = [
                pool.submit(self.run, config, db, slots[i % at_once])
                for i, config in enumerate(configs)
            ]
            for future in futures:
                future.result()
        return time.perf_counter() - start


def _checked(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command[3:]} exited {done.returncode}:\n{done.stderr[-3000:]}")


def _write_audit(target: str, m: int, k: int, b: int) -> dict[str, float]:
    """The writes of an audit of ``m`` perturbations through ``Store``: seconds per part."""
    from dbpa.analysis import Decision, PerturbationTestRecord
    from dbpa.arms import Arm
    from dbpa.specs import EmbeddingBatch, Generation, Message, ModelSpec, text_hash
    from storage import Store

    rng = np.random.default_rng(0)
    model = ModelSpec(model="openai/scripted")
    arms = [Arm.of(model, [Message(role="user", content=f"prompt {i}")], "0") for i in range(m + 1)]
    words = np.array(["the", "fever", "rest", "fluids", "doctor", "days", "if", "worse", "call"])
    texts = {
        arm.arm_id: [" ".join(rng.choice(words, 130)) + f" ({i} {j})" for j in range(k)]
        for i, arm in enumerate(arms)
    }
    hashes = [text_hash(t) for arm in arms for t in texts[arm.arm_id]]
    p = rng.random(m)
    seconds: dict[str, float] = {}
    opened = time.perf_counter()
    with Store(target, serve_readers=False) as store:
        start = time.perf_counter()
        seconds["open"] = start - opened
        store.add_arms(arms)
        for arm in arms:
            outputs = [
                Generation(j, text, "ok", "stop", 40, 180, 1e-4, 0.5, j, f"r{j}")
                for j, text in enumerate(texts[arm.arm_id])
            ]
            store.add_samples(arm.arm_id, outputs)
        seconds["arms and outputs"] = time.perf_counter() - start
        start = time.perf_counter()
        for at in range(0, len(hashes), 256):
            chunk = hashes[at : at + 256]
            vectors = rng.standard_normal((len(chunk), 384)).astype(np.float32)
            store.add_embeddings("emb", chunk, EmbeddingBatch(vectors, np.zeros(len(chunk), bool)))
        seconds["vectors"] = time.perf_counter() - start
        start = time.perf_counter()
        for at in range(0, m, 50):
            store.add_tests([
                PerturbationTestRecord(
                    f"t{i}", arms[0].arm_id, arms[i + 1].arm_id, "emb", "cosine", "jsd", {}, b,
                    i, 0.3, float(p[i]), 0.1, 0.05, 0.2, 4.0, b, False, k, k,
                    rng.random(b),
                )
                for i in range(at, min(at + 50, m))
            ])  # fmt: skip
        seconds["tests"] = time.perf_counter() - start
        start = time.perf_counter()
        store.start_run(
            "bench", audit="bench", config={"k": k}, config_hash="h", epoch="0",
            flow_run_id=None, versions={},
        )  # fmt: skip
        store.add_family("bench", [
            {"family": "m", "perturbation_id": f"p{i}", "position": i, "kind": "template",
             "label": "target", "description": f"value {i}", "original_arm": arms[0].arm_id,
             "perturbed_arm": arms[i + 1].arm_id, "test_id": f"t{i}"}
            for i in range(m)
        ])  # fmt: skip
        adjusted = np.minimum(p * m, 1.0)
        store.add_corrections(
            "bench", "m", "holm", 0.05,
            [Decision(f"p{i}", float(p[i]), float(adjusted[i]), adjusted[i] <= 0.05, True)
             for i in range(m)],
        )  # fmt: skip
        store.finish_run("bench", "completed")
        seconds["run, family, corrections"] = time.perf_counter() - start
    seconds["total"] = time.perf_counter() - opened
    return seconds


def main(quick: bool = False) -> None:
    sizes = QUICK if quick else FULL
    result = ResultFile("shared_record", quick)
    with (
        tempfile.TemporaryDirectory(prefix="dbpa-bench-shared-") as tmp,
        throwaway_cluster(settings={}) as server,
        remote_provider(RULES, latency=sizes.latency) as provider,
    ):
        runs = _Runs(Path(tmp), sizes.at_once, server, provider.api_base)

        def url() -> str:  # a database of its own for each measure
            return f"postgresql://{server.user}@{server.host}:{server.port}/" + (
                server.create_database()
            )

        configs = [runs.config(f"audit-{i}", sizes.k) for i in range(sizes.audits)]
        local = runs.batch(configs, str(Path(tmp) / "local.duckdb"), at_once=1)
        print(f"  {sizes.audits} audits one at a time on the file: {local:.1f} s", flush=True)
        shared = runs.batch(configs, url(), at_once=sizes.at_once)
        print(f"  {sizes.audits} audits {sizes.at_once} at a time, shared: {shared:.1f} s")
        alone: dict[str, list[float]] = {"file": [], "shared": []}
        for pair in range(sizes.alone_pairs):
            config = runs.config(f"alone-{pair}", sizes.k)
            order = ("file", "shared") if pair % 2 == 0 else ("shared", "file")
            for kind in order:
                db = str(Path(tmp) / f"alone-{pair}.duckdb") if kind == "file" else url()
                alone[kind].append(runs.run(config, db))
        print(f"  one audit alone: {alone}", flush=True)
        os.environ["PGPASSWORD"] = server.password
        m, b = sizes.perturbations, sizes.permutations
        writes = {
            "file": _write_audit(str(Path(tmp) / "writes.duckdb"), m, sizes.k, b),
            "shared": _write_audit(url(), m, sizes.k, b),
        }
    _report(result, sizes, local, shared, alone, writes)


def _report(
    result: ResultFile,
    sizes: Sizes,
    local: float,
    shared: float,
    alone: dict[str, list[float]],
    writes: dict[str, dict[str, float]],
) -> None:
    n, at_once = sizes.audits, sizes.at_once
    audit = f"5 arms, k = {sizes.k}, {sizes.latency:g} s a request"
    result.table(
        f"(1) {n} audits ({audit}): wall time of all of them",
        ["record", "at a time", "wall s", "s an audit", "x faster than the file", "goal"],
        [
            ["local DuckDB file", 1, local, local / n, 1.0, "baseline"],
            ["shared PostgreSQL", at_once, shared, shared / n, local / shared,
             f">= {SHARED_GOAL:g}x"],
        ],
    )  # fmt: skip
    file_s, shared_s = statistics.median(alone["file"]), statistics.median(alone["shared"])
    result.table(
        f"(2) one audit alone ({audit}), median of {len(alone['file'])} each, alternating",
        ["record", "wall s", "runs s", "x the file", "goal"],
        [
            ["local DuckDB file", file_s, " ".join(f"{s:.1f}" for s in alone["file"]), 1.0,
             "baseline"],
            ["shared PostgreSQL", shared_s, " ".join(f"{s:.1f}" for s in alone["shared"]),
             shared_s / file_s, f"<= {ALONE_GOAL:g}x"],
        ],
    )  # fmt: skip
    parts = list(writes["file"])
    result.table(
        f"(3) the writes of a {sizes.perturbations:,}-perturbation audit (k = {sizes.k}, "
        f"B = {sizes.permutations:,}) through storage.Store in one process, seconds",
        ["record", *parts, "x the file"],
        [
            [name, *(w[p] for p in parts), w["total"] / writes["file"]["total"]]
            for name, w in (("local DuckDB file", writes["file"]),
                            ("shared PostgreSQL", writes["shared"]))
        ],
    )  # fmt: skip
    result.note(
        f"{n} audits {at_once} at a time on the shared record: {local / shared:.2f}x faster "
        f"than one at a time on the file (goal >= {SHARED_GOAL:g}x); one audit alone "
        f"{shared_s / file_s:.2f}x the file's time (goal <= {ALONE_GOAL:g}x); the "
        f"{sizes.perturbations:,}-perturbation audit's writes "
        f"{writes['shared']['total'] / writes['file']['total']:.2f}x the file's"
    )
    result.write()
