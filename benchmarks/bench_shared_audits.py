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

Every ``dbpa run`` is a fresh process pointed at one running Prefect server
(``PREFECT_API_URL``), as a deployment's worker runs its flow runs at scale, in both arms: a
``prefect server start`` on a database of the same PostgreSQL cluster (a self-hosted Prefect
at scale runs on PostgreSQL; on SQLite it answers 503 under concurrent flow runs, see
``tests/support/prefect_api.py``), started once and untimed. ``dbpa run`` without
``PREFECT_API_URL`` starts a temporary server of its own instead (3-4 CPU-s more a run,
and its start-up in each run's wall time; see ARCHITECTURE.md): not measured here.
PostgreSQL is a throwaway cluster on this machine with the server's default (durable)
settings, made as the tests make theirs (``tests/support/postgres.py``); the password goes in
``PGPASSWORD``, never in the URL.

CPU is counted so that a run on a loaded machine can be judged: each ``dbpa run``'s CPU
seconds (its process and the children it waited for, from ``wait4``), and the servers'
(the Prefect server's and PostgreSQL's process trees) over each measure; the load average
at each measure's start and end. A measure whose wall time is near its CPU floor (all CPU
seconds over the cores) was bound by the machine, not by the model's latency.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
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


@dataclass(frozen=True)
class Measure:
    """The wall time of some ``dbpa run`` processes and the CPU they and the servers used."""

    wall: float
    runs_cpu: list[float]
    """CPU seconds of each ``dbpa run`` (its process and the children it waited for)."""
    servers_cpu: float
    """CPU seconds of the Prefect server's and PostgreSQL's processes meanwhile."""
    load: tuple[float, float]
    """The 1-minute load average at the start and at the end."""

    @property
    def machine_share(self) -> float:
        """The share of the machine's cores these processes got: their CPU over wall x cores
        (far below 1 on a machine others load, whatever the record)."""
        return self.cpu_floor / self.wall

    @property
    def cpu_floor(self) -> float:
        """The wall time if the machine's cores did nothing else: all CPU over the cores."""
        return (sum(self.runs_cpu) + self.servers_cpu) / (os.cpu_count() or 1)


def _postmaster(server: PostgresServer) -> int:
    """The pid of ``server``'s postmaster (the first line of its data directory's pid file)."""
    pid_file = server.socket_dir.parent / "data" / "postmaster.pid"
    return int(pid_file.read_text().split()[0])


def _tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid``, the children it waited for and its live children."""
    try:
        root = psutil.Process(pid)
        total = float(sum(root.cpu_times()[:4]))  # user, system, children's user and system
        for child in root.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:2])
    except psutil.Error:
        return 0.0
    return total


class _Runs:
    """``dbpa run`` processes pointed at one Prefect server, measured."""

    def __init__(self, tmp: Path, server: PostgresServer, api_base: str) -> None:
        self.tmp, self.api_base = tmp, api_base
        self.servers = [_postmaster(server)]
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PG"))}
        self.env = base | {
            "PREFECT_HOME": str(tmp / "home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "PYTHONPATH": str(ROOT),
            "PGPASSWORD": server.password,
            KEY_ENV: "sk-bench",
        }
        self.prefect, api_url = _start_prefect_server(tmp, server, self.env)
        self.servers.append(self.prefect.pid)
        self.env["PREFECT_API_URL"] = api_url

    def close(self) -> None:
        self.prefect.terminate()
        try:
            self.prefect.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.prefect.kill()
            self.prefect.wait()

    def warm(self) -> None:
        """What a ``dbpa run`` imports, imported once (untimed): the first measured run does
        not read it from disk alone."""
        imports = "import flows.audit; from dbpa.llm._client import litellm; litellm()"
        command = [sys.executable, "-c", imports]
        subprocess.run(command, env=self.env, cwd=ROOT, check=True, capture_output=True)

    def config(self, name: str, k: int) -> Path:
        path = self.tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump(_config(name, self.api_base, k)))
        return path

    def run(self, config: Path, db: str) -> float:
        """CPU seconds of ``dbpa run CONFIG --db DB`` to its exit (which must be 0)."""
        out = self.tmp / "reports" / config.stem
        command = [sys.executable, "-m", "dbpa.cli", "run", str(config), "--db", db]
        with tempfile.TemporaryFile("w+") as err:
            process = subprocess.Popen(
                [*command, "--out", str(out)], env=self.env, cwd=ROOT,
                stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode != 0:
                err.seek(0)
                raise RuntimeError(
                    f"{command[3:]} exited {process.returncode}:\n{err.read()[-3000:]}"
                )
        return usage.ru_utime + usage.ru_stime

    def batch(self, configs: Sequence[Path], db: str, at_once: int) -> Measure:
        """Every audit of ``configs`` on ``db``, ``at_once`` at a time."""
        load, servers = os.getloadavg()[0], sum(_tree_cpu(p) for p in self.servers)
        start = time.perf_counter()
        with ThreadPoolExecutor(at_once) as pool:
            cpu = list(pool.map(lambda c: self.run(c, db), configs))
        wall = time.perf_counter() - start
        servers = sum(_tree_cpu(p) for p in self.servers) - servers
        return Measure(wall, cpu, servers, (load, os.getloadavg()[0]))


def _start_prefect_server(
    tmp: Path, server: PostgresServer, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    """``prefect server start`` on a new database of ``server`` and its API's URL, once it
    answers (its migrations run then, untimed). Services no ``dbpa run`` needs are off."""
    database = server.create_database()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    idle = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "CANCELLATION_CLEANUP")
    url = (
        f"postgresql+asyncpg://{server.user}:{server.password}@{server.host}:{server.port}/"
        f"{database}"
    )
    server_env = env | {
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": url,
        "PREFECT_SERVER_UI_ENABLED": "false",
        **{f"PREFECT_SERVER_SERVICES_{s}_ENABLED": "false" for s in idle},
    }
    log = open(tmp / "prefect-server.log", "wb")  # noqa: SIM115 (the server's for its life)
    process = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
         str(port)],
        env=server_env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    health = f"http://127.0.0.1:{port}/api/health"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=5) as answer:
            if answer.status == 200:
                return process, f"http://127.0.0.1:{port}/api"
        time.sleep(0.5)
    process.kill()
    process.wait()
    raise RuntimeError(
        f"the Prefect server did not answer: {(tmp / 'prefect-server.log').read_text()[-3000:]}"
    )


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
        runs = _Runs(Path(tmp), server, provider.api_base)
        try:

            def url() -> str:  # a database of its own for each measure
                return f"postgresql://{server.user}@{server.host}:{server.port}/" + (
                    server.create_database()
                )

            runs.warm()
            configs = [runs.config(f"audit-{i}", sizes.k) for i in range(sizes.audits)]
            local = runs.batch(configs, str(Path(tmp) / "local.duckdb"), at_once=1)
            print(f"  {sizes.audits} audits one at a time on the file: {local}", flush=True)
            shared = runs.batch(configs, url(), at_once=sizes.at_once)
            print(f"  {sizes.audits} audits {sizes.at_once} at a time, shared: {shared}")
            alone: dict[str, list[Measure]] = {"file": [], "shared": []}
            for pair in range(sizes.alone_pairs):
                config = runs.config(f"alone-{pair}", sizes.k)
                order = ("file", "shared") if pair % 2 == 0 else ("shared", "file")
                for kind in order:
                    db = str(Path(tmp) / f"alone-{pair}.duckdb") if kind == "file" else url()
                    alone[kind].append(runs.batch([config], db, at_once=1))
            print(f"  one audit alone: {alone}", flush=True)
        finally:
            runs.close()
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
    local: Measure,
    shared: Measure,
    alone: dict[str, list[Measure]],
    writes: dict[str, dict[str, float]],
) -> None:
    n, at_once = sizes.audits, sizes.at_once
    audit = f"5 arms, k = {sizes.k}, {sizes.latency:g} s a request"
    cpu_columns = ["CPU-s a run", "servers' CPU-s", "CPU floor s", "cores used", "load start-end"]

    def cpu(m: Measure) -> list[object]:
        load = f"{m.load[0]:.1f}-{m.load[1]:.1f}"
        share = f"{m.machine_share:.0%}"
        return [statistics.mean(m.runs_cpu), m.servers_cpu, m.cpu_floor, share, load]

    result.table(
        f"(1) {n} audits ({audit}), each a `dbpa run` against one Prefect server: wall time "
        f"of all of them; CPU-s of a run (mean), of the servers (Prefect's and PostgreSQL's), "
        f"the floor they set on {os.cpu_count()} cores and the share of the cores they got",
        ["record", "at a time", "wall s", "s an audit", "x faster than the file", "goal",
         *cpu_columns],
        [
            ["local DuckDB file", 1, local.wall, local.wall / n, 1.0, "baseline", *cpu(local)],
            ["shared PostgreSQL", at_once, shared.wall, shared.wall / n, local.wall / shared.wall,
             f">= {SHARED_GOAL:g}x", *cpu(shared)],
        ],
    )  # fmt: skip
    file_s = statistics.median(m.wall for m in alone["file"])
    shared_s = statistics.median(m.wall for m in alone["shared"])
    result.table(
        f"(2) one audit alone ({audit}), median of {len(alone['file'])} each, alternating",
        ["record", "wall s", "runs s", "x the file", "goal", "CPU-s a run", "loads"],
        [
            [name, wall, " ".join(f"{m.wall:.1f}" for m in alone[kind]), wall / file_s, goal,
             statistics.mean(m.runs_cpu[0] for m in alone[kind]),
             " ".join(f"{m.load[0]:.1f}" for m in alone[kind])]
            for name, kind, wall, goal in (
                ("local DuckDB file", "file", file_s, "baseline"),
                ("shared PostgreSQL", "shared", shared_s, f"<= {ALONE_GOAL:g}x"),
            )
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
        f"{n} audits {at_once} at a time on the shared record: "
        f"{local.wall / shared.wall:.2f}x faster than one at a time on the file (goal >= "
        f"{SHARED_GOAL:g}x; {shared.wall:.0f} s against a CPU floor of {shared.cpu_floor:.0f} s, "
        f"{statistics.mean(shared.runs_cpu):.1f} CPU-s a run, {shared.machine_share:.0%} of "
        f"the cores got; load average {shared.load[0]:.1f} at its start); one audit alone "
        f"{shared_s / file_s:.2f}x the file's time (goal <= {ALONE_GOAL:g}x); the "
        f"{sizes.perturbations:,}-perturbation "
        f"audit's writes {writes['shared']['total'] / writes['file']['total']:.2f}x the file's"
    )
    result.write()
