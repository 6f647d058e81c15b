"""The audit flow at scale: a family of m perturbations, k=6, against a scripted provider.

For a baseline family (m=500) and a large one (m=10,000; ``--quick``: 100 and 1,000), in the
same run: the same outputs sampled through dbpa's sampler alone (the floor: litellm and the
in-flight bound, no Prefect, no DuckDB), then the audit in a process of its own (after a
warm-up audit there), its phases as the flow logs them and the process's peak RSS, then its
HTML report (size; gather and render time, from the record). What the pipeline costs per
perturbation is (audit - floor) / m, and (audit - sampling phase) / m; its ratio between the
two sizes says whether anything grows faster than the family.

At the large size the audit is then killed (SIGKILL) half-way through sampling and run again:
it must complete with every output stored once and ask only for what was missing.

k=6 gives 924 splits of two arms, so the p-value of one test cannot go below 1/924, while a
Holm (or any) correction of m tests needs 1/(B+1) <= 0.05/m: dbpa's config check refuses
k=6 for any m above 46. The audit measured here is such a config with that one check lifted
(``_unchecked``), 999 permutations (every split: exact): it costs what an audit of this size
costs, but could not reject anything. A real audit of 10,000 perturbations needs k >= 11 and
B >= 199,999.

The provider answers n=6 choices per request (one request per arm) after 50 ms; a prompt
with "pirate" in it gets other answers. Its embeddings are deterministic hash vectors (the
scripted server's ``/v1/embeddings``, through the litellm embedder), as in ``pipeline``.
"""

from __future__ import annotations

import argparse
import logging
import math
import multiprocessing as mp
import os
import re
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from benchmarks._provider import RemoteProvider, remote_provider
from benchmarks._table import print_table
from tests.support.scripted_server import Rule

KEY_ENV = "DBPA_BENCH_KEY"
K = 6
LATENCY = 0.05
CONCURRENCY = 32
PERMUTATIONS = 999
"""At least the 924 splits of k=6 + 6 outputs: every test is exact."""
RULES = (
    Rule("pirate", [(f"Arr, matey, rest {i} days and drink rum.", 1) for i in range(6)]),
    Rule("", [(f"Rest, drink fluids and see a doctor after {i} days.", 1) for i in range(12)]),
)


def _settings(server: RemoteProvider, m: int, k: int, name: str) -> dict[str, Any]:
    variants = [
        f"Question {i}: my flu has lasted {i % 7 + 2} days"
        + (", pirate" if i % 50 == 7 else "")
        + ", what now?"
        for i in range(m)
    ]
    return {
        "name": name,
        "models": [
            {
                "model": "openai/scripted",
                "api_base": server.api_base,
                "api_key_env": KEY_ENV,
                "max_concurrency": CONCURRENCY,
                "max_n": k,
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
        "seed": 1,
    }


def _unchecked(server: RemoteProvider, m: int, name: str) -> Any:
    """The audit of ``m`` perturbations at k=6 and B=999, past the check that refuses it."""
    from dbpa.config import parse_config
    from dbpa.stats import min_permutations

    needed = min_permutations(m, 0.05, "holm")
    enough_k = next(k for k in range(K, 64) if math.comb(2 * k, k) - 1 >= needed)
    valid = parse_config(
        _settings(server, m, enough_k, name) | {"n_permutations": max(needed, PERMUTATIONS)}
    )
    analysis = valid.analysis.model_copy(update={"n_permutations": PERMUTATIONS})
    return valid.model_copy(update={"k": K, "analysis": analysis})


# ---------------------------------------------------------------------- the audit's process


@dataclass(frozen=True)
class AuditRun:
    """One audit, measured in its own process."""

    wall: float
    """Seconds of the flow call, after the warm-up."""
    phases: dict[str, float]
    """Phase -> seconds, as the flow logs them (``sampling``, ``correcting``...)."""
    peak_rss_mb: float


class _Phases(logging.Handler):
    """Collects the flow's "<phase> took <s> s" log lines."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if found := re.fullmatch(r"(.+) took ([0-9.]+) s", record.getMessage()):
            self.found[found[1]] = float(found[2])


def _audit_process(conn: Connection, env: dict[str, str], warm: Any, config: Any, db: str) -> None:
    """Run a warm-up audit, say so, run ``config`` into ``db`` and send back an AuditRun."""
    os.environ.update(env)
    log = open(Path(db).with_suffix(".log"), "a", buffering=1)  # noqa: SIM115  (until exit)
    sys.stdout = sys.stderr = log  # Prefect's console log, the flow's INFO lines included
    from prefect import tags  # Prefect: after the environment is set

    from flows.audit import audit, flow_run_tags

    # As ``run_audit`` (with a server configured), but the flow takes the config as it is:
    # Prefect would validate it again, and the unchecked one does not pass.
    unchecked = audit.with_options(validate_parameters=False)

    def run(config: Any, db: str, out: str) -> None:
        with tags(*flow_run_tags(config)):
            unchecked(config=config, db=db, out=out)

    phases = _Phases()
    logging.getLogger("prefect.flow_runs").addHandler(phases)
    run(warm, str(Path(db).with_name("warm.duckdb")), str(Path(db).parent / "warm"))
    phases.found.clear()
    conn.send("started")
    start = time.perf_counter()
    run(config, db, str(Path(db).parent / "reports"))
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send(AuditRun(wall, dict(phases.found), peak))


class _AuditProcess:
    """An audit in a child process; :meth:`result` waits for it, :meth:`kill` ends it."""

    def __init__(self, env: dict[str, str], warm: Any, config: Any, db: Path) -> None:
        self._log = db.with_suffix(".log")
        context = mp.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._child = context.Process(
            target=_audit_process, args=(theirs, env, warm, config, str(db)), daemon=True
        )
        self._child.start()
        if self._receive() != "started":
            raise RuntimeError("the audit process did not start")

    def _receive(self) -> Any:
        try:
            while not self._conn.poll(1.0):
                if not self._child.is_alive():
                    break
            return self._conn.recv()
        except EOFError:
            self._child.join(timeout=60)
            tail = "".join(self._log.read_text().splitlines(keepends=True)[-40:])
            raise RuntimeError(
                f"the audit process died (exit {self._child.exitcode}); its log ends:\n{tail}"
            ) from None

    def result(self) -> AuditRun:
        run: AuditRun = self._receive()
        self._child.join(timeout=60)
        return run

    def kill(self) -> None:
        self._child.kill()  # SIGKILL
        self._child.join(timeout=60)


# ---------------------------------------------------------------------- measures


def _floor(spec: Any, arms: int) -> float:
    """Seconds to sample ``arms`` x k outputs of ``spec`` through dbpa's sampler alone, with
    as many arms in flight as the audit's sample task runs."""
    from dbpa.llm import sample
    from dbpa.specs import Message
    from flows.audit import SAMPLE_TASK_RUNS, SAMPLING_THREADS
    from tasks.sample import ARMS_IN_FLIGHT

    def fill(arm: int) -> int:
        prompt = (Message(role="user", content=f"Floor question {arm}: my flu, what now?"),)
        return len(sample(spec, prompt, range(K), seed=arm))

    per_task = min(math.ceil(arms / SAMPLE_TASK_RUNS), ARMS_IN_FLIGHT)
    fill(-1)  # litellm's first request pays for its imports and client
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=SAMPLING_THREADS * per_task) as pool:
        assert sum(pool.map(fill, range(arms))) == arms * K
    return time.perf_counter() - start


@dataclass(frozen=True)
class Report:
    """The HTML report of a run: size, and gathering and rendering it from the record."""

    html_mb: float
    gather_s: float
    render_s: float
    figures: int
    summary_rows: int


def _report(db: Path) -> Report:
    from dbpa.report import gather, render_html
    from storage import Store

    with Store(db, read_only=True) as store:
        start = time.perf_counter()
        data = gather(store, "latest")
        gathered = time.perf_counter()
        page = render_html(data)
        rendered = time.perf_counter()
        written = Path(str(store.run("latest")["report_path"]))
    return Report(
        html_mb=written.stat().st_size / 1e6,
        gather_s=gathered - start,
        render_s=rendered - gathered,
        figures=page.count('src="data:image/svg+xml;base64,'),
        summary_rows=page.count("<tr data-family="),
    )


@dataclass(frozen=True)
class Record:
    """What a run left in the record."""

    outputs: int
    distinct_outputs: int
    complete_arms: int
    tests: int
    exact: bool
    status: str


def _record(db: Path) -> Record:
    from storage import Store

    with Store(db, read_only=True) as store:
        samples = store.samples()
        run = store.run("latest")
        results = store.results(str(run["run_id"]))
    per_arm = samples.groupby("arm_id").idx.nunique()
    return Record(
        outputs=len(samples),
        distinct_outputs=len(samples[["arm_id", "idx"]].drop_duplicates()),
        complete_arms=int((per_arm >= K).sum()),
        tests=int(results.tested.sum()),
        exact=bool(results.exact.all()),
        status=str(run["status"]),
    )


@dataclass(frozen=True)
class Size:
    """One family size, measured."""

    m: int
    floor: float
    audit: AuditRun
    report: Report

    @property
    def sampling(self) -> float:
        return self.audit.phases.get("sampling", math.nan)

    @property
    def over_floor_ms(self) -> float:
        """(audit - floor) / m, in ms."""
        return 1000 * (self.audit.wall - self.floor) / self.m

    @property
    def over_sampling_ms(self) -> float:
        """(audit - sampling phase) / m, in ms."""
        return 1000 * (self.audit.wall - self.sampling) / self.m


def _measure(server: RemoteProvider, env: dict[str, str], warm: Any, m: int, tmp: Path) -> Size:
    config = _unchecked(server, m, f"scale-{m}")
    floor = _floor(config.models[0], m + 1)
    (tmp / str(m)).mkdir()
    db = tmp / str(m) / "audit.duckdb"
    audit = _AuditProcess(env, warm, config, db).result()
    record = _record(db)
    assert record.status == "completed", record
    assert record.complete_arms == m + 1, record
    assert record.tests == m, record
    return Size(m, floor, audit, _report(db))


@dataclass(frozen=True)
class Resume:
    """A run killed half-way through sampling, and the same run again."""

    asked_first: int
    """Chat requests the provider had received from the first run when it was killed."""
    stored_at_kill: int
    """Outputs stored when it was killed."""
    complete_at_kill: int
    """Arms holding all k outputs when it was killed (one request each)."""
    asked_again: int
    """Requests of the second run."""
    repeated: int
    """Requests for a (prompt, seed) asked before: those the first run had sent but not
    stored the answer of when it was killed."""
    second: AuditRun
    record: Record


def _kill_and_resume(
    server: RemoteProvider, env: dict[str, str], warm: Any, m: int, tmp: Path
) -> Resume:
    # Another seed: none of its requests was asked by the audits before.
    config = _unchecked(server, m, f"scale-{m}-killed").model_copy(update={"seed": 2})
    (tmp / "killed").mkdir()
    db = tmp / "killed" / "audit.duckdb"
    first = _AuditProcess(env, warm, config, db)
    before = server.requests()  # after the warm-up (its requests were asked before)
    while server.requests().chat - before.chat < (m + 1) // 2:
        time.sleep(0.2)
    first.kill()
    killed = server.requests()
    at_kill = _record(db)
    assert at_kill.status == "running", at_kill  # nobody could mark it
    second = _AuditProcess(env, warm, config, db).result()
    after = server.requests()
    record = _record(db)
    assert record.status == "completed", record
    assert record.outputs == record.distinct_outputs == (m + 1) * K, record
    return Resume(
        asked_first=killed.chat - before.chat,
        stored_at_kill=at_kill.outputs,
        complete_at_kill=at_kill.complete_arms,
        asked_again=after.chat - killed.chat,
        repeated=after.repeated - before.repeated,
        second=second,
        record=record,
    )


# ---------------------------------------------------------------------- main


@contextmanager
def audit_bench(tag: str) -> Iterator[tuple[RemoteProvider, dict[str, str], Any, Path]]:
    """The scripted provider, a Prefect test server, the audit processes' environment, a
    warm-up config and a temporary directory, for benchmarks that time audits in processes
    of their own."""
    os.environ.setdefault(KEY_ENV, "sk-bench")
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    import tasks  # noqa: F401  (dbpa's process defaults, no telemetry: before Prefect starts)
    from dbpa.config import parse_config

    with (
        tempfile.TemporaryDirectory() as tmp,
        remote_provider(RULES, LATENCY) as server,
        prefect_test_harness(server_startup_timeout=180),
    ):
        env = {
            KEY_ENV: os.environ[KEY_ENV],
            "PREFECT_API_URL": str(PREFECT_API_URL.value()),
            "PREFECT_LOCAL_STORAGE_PATH": str(Path(tmp) / "prefect-results"),
        }
        warm = parse_config(_settings(server, 2, 4, f"{tag}-warm-up") | {"n_permutations": 199})
        yield server, env, warm, Path(tmp)


def main(quick: bool = False, large: int | None = None) -> None:
    base, large = (100, large or 1_000) if quick else (500, large or 10_000)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with audit_bench("scale") as (server, env, warm, tmp):
        sizes = [_measure(server, env, warm, m, tmp) for m in (base, large)]
        resume = _kill_and_resume(server, env, warm, large, tmp)
    _print(sizes, resume, load, time.perf_counter() - start)


def _print(sizes: list[Size], resume: Resume, load: float, seconds: float) -> None:
    small, big = sizes
    rows: list[list[object]] = []
    for name, value, unit in (
        ("sampler alone (floor)", lambda s: s.floor, "s"),
        ("audit wall time", lambda s: s.audit.wall, "s"),
        ("  sampling phase", lambda s: s.sampling, "s"),
        (
            "  embed + test the rest",
            lambda s: s.audit.phases.get("embedding and testing the rest"),
            "s",
        ),
        ("  correcting", lambda s: s.audit.phases.get("correcting"), "s"),
        ("  reporting", lambda s: s.audit.phases.get("reporting"), "s"),
        ("(audit - floor) / m", lambda s: s.over_floor_ms, "ms"),
        ("(audit - sampling) / m", lambda s: s.over_sampling_ms, "ms"),
        ("peak RSS of the audit process", lambda s: s.audit.peak_rss_mb, "MB"),
        ("HTML report", lambda s: s.report.html_mb, "MB"),
        ("  gather from the record", lambda s: s.report.gather_s, "s"),
        ("  render HTML", lambda s: s.report.render_s, "s"),
        ("  per-test figures", lambda s: s.report.figures, ""),
        ("  rows with a perturbation", lambda s: s.report.summary_rows, ""),
    ):
        a, b = value(small), value(big)
        ratio = b / a if isinstance(a, int | float) and a else ""
        rows.append([f"{name} ({unit})" if unit else name, a, b, ratio])
    print_table(
        f"scale: k={K}, B={PERMUTATIONS} (exact), one request of n={K} per arm, "
        f"{LATENCY * 1000:.0f} ms latency, concurrency {CONCURRENCY}; "
        f"load average before the run {load:.2f}; {seconds:.0f} s in all",
        ["measure", f"m={small.m:,}", f"m={big.m:,}", "ratio"],
        rows,
    )
    budget = max(big.over_floor_ms, big.over_sampling_ms)
    print(
        f"storage + test cost per perturbation at m={big.m:,}: {big.over_floor_ms:.1f} ms over "
        f"the floor, {big.over_sampling_ms:.1f} ms outside sampling; target <= 50 ms: "
        f"{'ok' if budget <= 50 else 'MISSED'}"
    )
    r = resume
    missing = big.m + 1 - r.complete_at_kill
    unstored = r.asked_first - r.complete_at_kill
    outputs = (big.m + 1) * K
    print_table(
        f"kill -9 half-way through sampling at m={big.m:,}, then the same audit again",
        ["measure", "value", "expected", "ok"],
        [
            ["requests sent by the first run", r.asked_first, "", ""],
            ["outputs stored at the kill", r.stored_at_kill, "", ""],
            ["arms complete at the kill", r.complete_at_kill, "", ""],
            ["requests of the second run", r.asked_again, missing, r.asked_again == missing],
            [
                "  of them asked before (sent, not stored)",
                r.repeated,
                unstored,
                r.repeated == unstored,
            ],
            [
                "outputs stored, all distinct",
                r.record.outputs,
                outputs,
                r.record.outputs == outputs,
            ],
            ["tests stored", r.record.tests, big.m, r.record.tests == big.m],
            ["status", r.record.status, "completed", r.record.status == "completed"],
            ["second run wall time (s)", r.second.wall, "", ""],
            ["second run peak RSS (MB)", r.second.peak_rss_mb, "", ""],
        ],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_scale", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="m=100 against m=1,000")
    parser.add_argument("--large", type=int, help="the large family's size (default 10,000)")
    args = parser.parse_args()
    main(quick=args.quick, large=args.large)
