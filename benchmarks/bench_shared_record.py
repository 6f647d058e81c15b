"""Engines for a shared record (issue 50), on the same work: (a) the writes of a
1,000-perturbation audit (k = 20, B = 19,999: arms, outputs with their texts, 384-float vectors,
tests with their null distributions and effect intervals, the family, the corrections; batched
as the storage layer batches them), (b) 8 processes writing the same audit's tables at once
(every writer writes all of it, in an order of its own: overlapping keys, idempotent inserts),
(c) reads: ``dbpa results``'s joins on the audit's run and on a run of 10,000 perturbations,
and the test stage's read of every arm's vectors.

Candidates: the local DuckDB file (the baseline; one writing process), PostgreSQL through
psycopg 3 (COPY into a temporary table then ``INSERT ... ON CONFLICT DO NOTHING``, with the
lists as ``bytea`` or as ``real[]``; or ``executemany``), DuckDB's SQL on a PostgreSQL database
attached through DuckDB's postgres extension, and DuckLake with its catalog in PostgreSQL and
its data as Parquet. The last two need ``duckdb==1.5.5`` (the project pins 2.0.0) and run
only where ``DBPA_DUCKLAKE_PYTHON`` (default ``/tmp/ducklake-venv/bin/python``) is an
interpreter of a throwaway venv made once with::

    python3 -m venv /tmp/ducklake-venv && /tmp/ducklake-venv/bin/pip install duckdb==1.5.5 \\
        duckdb-extension-ducklake==1.5.5 duckdb-extension-postgres-scanner==1.5.5 \\
        numpy==2.4.6 pyarrow==26.0.1

Every candidate's work is a process of ``benchmarks._record_work`` (the same code and data);
PostgreSQL is a throwaway cluster with the server's default (durable) settings, on this
machine. Ratios are against the local file measured in the same run.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from benchmarks._record_work import Audit, expected_rows, iter_lines
from benchmarks._results import ResultFile
from tests.support.postgres import PostgresServer, throwaway_cluster

ROOT = Path(__file__).resolve().parents[1]
WRITERS = 8
BASELINE = "duckdb"
ENGINES = (
    "duckdb",
    "postgres-copy",
    "postgres-arrays",
    "postgres-executemany",
    "duckdb-postgres",
    "ducklake",
)
CONCURRENT = ("duckdb", "postgres-copy", "postgres-executemany", "duckdb-postgres", "ducklake")
OLD_DUCKDB = frozenset({"duckdb-postgres", "ducklake"})
"""The candidates that need ``duckdb==1.5.5`` and its extension packages."""
LABELS = {
    "duckdb": "DuckDB file (local)",
    "postgres-copy": "PostgreSQL, COPY, lists as bytea",
    "postgres-arrays": "PostgreSQL, COPY, real[]/float8[]",
    "postgres-executemany": "PostgreSQL, executemany, bytea",
    "duckdb-postgres": "DuckDB 1.5.5 SQL on PostgreSQL (attach)",
    "ducklake": "DuckLake 1.5.5, catalog in PostgreSQL",
}


class _Candidates:
    """Where each candidate's record lives, and how its worker process is run."""

    def __init__(self, server: PostgresServer, tmp: Path, lake_python: str | None) -> None:
        self.server, self.tmp, self.lake_python = server, tmp, lake_python

    def fresh(self, engine: str, name: str) -> list[str]:
        """A new empty record for ``engine``: its worker arguments (tables created)."""
        database = self.server.create_database()
        target = self.tmp / f"{engine}-{name}"
        if engine == "ducklake":
            target.mkdir()
        else:
            target = target.with_suffix(".duckdb")
        where = [engine, "--target", str(target), "--conninfo", self.server.conninfo(database)]
        self.run(["create", *where])
        return where

    def start(self, args: list[str]) -> subprocess.Popen[str]:
        python = self.lake_python if args[1] in OLD_DUCKDB else sys.executable
        assert python is not None
        return subprocess.Popen(
            [python, "-m", "benchmarks._record_work", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )

    def run(self, args: list[str]) -> dict[str, Any]:
        return _result(self.start(args), args)

    def size_mb(self, where: list[str]) -> float:
        """The record's size on disk: the file, the database, or the catalog and the data."""
        engine, target, conninfo = where[0], Path(where[2]), where[4]
        total = 0
        if engine == "duckdb":
            total = target.stat().st_size
        else:
            with psycopg.connect(conninfo) as con:
                found = con.execute("SELECT pg_database_size(current_database())").fetchone()
            total = int(found[0]) if found else 0
        if engine == "ducklake":
            total += sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        return total / 1e6


def _result(process: subprocess.Popen[str], args: list[str]) -> dict[str, Any]:
    out, err = process.communicate()
    found = list(iter_lines(out))
    if process.returncode != 0 or not found:
        raise RuntimeError(f"{args} exited {process.returncode}: {err[-2000:]}")
    return found[-1]


def _sizes(audit: Audit) -> list[str]:
    return ["--m", str(audit.m), "--k", str(audit.k), "--b", str(audit.b)]


def _writes(c: _Candidates, engines: list[str], audit: Audit) -> dict[str, Any]:
    """(a), then (c) on the same record: one process writes the audit, another reads it."""
    found: dict[str, Any] = {}
    for engine in engines:
        where = c.fresh(engine, "audit")
        wrote = c.run(["write", *where, *_sizes(audit)])
        again = c.run(["write", *where, *_sizes(audit)])  # a resumed audit: every row there
        read = c.run(["read", *where, *_sizes(audit), "--vectors", "--repeats", "5"])
        found[engine] = {"write": wrote, "again": again, "read": read, "mb": c.size_mb(where)}
        print(f"  (a) {engine}: {json.dumps(wrote)[:200]}", flush=True)
    return found


def _large_results(c: _Candidates, engines: list[str], audit: Audit) -> dict[str, Any]:
    """(c): ``dbpa results``'s joins on a run of ``audit.m`` perturbations."""
    found = {}
    for engine in engines:
        where = c.fresh(engine, "large")
        sizes = [*_sizes(audit), "--no-intervals"]
        c.run(["write", *where, *sizes, "--tables", "tests,run_tests,corrections"])
        found[engine] = c.run(["read", *where, *sizes, "--repeats", "5"])
    return found


def _concurrent(c: _Candidates, engines: list[str], audit: Audit) -> dict[str, Any]:
    """(b): ``WRITERS`` processes write the whole audit at once, each in its own order."""
    found: dict[str, Any] = {}
    for engine in engines:
        where = c.fresh(engine, "shared")
        start_at = time.time() + 4.0  # every process started and its data drawn by then
        processes = [
            c.start(
                ["write", *where, *_sizes(audit), "--shuffle", str(w), "--start-at", str(start_at)]
            )
            for w in range(WRITERS)
        ]
        results = [_result(p, ["write", engine]) for p in processes]
        counts = c.run(["count", *where, *_sizes(audit)])
        serial = None
        if engine == BASELINE:  # one writer at a time: the same 8 writes, one after another
            serial_where = c.fresh(engine, "serial")
            serial = [
                c.run(["write", *serial_where, *_sizes(audit), "--shuffle", str(w)])
                for w in range(WRITERS)
            ]
        found[engine] = {"writers": results, "counts": counts, "serial": serial}
        print(f"  (b) {engine}: {[r.get('seconds', 'refused') for r in results]}", flush=True)
    return found


def _lake_python() -> str | None:
    python = os.environ.get("DBPA_DUCKLAKE_PYTHON", "/tmp/ducklake-venv/bin/python")
    return python if shutil.which(python) else None


def main(quick: bool = False) -> None:
    audit = Audit(m=100, k=20, b=1_999) if quick else Audit(m=1_000, k=20, b=19_999)
    shared = Audit(m=20, k=20, b=1_999) if quick else Audit(m=100, k=20, b=19_999)
    large = Audit(m=1_000, k=20, b=999, intervals=False) if quick else Audit(10_000, 20, 999, False)
    result_file = ResultFile("shared_record_engines", quick)
    lake_python = _lake_python()
    engines = [e for e in ENGINES if e not in OLD_DUCKDB or lake_python]
    if lake_python is None:
        result_file.note(
            "DuckLake and DuckDB on PostgreSQL left out: no DBPA_DUCKLAKE_PYTHON (see above)"
        )
    load = os.getloadavg()[0]
    with throwaway_cluster(settings={}) as server, tempfile.TemporaryDirectory() as tmp:
        c = _Candidates(server, Path(tmp), lake_python)
        writes = _writes(c, engines, audit)
        concurrent = _concurrent(c, [e for e in CONCURRENT if e in engines], shared)
        larger = _large_results(c, engines, large)
    _report(result_file, writes, concurrent, larger, audit, shared, large, load)
    result_file.write()


def _report(
    result_file: ResultFile,
    writes: dict[str, Any],
    concurrent: dict[str, Any],
    larger: dict[str, Any],
    audit: Audit,
    shared: Audit,
    large: Audit,
    load: float,
) -> None:
    base = writes[BASELINE]
    rows = []
    for engine, f in writes.items():
        seconds, again = _seconds(f["write"]), _seconds(f["again"])
        tables = f["write"]["tables"]
        rows.append([
            LABELS[engine], seconds, seconds / _seconds(base["write"]),
            tables["arms"] + tables["samples"], tables["embeddings"], tables["tests"],
            tables["run_tests"] + tables["corrections"], again,
            again / _seconds(base["again"]), f["mb"],
        ])  # fmt: skip
    result_file.table(
        f"(a) the writes of an audit: m={audit.m:,} perturbations, k={audit.k}, "
        f"B={audit.b:,}: {base['write']['transactions']:,} transactions, one "
        f"process; again: the same writes on the written record; load average before {load:.2f}",
        [
            "engine",
            "write s",
            "x local",
            "arms+outputs s",
            "vectors s",
            "tests s",
            "family s",
            "again s",
            "x local",
            "MB on disk",
        ],
        rows,
    )
    expected = expected_rows(shared)
    rows = []
    serial = sum(_seconds(r) for r in concurrent[BASELINE]["serial"])
    for engine, f in concurrent.items():
        done = [r for r in f["writers"] if r.get("ok")]
        wall = max((r["seconds"] for r in done), default=float("nan"))
        lost = sum(expected[t] - f["counts"][t][1] for t in expected)
        duplicated = sum(f["counts"][t][0] - f["counts"][t][1] for t in expected)
        errors = sorted(
            {
                r["error"].split(' on file "')[0].splitlines()[0]
                for r in f["writers"]
                if not r.get("ok")
            }
        )
        rows.append([
            LABELS[engine], f"{len(done)}/{WRITERS}", wall, wall / serial,
            sum(r.get("retries", 0) for r in done), lost, duplicated, "; ".join(errors) or "-",
        ])  # fmt: skip
    result_file.table(
        f"(b) {WRITERS} processes write the same audit at once (m={shared.m}, k={shared.k}, "
        f"B={shared.b:,}; each all of it, in its own order); baseline: the local file, "
        f"the {WRITERS} writes one after another: {serial:.2f} s",
        ["engine", "writers done", "wall s", "x local serial", "retries", "rows lost",
         "rows duplicated", "refused"],
        rows,
    )  # fmt: skip
    rows = []
    for engine in writes:
        read, big = writes[engine]["read"], larger[engine]
        results, vectors = statistics.median(read["results"]), statistics.median(read["vectors"])
        results_big = statistics.median(big["results"])
        b_read, b_big = base["read"], larger[BASELINE]
        rows.append([
            LABELS[engine], results * 1e3, results / statistics.median(b_read["results"]),
            results_big * 1e3, results_big / statistics.median(b_big["results"]),
            vectors * 1e3, vectors / statistics.median(b_read["vectors"]),
        ])  # fmt: skip
    result_file.table(
        f"(c) reads, median of 5 in one process: results of the m={audit.m:,} run and of a "
        f"m={large.m:,} run; the {(audit.m + 1) * audit.k:,} x 384 vectors of every arm",
        ["engine", f"results {audit.m:,} ms", "x local", f"results {large.m:,} ms", "x local",
         "vectors ms", "x local"],
        rows,
    )  # fmt: skip


def _seconds(result: dict[str, Any]) -> float:
    if not result.get("ok"):
        raise RuntimeError(result.get("error"))
    return float(result["seconds"])


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
