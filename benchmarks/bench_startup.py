"""Start-up of ``dbpa``: time to the first model request, the re-run of a finished audit, and
``dbpa --help``, against bare Prefect measured in the same run.

Every measure is a fresh interpreter (``python -m dbpa.cli ...`` as a user runs it), in one
Prefect home made for the benchmark and initialized by an untimed flow run first (as a user's
second run finds it). The small audit: one model (the scripted OpenAI-compatible server in its
own process on 127.0.0.1, answering at once), four personas (five arms), k=8, B=199, and the
embedded embedder (all-MiniLM-L6-v2, torch and sentence-transformers); its re-run asks the
model nothing. The baselines: ``import prefect`` alone, and a trivial flow run with Prefect's
own temporary server (to its flow body, and to its exit).

Rounds run the measures back to back in the same order; reported are medians over the
rounds, the ratios of the medians to their baseline, the CPU time of each measure (the
process and its children, Prefect's server included: far less sensitive to other jobs on
the machine than wall time) and the load average before and after.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

from benchmarks._results import ResultFile
from tests.support.scripted_server import Rule, ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "DBPA_BENCH_KEY"
RULES = (
    Rule("comedian", [("Why did the flu cross the road? Rest!", 1), ("Knock knock, flu.", 1)]),
    Rule("", [("Rest, drink fluids and see a doctor if it gets worse.", 2), ("Rest.", 1)]),
)
TARGET_S = 6.0
HELP_TARGET_S = 0.5
BARE_FLOW = """
import sys, time
from prefect import flow

@flow
def noop() -> None:
    print(time.time(), flush=True)

noop()
"""


@dataclass(frozen=True)
class Timed:
    """One fresh interpreter: its wall time, CPU time (children included) and what it said."""

    wall: float
    cpu: float
    started: float
    """``time.time()`` at its launch."""
    stdout: str


def _timed(args: list[str], env: dict[str, str]) -> Timed:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started, start = time.time(), time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{args} exited {done.returncode}: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(wall, cpu, started, done.stdout)


class _RemoteProvider:
    """A ScriptedServer in a child process that notes when the first chat request came."""

    def __init__(self, conn: Connection, api_base: str) -> None:
        self._conn, self.api_base = conn, api_base

    def first_request(self) -> float | None:
        """``time.time()`` of the first chat request since the last call (then forgotten)."""
        self._conn.send("first")
        return self._conn.recv()  # type: ignore[no-any-return]


def _serve(conn: Connection) -> None:
    first: list[float] = []

    def note(body: dict[str, Any]) -> float:
        if "messages" in body and not first:
            first.append(time.time())
        return 0.0

    with ScriptedServer(rules=RULES, latency=note) as server:
        conn.send(server.api_base)
        while conn.recv() == "first":
            conn.send(first[0] if first else None)
            first.clear()


@contextmanager
def _provider() -> Iterator[_RemoteProvider]:
    ours, theirs = mp.get_context("spawn").Pipe()
    child = mp.get_context("spawn").Process(target=_serve, args=(theirs,), daemon=True)
    child.start()
    try:
        yield _RemoteProvider(ours, ours.recv())
    finally:
        ours.send("stop")
        child.join(timeout=30)
        if child.is_alive():
            child.kill()


def _config(api_base: str) -> dict[str, Any]:
    return {
        "name": "startup",
        "models": [
            {
                "model": "openai/scripted",
                "api_base": api_base,
                "api_key_env": KEY_ENV,
                "max_concurrency": 8,
                "max_n": 1,
            }
        ],
        "prompt": "My flu has lasted two days. Should I see a doctor?",
        "perturbations": [
            {
                "kind": "personas",
                "values": [
                    {"value": "doctor", "label": "control"},
                    {"value": "nurse", "label": "control"},
                    {"value": "comedian", "label": "target"},
                    {"value": "child", "label": "target"},
                ],
            }
        ],
        "k": 8,
        "n_permutations": 199,
        "seed": 1,
    }


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return env | {
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        # Prefect's 20 s default fails the first start in a new home on a loaded machine;
        # the same for every measure, it times nothing.
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
        "DO_NOT_TRACK": "1",
        "PYTHONPATH": str(ROOT),
        KEY_ENV: "sk-bench",
    }


def main(quick: bool = False) -> None:
    result_file = ResultFile("startup", quick)
    rounds = 1 if quick else 3
    python = sys.executable
    load_before = os.getloadavg()[0]
    found: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        found.setdefault(name, []).append(value)

    with tempfile.TemporaryDirectory() as tmp, _provider() as provider:
        env = _environment(Path(tmp) / "prefect-home")
        config = Path(tmp) / "audit.yaml"
        config.write_text(yaml.safe_dump(_config(provider.api_base)))
        _timed([python, "-c", BARE_FLOW], env)  # initializes the Prefect home
        for r in range(rounds):
            bare = _timed([python, "-c", "import prefect"], env)
            note("import prefect", bare.wall)
            note("import prefect cpu", bare.cpu)
            flow = _timed([python, "-c", BARE_FLOW], env)
            note("bare flow: to its body", float(flow.stdout.split()[0]) - flow.started)
            note("bare flow: to exit", flow.wall)
            note("bare flow cpu", flow.cpu)
            helped = _timed([python, "-m", "dbpa.cli", "--help"], env)
            note("dbpa --help", helped.wall)
            run = [python, "-m", "dbpa.cli", "run", str(config), "--db", f"{tmp}/r{r}.duckdb"]
            run += ["--out", f"{tmp}/reports"]
            provider.first_request()  # forget any earlier request
            fresh = _timed(run, env)
            first = provider.first_request()
            if first is None:
                raise RuntimeError("the audit made no model request")
            note("run: to first request", first - fresh.started)
            note("run: to exit", fresh.wall)
            note("run cpu", fresh.cpu)
            rerun = _timed(run, env)
            if provider.first_request() is not None:
                raise RuntimeError("the re-run of a finished audit asked the model")
            note("re-run: to exit", rerun.wall)
            note("re-run cpu", rerun.cpu)
    load_after = os.getloadavg()[0]

    m = {name: statistics.median(values) for name, values in found.items()}

    def row(measure: str, baseline: str, target: float | None) -> list[object]:
        value = m[measure]
        verdict = "" if target is None else ("pass" if value <= target else "FAIL")
        return [
            measure,
            value,
            baseline,
            m[baseline],
            value / m[baseline],
            "" if target is None else f"<= {target:g} s",
            verdict,
        ]

    result_file.table(
        f"startup: median of {rounds} round(s), seconds; {os.cpu_count()} cores, load average "
        f"{load_before:.1f} before, {load_after:.1f} after",
        ["measure", "s", "baseline", "baseline s", "ratio", "target", "ok"],
        [
            row("dbpa --help", "import prefect", HELP_TARGET_S),
            row("run: to first request", "bare flow: to its body", TARGET_S),
            row("run: to exit", "bare flow: to exit", None),
            row("re-run: to exit", "bare flow: to exit", TARGET_S),
        ],
    )
    result_file.table(
        "CPU seconds (the process and its children, Prefect's server included)",
        ["measure", "cpu s", "baseline", "baseline cpu s", "ratio"],
        [
            [
                "run (first request, embed, test, report)",
                m["run cpu"],
                "bare flow",
                m["bare flow cpu"],
                m["run cpu"] / m["bare flow cpu"],
            ],
            [
                "re-run",
                m["re-run cpu"],
                "bare flow",
                m["bare flow cpu"],
                m["re-run cpu"] / m["bare flow cpu"],
            ],
            ["import prefect", m["import prefect cpu"], "", "", ""],
        ],
    )
    result_file.note(
        "all rounds (s): "
        + "; ".join(
            f"{k} {', '.join(f'{v:.2f}' for v in vs)}" for k, vs in found.items() if "cpu" not in k
        )
    )
    result_file.write()
