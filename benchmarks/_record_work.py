"""The record writes and reads of an audit, on one engine, in one process: the worker of
``bench_shared_record`` (``python -m benchmarks._record_work PART ENGINE ...`` prints one JSON
line).

Imports only numpy, pyarrow, duckdb and (for PostgreSQL) psycopg, so that it also runs in a
throwaway venv with ``duckdb==1.5.5`` and the DuckLake extension (``--engine ducklake``). The
tables are dbpa's record tables with their keys and the columns that carry the volume (texts,
384-float vectors, null distributions, bootstrap draws); the batches are the storage layer's:
the arms in one transaction, an arm's outputs in one, 256 vectors in one, 50 tests with their
effect intervals in one, the family and the corrections in one each. Every write is
idempotent on the table's key.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import struct
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

DIM = 384
EMBED_BATCH = 256
TESTS_BATCH = 50
RUN = "run-1"
EMBEDDER = "all-MiniLM-L6-v2"

TABLES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "arms": (("arm_id",), {"arm_id": "text", "model": "text", "params": "text",
                           "messages": "text", "epoch": "text"}),
    "samples": (("arm_id", "idx"), {
        "arm_id": "text", "idx": "int", "text": "text", "text_hash": "text", "status": "text",
        "prompt_tokens": "int", "completion_tokens": "int", "cost_usd": "double",
        "latency_s": "double", "seed": "bigint"}),
    "embeddings": (("text_hash", "embedder"), {
        "text_hash": "text", "embedder": "text", "dim": "int", "vector": "f4list",
        "truncated": "bool"}),
    "tests": (("test_id",), {
        "test_id": "text", "original_arm": "text", "perturbed_arm": "text", "embedder": "text",
        "omega": "text", "n_permutations": "int", "seed": "bigint", "statistic": "double",
        "p_value": "double", "null_mean": "double", "null_std": "double", "effect": "double",
        "k_a": "int", "k_b": "int", "null_distribution": "f8list"}),
    "effect_intervals": (("test_id",), {
        "test_id": "text", "estimate": "double", "low": "double", "high": "double",
        "n_bootstrap": "int", "bootstrap": "f4list", "noise": "f4list",
        "directions": "f4list", "distances": "f8list"}),
    "run_tests": (("run_id", "family", "perturbation_id"), {
        "run_id": "text", "family": "text", "perturbation_id": "text", "position": "int",
        "kind": "text", "description": "text", "original_arm": "text",
        "perturbed_arm": "text", "test_id": "text"}),
    "corrections": (("run_id", "family", "perturbation_id"), {
        "run_id": "text", "family": "text", "perturbation_id": "text", "method": "text",
        "alpha": "double", "p_value": "double", "adjusted_p": "double", "reject": "bool",
        "tested": "bool"}),
}  # fmt: skip
"""table -> (key, column -> kind): a subset of dbpa's record with the columns of volume."""

RESULTS_SQL = """
    SELECT rt.run_id, rt.family, rt.position, rt.perturbation_id, rt.kind, rt.description,
           t.omega, t.statistic, t.effect, t.null_mean, t.null_std, t.p_value, c.adjusted_p,
           c.reject, c.method, c.alpha, COALESCE(c.tested, t.test_id IS NOT NULL) AS tested,
           t.k_a, t.k_b, t.n_permutations, rt.original_arm, rt.perturbed_arm, rt.test_id,
           ei.estimate AS effect_estimate, ei.low AS effect_low, ei.high AS effect_high
    FROM run_tests rt
    LEFT JOIN tests t ON t.test_id = rt.test_id
    LEFT JOIN corrections c
      ON c.run_id = rt.run_id AND c.family = rt.family AND c.perturbation_id = rt.perturbation_id
    LEFT JOIN effect_intervals ei ON ei.test_id = rt.test_id
    WHERE rt.run_id = ? ORDER BY rt.family, rt.position
"""
"""``dbpa results``'s joins (the record's results view, less its version-dependent columns);
the same text on every engine."""
VECTORS_SQL = """
    SELECT s.arm_id, s.idx, e.vector FROM samples s
    JOIN embeddings e ON e.text_hash = s.text_hash AND e.embedder = ?
    WHERE s.arm_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) AND s.idx < ? ORDER BY s.arm_id, s.idx
"""
"""The test stage's read: every arm's first k vectors."""


@dataclass(frozen=True)
class Batch:
    """Rows of one table, written in one transaction with the other batches of its write."""

    table: str
    columns: dict[str, Any]
    """column -> list of values, or of numpy arrays for a list column."""


@dataclass(frozen=True)
class Audit:
    """The size of an audit: perturbations, outputs per arm, permutations."""

    m: int
    k: int
    b: int
    intervals: bool = True


def audit_writes(audit: Audit, seed: int, tables: Sequence[str] = ()) -> list[list[Batch]]:
    """The writes (each a list of batches, one transaction) of an audit, in flow order (only
    those of ``tables`` when given)."""
    rng = np.random.default_rng(seed)
    arms = [f"arm-{i:05d}" for i in range(audit.m + 1)]
    if tables and "samples" not in tables:
        return [w for w in _test_writes(audit, rng, arms) if w[0].table in tables]
    writes = [[Batch("arms", {
        "arm_id": arms, "model": ["openai/gpt-4o-mini"] * len(arms),
        "params": ['{"temperature": 1.0}'] * len(arms),
        "messages": [json.dumps([{"role": "user", "content": f"prompt {a}"}]) for a in arms],
        "epoch": ["2026-12-06"] * len(arms)})]]  # fmt: skip
    words = np.array(["the", "fever", "rest", "fluids", "doctor", "days", "if", "worse", "call"])
    hashes: list[str] = []
    for arm in arms:
        texts = [
            " ".join(words[rng.integers(0, len(words), 130)]) + f" ({arm} {i})"
            for i in range(audit.k)
        ]
        hashes += [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        writes.append([Batch("samples", {
            "arm_id": [arm] * audit.k, "idx": list(range(audit.k)), "text": texts,
            "text_hash": hashes[-audit.k:], "status": ["ok"] * audit.k,
            "prompt_tokens": [40] * audit.k, "completion_tokens": [180] * audit.k,
            "cost_usd": [1e-4] * audit.k, "latency_s": list(rng.random(audit.k)),
            "seed": list(range(audit.k))})])  # fmt: skip
    for start in range(0, len(hashes), EMBED_BATCH):
        chunk = hashes[start : start + EMBED_BATCH]
        vectors = rng.standard_normal((len(chunk), DIM)).astype(np.float32)
        writes.append([Batch("embeddings", {
            "text_hash": chunk, "embedder": [EMBEDDER] * len(chunk), "dim": [DIM] * len(chunk),
            "vector": list(vectors), "truncated": [False] * len(chunk)})])  # fmt: skip
    return writes + _test_writes(audit, rng, arms)


def _test_writes(audit: Audit, rng: np.random.Generator, arms: list[str]) -> list[list[Batch]]:
    """The tests with their intervals, 50 a write, then the family and its corrections."""
    writes = []
    tests = [f"test-{i:05d}" for i in range(audit.m)]
    p = rng.random(audit.m)
    for start in range(0, audit.m, TESTS_BATCH):
        ids = tests[start : start + TESTS_BATCH]
        n = len(ids)
        write = [Batch("tests", {
            "test_id": ids, "original_arm": [arms[0]] * n,
            "perturbed_arm": arms[start + 1 : start + 1 + n], "embedder": [EMBEDDER] * n,
            "omega": ["jsd"] * n, "n_permutations": [audit.b] * n, "seed": list(range(n)),
            "statistic": list(rng.random(n)), "p_value": list(p[start : start + n]),
            "null_mean": [0.1] * n, "null_std": [0.05] * n, "effect": list(rng.random(n)),
            "k_a": [audit.k] * n, "k_b": [audit.k] * n,
            "null_distribution": [rng.random(audit.b) for _ in ids]})]  # fmt: skip
        if audit.intervals:
            f4 = np.float32
            write.append(Batch("effect_intervals", {
                "test_id": ids, "estimate": [0.2] * n, "low": [0.1] * n, "high": [0.3] * n,
                "n_bootstrap": [audit.b] * n,
                "bootstrap": [rng.random(audit.b).astype(f4) for _ in ids],
                "noise": [rng.random(audit.b).astype(f4) for _ in ids],
                "directions": [rng.random(2 * audit.b).astype(f4) for _ in ids],
                "distances": [rng.random((2 * audit.k) ** 2) for _ in ids]}))  # fmt: skip
        writes.append(write)
    family = {
        "run_id": [RUN] * audit.m, "family": ["m"] * audit.m,
        "perturbation_id": [f"p-{i:05d}" for i in range(audit.m)],
    }  # fmt: skip
    writes.append(
        [
            Batch(
                "run_tests",
                {
                    **family,
                    "position": list(range(audit.m)),
                    "kind": ["template"] * audit.m,
                    "description": [f"value {i}" for i in range(audit.m)],
                    "original_arm": [arms[0]] * audit.m,
                    "perturbed_arm": arms[1:],
                    "test_id": tests,
                },
            )
        ]
    )
    writes.append([Batch("corrections", {
        **family, "method": ["holm"] * audit.m, "alpha": [0.05] * audit.m,
        "p_value": list(p), "adjusted_p": list(np.minimum(p * audit.m, 1.0)),
        "reject": list(p * audit.m <= 0.05), "tested": [True] * audit.m})])  # fmt: skip
    return writes


def expected_rows(audit: Audit) -> dict[str, int]:
    """Rows each table holds once the audit is written (whoever wrote it, however often)."""
    arms = audit.m + 1
    return {
        "arms": arms, "samples": arms * audit.k, "embeddings": arms * audit.k,
        "tests": audit.m, "effect_intervals": audit.m if audit.intervals else 0,
        "run_tests": audit.m, "corrections": audit.m,
    }  # fmt: skip


# ---------------------------------------------------------------------------- engines


class RetryableConflict(Exception):
    """A transaction the engine refused because of another one: retried."""


class DuckEngine:
    """DuckDB's SQL over: a local file (``via="file"``); DuckLake with its catalog in
    PostgreSQL at ``conninfo`` and its data as Parquet under ``path`` (``"lake"``: DuckLake
    has no keys, so an idempotent write inserts the rows whose key is not there yet, and two
    writers can both find it missing); a PostgreSQL database attached through DuckDB's
    postgres extension (``"postgres"``)."""

    def __init__(self, path: str, via: str = "file", conninfo: str = "") -> None:
        import duckdb

        self._duckdb = duckdb
        self.lake = via == "lake"
        if via == "file":
            self.con = duckdb.connect(path)
            return
        self.con = duckdb.connect(config={"autoinstall_known_extensions": "false"})
        for name in ("ducklake", "postgres_scanner"):  # from the packages, never downloaded
            (found,) = glob.glob(_site(f"duckdb_extension_{name}/extensions/*/{name}.*"))
            self.con.execute(f"LOAD '{found}'")
        if self.lake:
            self.con.execute(f"ATTACH 'ducklake:postgres:{conninfo}' AS lake (DATA_PATH '{path}/')")
            self.con.execute("USE lake")
        else:
            self.con.execute(f"ATTACH '{conninfo}' AS pg (TYPE postgres)")
            self.con.execute("USE pg")

    def create(self) -> None:
        kinds = {"text": "VARCHAR", "int": "INTEGER", "bigint": "BIGINT", "double": "DOUBLE",
                 "bool": "BOOLEAN", "f4list": "FLOAT[]", "f8list": "DOUBLE[]"}  # fmt: skip
        for table, (key, columns) in TABLES.items():
            body = ", ".join(f"{c} {kinds[k]} NOT NULL" for c, k in columns.items())
            keyed = "" if self.lake else f", PRIMARY KEY ({', '.join(key)})"
            self.con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body}{keyed})")

    def write(self, write: Sequence[Batch]) -> None:
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            for batch in write:
                key, _ = TABLES[batch.table]
                data = _arrow(batch)
                names = ", ".join(data.column_names)
                con.register("new_rows", data)
                if self.lake:
                    match = " AND ".join(f"t.{c} = n.{c}" for c in key)
                    con.execute(
                        f"INSERT INTO {batch.table} ({names}) SELECT {names} FROM new_rows n "
                        f"WHERE NOT EXISTS (SELECT 1 FROM {batch.table} t WHERE {match})"
                    )
                else:
                    con.execute(
                        f"INSERT INTO {batch.table} ({names}) SELECT {names} FROM new_rows "
                        "ON CONFLICT DO NOTHING"
                    )
                con.unregister("new_rows")
            con.execute("COMMIT")
        except self._duckdb.Error as exc:
            with suppress(self._duckdb.Error):
                con.execute("ROLLBACK")
            message = str(exc)
            if self.lake and ("conflict" in message.lower() or "Failed to commit" in message):
                raise RetryableConflict(str(exc)) from exc
            raise

    def results(self) -> int:
        return self.con.sql(RESULTS_SQL, params=[RUN]).to_arrow_table().num_rows

    def vectors(self, arms: list[str], k: int) -> np.ndarray:
        table = self.con.sql(VECTORS_SQL, params=[EMBEDDER, arms, k]).to_arrow_table()
        flat = table.column("vector").combine_chunks()
        return flat.flatten().to_numpy().reshape(len(flat), -1)

    def counts(self, table: str) -> tuple[int, int]:
        key = ", ".join(TABLES[table][0])
        (rows,) = self.con.execute(f"SELECT count(*) FROM {table}").fetchone() or (0,)
        (keys,) = self.con.execute(
            f"SELECT count(*) FROM (SELECT DISTINCT {key} FROM {table})"
        ).fetchone() or (0,)
        return int(rows), int(keys)

    def close(self) -> None:
        self.con.close()


class PostgresEngine:
    """PostgreSQL through psycopg 3: a write is one transaction of ``COPY`` (binary) into a
    temporary table and ``INSERT ... SELECT ... ORDER BY key ON CONFLICT DO NOTHING`` per
    batch (``method="copy"``), or of ``executemany`` of the INSERT (``"executemany"``, a
    pipeline). A list column is ``bytea`` (the array's little-endian bytes) or a real
    ``real[]``/``double precision[]`` (``arrays=True``; numpy in and out, no Python floats)."""

    def __init__(self, conninfo: str, *, method: str = "copy", arrays: bool = False) -> None:
        import psycopg

        self._psycopg = psycopg
        self.method, self.arrays = method, arrays
        self.con = psycopg.connect(conninfo, autocommit=True)
        if arrays:
            _numpy_arrays(self.con)
        self._staged: set[str] = set()

    def _kind(self, kind: str) -> str:
        """The column type of a kind (also the name COPY's ``set_types`` takes)."""
        lists = {"f4list": "float4[]", "f8list": "float8[]"} if self.arrays else {
            "f4list": "bytea", "f8list": "bytea"}  # fmt: skip
        return {"text": "text", "int": "int4", "bigint": "int8", "double": "float8",
                "bool": "bool", **lists}[kind]  # fmt: skip

    def create(self) -> None:
        with self.con.transaction():
            for table, (key, columns) in TABLES.items():
                body = ", ".join(f"{c} {self._kind(k)} NOT NULL" for c, k in columns.items())
                self.con.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} ({body}, PRIMARY KEY ({', '.join(key)}))"
                )

    def write(self, write: Sequence[Batch]) -> None:
        errors = self._psycopg.errors
        for batch in write:  # outside the transaction: a rolled-back one would drop it
            stage = f"new_{batch.table}"
            if self.method == "copy" and stage not in self._staged:
                self.con.execute(
                    f"CREATE TEMPORARY TABLE {stage} (LIKE {batch.table}) ON COMMIT DELETE ROWS"
                )
                self._staged.add(stage)
        try:
            with self.con.transaction():
                for batch in write:
                    self._insert(batch)
        except (errors.SerializationFailure, errors.DeadlockDetected) as exc:
            raise RetryableConflict(str(exc)) from exc

    def _insert(self, batch: Batch) -> None:
        key, kinds = TABLES[batch.table]
        names = list(batch.columns)
        rows = sorted(zip(*(self._values(batch, c) for c in names), strict=True),
                      key=lambda r: tuple(r[names.index(c)] for c in key))  # fmt: skip
        columns = ", ".join(names)
        if self.method == "executemany":
            marks = ", ".join(["%s"] * len(names))
            with self.con.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {batch.table} ({columns}) VALUES ({marks}) "
                    "ON CONFLICT DO NOTHING",
                    rows,
                )
            return
        stage = f"new_{batch.table}"
        with self.con.cursor() as cur:
            with cur.copy(f"COPY {stage} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types([self._kind(kinds[c]) for c in names])
                for row in rows:
                    copy.write_row(row)
            cur.execute(
                f"INSERT INTO {batch.table} ({columns}) SELECT {columns} FROM {stage} "
                f"ORDER BY {', '.join(key)} ON CONFLICT DO NOTHING"
            )

    def _values(self, batch: Batch, column: str) -> list[Any]:
        values = batch.columns[column]
        kind = TABLES[batch.table][1][column]
        if kind in ("f4list", "f8list") and not self.arrays:
            dtype = "<f4" if kind == "f4list" else "<f8"
            return [np.asarray(v, dtype).tobytes() for v in values]
        if kind in ("int", "bigint", "double"):
            return [v.item() if isinstance(v, np.generic) else v for v in values]
        if kind == "bool":
            return [bool(v) for v in values]
        return list(values)

    def results(self) -> int:
        with self.con.cursor() as cur:
            cur.execute(RESULTS_SQL.replace("?", "%s"), [RUN])
            rows = len(cur.fetchall())
        return rows

    def vectors(self, arms: list[str], k: int) -> np.ndarray:
        with self.con.cursor(binary=True) as cur:
            cur.execute(VECTORS_SQL.replace("?", "%s"), [EMBEDDER, arms, k])
            rows = cur.fetchall()
        if self.arrays:
            return np.stack([v for _, _, v in rows])
        return np.frombuffer(b"".join(v for _, _, v in rows), "<f4").reshape(len(rows), -1)

    def counts(self, table: str) -> tuple[int, int]:
        key = ", ".join(TABLES[table][0])
        found = self.con.execute(
            f"SELECT (SELECT count(*) FROM {table}), "
            f"(SELECT count(*) FROM (SELECT DISTINCT {key} FROM {table}) d)"
        ).fetchone()
        assert found is not None
        return int(found[0]), int(found[1])

    def close(self) -> None:
        self.con.close()


def _numpy_arrays(con: Any) -> None:
    """Binary dumpers and loaders of ``real[]`` and ``double precision[]`` from and to numpy
    arrays on ``con`` (psycopg's own build and read lists of Python floats)."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    def dumper(oid: int, element: int, dtype: str) -> type[Dumper]:
        class ArrayDumper(Dumper):
            format = Format.BINARY

            def dump(self, obj: Any) -> bytes:
                values = np.asarray(obj).ravel()
                cells = np.empty(len(values), [("size", ">i4"), ("value", dtype)])
                cells["size"], cells["value"] = np.dtype(dtype).itemsize, values
                return struct.pack("!iiiii", 1, 0, element, len(values), 1) + cells.tobytes()

        ArrayDumper.oid = oid
        return ArrayDumper

    def loader(dtype: str) -> type[Loader]:
        class ArrayLoader(Loader):
            format = Format.BINARY

            def load(self, data: Any) -> np.ndarray:
                ndim = struct.unpack_from("!i", data)[0]
                if ndim == 0:
                    return np.empty(0, np.dtype(dtype).newbyteorder("="))
                cells = np.frombuffer(data, [("size", ">i4"), ("value", dtype)], offset=20)
                return cells["value"].astype(dtype[1:])

        return ArrayLoader

    for oid, element, dtype in ((1021, 700, ">f4"), (1022, 701, ">f8")):
        con.adapters.register_dumper(np.ndarray, dumper(oid, element, dtype))
        con.adapters.register_loader(oid, loader(dtype))


def _arrow(batch: Batch) -> pa.Table:
    """The batch as Arrow (a list column from its arrays' concatenation and offsets)."""
    arrays = {}
    for column, values in batch.columns.items():
        kind = TABLES[batch.table][1][column]
        if kind in ("f4list", "f8list"):
            flat = np.concatenate(values).astype(np.float32 if kind == "f4list" else np.float64)
            offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int32)
            arrays[column] = pa.ListArray.from_arrays(offsets, pa.array(flat))
        else:
            arrays[column] = pa.array(values)
    return pa.table(arrays)


def _site(pattern: str) -> str:
    return os.path.join(os.path.dirname(os.path.dirname(np.__file__)), pattern)


def open_engine(engine: str, target: str, conninfo: str) -> DuckEngine | PostgresEngine:
    """``duckdb`` (a file at ``target``), ``ducklake`` (catalog at ``conninfo``, data under
    ``target``), ``duckdb-postgres`` (DuckDB's SQL on PostgreSQL at ``conninfo``),
    ``postgres-copy``, ``postgres-arrays``, ``postgres-executemany``."""
    if engine == "duckdb":
        return DuckEngine(target)
    if engine in ("ducklake", "duckdb-postgres"):
        return DuckEngine(target, "lake" if engine == "ducklake" else "postgres", conninfo)
    method, arrays = {"postgres-copy": ("copy", False), "postgres-arrays": ("copy", True),
                      "postgres-executemany": ("executemany", False)}[engine]  # fmt: skip
    return PostgresEngine(conninfo, method=method, arrays=arrays)


# ---------------------------------------------------------------------------- parts


def _write_all(engine: Any, writes: Sequence[Sequence[Batch]]) -> tuple[int, dict[str, float]]:
    """Write every write, retrying a refused transaction; returns the retries and the seconds
    spent on each table's writes (by the first table of a write)."""
    retries, seconds = 0, dict.fromkeys(TABLES, 0.0)
    for write in writes:
        start = time.perf_counter()
        while True:
            try:
                engine.write(write)
                break
            except RetryableConflict:
                retries += 1
                time.sleep(0.01 * min(retries, 20))
        seconds[write[0].table] += time.perf_counter() - start
    return retries, seconds


def run_part(args: argparse.Namespace) -> dict[str, Any]:
    """One part of the benchmark (see ``main``); returns what it measured."""
    audit = Audit(args.m, args.k, args.b, intervals=not args.no_intervals)
    engine = open_engine(args.engine, args.target, args.conninfo)
    try:
        if args.part == "create":
            engine.create()
            return {}
        if args.part == "write":
            writes = audit_writes(audit, args.seed, [t for t in args.tables.split(",") if t])
            if args.shuffle is not None:
                order = np.random.default_rng(args.shuffle).permutation(len(writes))
                writes = [writes[i] for i in order]
            if args.start_at:
                time.sleep(max(0.0, args.start_at - time.time()))
            start = time.perf_counter()
            retries, tables = _write_all(engine, writes)
            return {"seconds": time.perf_counter() - start, "retries": retries,
                    "transactions": len(writes), "tables": tables}  # fmt: skip
        if args.part == "read":
            timings, vector_timings = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                rows = engine.results()
                timings.append(time.perf_counter() - start)
            arms = [f"arm-{i:05d}" for i in range(audit.m + 1)]
            for _ in range(args.repeats if args.vectors else 0):
                start = time.perf_counter()
                shape = engine.vectors(arms, audit.k).shape
                vector_timings.append(time.perf_counter() - start)
            return {"results": timings, "rows": rows, "vectors": vector_timings,
                    "shape": list(shape) if args.vectors else None}  # fmt: skip
        if args.part == "count":
            return {t: engine.counts(t) for t in TABLES}
        raise ValueError(f"part: unknown {args.part!r}")
    finally:
        engine.close()


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._record_work")
    parser.add_argument("part", choices=["create", "write", "read", "count"])
    parser.add_argument("engine")
    parser.add_argument("--target", required=True, help="the DuckDB file or DuckLake data path")
    parser.add_argument("--conninfo", default="", help="PostgreSQL (or DuckLake's catalog)")
    parser.add_argument("--m", type=int, default=1000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--b", type=int, default=19_999)
    parser.add_argument("--no-intervals", action="store_true")
    parser.add_argument("--tables", default="", help="write only these (comma-separated)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shuffle", type=int, help="write in an order drawn from this seed")
    parser.add_argument("--start-at", type=float, default=0.0, help="epoch seconds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--vectors", action="store_true", help="read also every arm's vectors")
    return parser.parse_args(argv)


def main() -> None:
    try:
        found: dict[str, Any] = {"ok": True, **run_part(parse())}
    except Exception as exc:  # reported to the orchestrator, which prints it
        found = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
    sys.stdout.write(json.dumps(found) + "\n")


def iter_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON lines a worker printed."""
    for line in text.splitlines():
        if line.startswith("{"):
            yield json.loads(line)


if __name__ == "__main__":
    main()
