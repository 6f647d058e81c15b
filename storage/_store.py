"""The audit record in one DuckDB file: the only code that speaks SQL.

DuckDB allows one writing process per file. A ``Store`` owns the connection of its
process; threads share it under a lock, every write is one transaction and is
idempotent (primary keys + ``ON CONFLICT DO NOTHING``), so a retried or resumed
write never duplicates a row.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pa_parquet
from numpy.typing import NDArray

from dbpa.analysis import Decision, PerturbationTestRecord
from dbpa.arms import Arm
from dbpa.specs import EmbeddingBatch, Generation, text_hash

from ._schema import MIGRATIONS


class DatabaseInUseError(RuntimeError):
    """Another process holds the database (DuckDB allows one writer per file)."""


class UnknownRunError(LookupError):
    """No run with that id in the database."""


_RESULTS_SQL = """
    SELECT rt.run_id, rt.family, rt.position, rt.perturbation_id, rt.kind, rt.label,
           rt.description, t.omega, t.similarity, t.statistic, t.effect, t.z,
           t.null_mean, t.null_std, t.p_value, c.adjusted_p, c.reject, c.method, c.alpha,
           COALESCE(c.tested, t.test_id IS NOT NULL) AS tested,
           t.k_a, t.k_b, t.n_permutations, t.evaluated, t.exact,
           rt.original_arm, rt.perturbed_arm, rt.test_id
    FROM run_tests rt
    LEFT JOIN tests t ON t.test_id = rt.test_id
    LEFT JOIN corrections c
      ON c.run_id = rt.run_id AND c.family = rt.family AND c.perturbation_id = rt.perturbation_id
"""

EXPORTS: dict[str, str] = {
    "runs": "SELECT * FROM runs ORDER BY started_at",
    "arms": "SELECT * FROM arms ORDER BY created_at, arm_id",
    "samples": "SELECT * FROM samples ORDER BY arm_id, idx",
    "embeddings": "SELECT * FROM embeddings ORDER BY embedder, text_hash",
    "tests": "SELECT * FROM tests ORDER BY created_at, test_id",
    "run_tests": "SELECT * FROM run_tests ORDER BY run_id, family, position",
    "corrections": "SELECT * FROM corrections ORDER BY run_id, family, perturbation_id",
    "arm_failures": "SELECT * FROM arm_failures ORDER BY run_id, arm_id",
    "results": _RESULTS_SQL + " ORDER BY rt.run_id, rt.family, rt.position",
}
"""Exportable tables (and the ``results`` view), each a fixed query."""


class Store:
    """An open audit database; use as a context manager or call ``close()``."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser().resolve()
        if read_only and not self.path.exists():
            raise FileNotFoundError(f"database {self.path} does not exist (run an audit first)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise DatabaseInUseError(
                    f"database {self.path} is in use by another run; wait for it to finish "
                    "or use another --db (DuckDB allows one writing process per file)"
                ) from None
            raise
        self._lock = threading.RLock()
        self.read_only = read_only
        if not read_only:
            self._migrate()
        self.database_id = self._meta("database_id")

    # ------------------------------------------------------------------ plumbing

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    def _df(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        with self._lock:
            relation = self._con.sql(sql, params=list(params) or None)
            return relation.to_arrow_table().to_pandas()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._con.execute(sql, list(params)).fetchall()

    def _migrate(self) -> None:
        with self._transaction() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp)"
            )
            done = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
            for version, description, statements in MIGRATIONS:
                if version in done:
                    continue
                for statement in statements:
                    con.execute(statement)
                con.execute(
                    "INSERT INTO schema_migrations (version, description) VALUES (?, ?)",
                    [version, description],
                )
            con.execute(
                "INSERT INTO meta VALUES ('database_id', ?) ON CONFLICT DO NOTHING",
                [uuid.uuid4().hex],
            )

    def _meta(self, key: str) -> str:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", [key])
        if not rows:
            raise RuntimeError(f"database {self.path} has no {key}; is it a dbpa database?")
        return str(rows[0][0])

    @property
    def schema_version(self) -> int:
        """Highest applied migration."""
        return int(self._rows("SELECT max(version) FROM schema_migrations")[0][0])

    # ------------------------------------------------------------------ arms and samples

    def add_arms(self, arms: Iterable[Arm]) -> None:
        """Record arms (idempotent)."""
        rows = [
            {
                "arm_id": arm.arm_id,
                "model": arm.model.model,
                "api_base": arm.model.api_base,
                "params": json.dumps(arm.model.params, sort_keys=True),
                "messages": json.dumps([m.model_dump() for m in arm.messages]),
                "epoch": arm.epoch,
            }
            for arm in arms
        ]
        with self._transaction() as con:
            _insert(con, "arms", pa.Table.from_pylist(rows), "ON CONFLICT DO NOTHING")

    def add_samples(self, arm_id: str, outputs: Sequence[Generation]) -> None:
        """Store outputs of one arm as they arrive (idempotent on (arm, index))."""
        rows = [
            [
                arm_id,
                g.index,
                g.text,
                text_hash(g.text),
                g.status,
                g.finish_reason,
                g.prompt_tokens,
                g.completion_tokens,
                g.cost_usd,
                g.latency_s,
                g.seed,
                g.request_id,
            ]
            for g in outputs
        ]
        if not rows:
            return
        with self._transaction() as con:
            con.executemany(
                "INSERT INTO samples (arm_id, idx, text, text_hash, status, finish_reason, "
                "prompt_tokens, completion_tokens, cost_usd, latency_s, seed, request_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
            )

    def sample_indices(self, arm_ids: Sequence[str]) -> dict[str, set[int]]:
        """Stored output indices per arm."""
        found: dict[str, set[int]] = {a: set() for a in arm_ids}
        if arm_ids:
            for arm_id, idx in self._rows(
                "SELECT arm_id, idx FROM samples WHERE list_contains(?, arm_id)", [list(arm_ids)]
            ):
                found[arm_id].add(int(idx))
        return found

    def arm_texts(self, arm_ids: Sequence[str], k: int) -> pd.DataFrame:
        """The first k outputs of each arm: arm_id, idx, text, text_hash."""
        return self._df(
            "SELECT arm_id, idx, text, text_hash FROM samples "
            "WHERE list_contains(?, arm_id) AND idx < ? ORDER BY arm_id, idx",
            [list(arm_ids), k],
        )

    def samples(self, arm_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """Stored outputs (of the given arms, or all)."""
        if arm_ids is None:
            return self._df("SELECT * FROM samples ORDER BY arm_id, idx")
        return self._df(
            "SELECT * FROM samples WHERE list_contains(?, arm_id) ORDER BY arm_id, idx",
            [list(arm_ids)],
        )

    def arms(self, arm_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """Stored arms (the given ones, or all)."""
        if arm_ids is None:
            return self._df("SELECT * FROM arms ORDER BY created_at, arm_id")
        return self._df(
            "SELECT * FROM arms WHERE list_contains(?, arm_id) ORDER BY arm_id", [list(arm_ids)]
        )

    # ------------------------------------------------------------------ embeddings

    def missing_embeddings(self, embedder: str, hashes: Iterable[str]) -> set[str]:
        """Text hashes that have no vector from ``embedder`` yet."""
        wanted = set(hashes)
        if not wanted:
            return set()
        have = self._rows(
            "SELECT text_hash FROM embeddings WHERE embedder = ? AND list_contains(?, text_hash)",
            [embedder, sorted(wanted)],
        )
        return wanted - {h for (h,) in have}

    def add_embeddings(self, embedder: str, hashes: Sequence[str], batch: EmbeddingBatch) -> None:
        """Store vectors keyed by (text hash, embedder) (idempotent)."""
        if len(hashes) != len(batch.vectors):
            raise ValueError("hashes: one text hash per vector is needed")
        if not hashes:
            return
        vectors = np.asarray(batch.vectors, dtype=np.float32)
        table = pa.table(
            {
                "text_hash": pa.array(list(hashes), pa.string()),
                "embedder": pa.array([embedder] * len(hashes), pa.string()),
                "dim": pa.array([vectors.shape[1]] * len(hashes), pa.int32()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.ravel(), pa.float32()), vectors.shape[1]
                ).cast(pa.list_(pa.float32())),
                "truncated": pa.array(np.asarray(batch.truncated, dtype=bool)),
            }
        )
        with self._transaction() as con:
            _insert(con, "embeddings", table, "ON CONFLICT DO NOTHING")

    def arm_vectors(self, arm_id: str, embedder: str, k: int) -> NDArray[np.float32]:
        """(k, d) vectors of the arm's first k outputs, in output order."""
        found = self.arms_vectors([arm_id], embedder, k)
        if arm_id not in found:
            have = len(self.arm_texts([arm_id], k))
            raise LookupError(f"arm {arm_id} has {have} embedded outputs of the {k} needed")
        return found[arm_id]

    def arms_vectors(
        self, arm_ids: Sequence[str], embedder: str, k: int
    ) -> dict[str, NDArray[np.float32]]:
        """(k, d) vectors per arm, in output order, for every arm whose first k are embedded."""
        with self._lock:
            table = self._con.sql(
                "SELECT s.arm_id, s.idx, e.vector FROM samples s JOIN embeddings e "
                "ON e.text_hash = s.text_hash AND e.embedder = $embedder "
                "WHERE list_contains($arms, s.arm_id) AND s.idx < $k ORDER BY s.arm_id, s.idx",
                params={"embedder": embedder, "arms": list(arm_ids), "k": k},
            ).to_arrow_table()
        if table.num_rows == 0:
            return {}
        arms = table.column("arm_id").to_numpy(zero_copy_only=False)
        flat = table.column("vector").combine_chunks()
        vectors = flat.flatten().to_numpy().reshape(len(flat), -1).astype(np.float32, copy=False)
        starts = np.flatnonzero(np.r_[True, arms[1:] != arms[:-1]])
        ends = np.r_[starts[1:], len(arms)]
        return {str(arms[i]): vectors[i:j] for i, j in zip(starts, ends, strict=True) if j - i == k}

    def truncated_counts(self, arm_ids: Sequence[str], embedder: str, k: int) -> dict[str, int]:
        """How many of each arm's first k outputs were truncated by the embedder."""
        rows = self._rows(
            "SELECT s.arm_id, count(*) FILTER (WHERE e.truncated) FROM samples s "
            "JOIN embeddings e ON e.text_hash = s.text_hash AND e.embedder = ? "
            "WHERE list_contains(?, s.arm_id) AND s.idx < ? GROUP BY s.arm_id",
            [embedder, list(arm_ids), k],
        )
        return {a: int(n) for a, n in rows}

    # ------------------------------------------------------------------ tests

    def existing_tests(self, test_ids: Iterable[str]) -> set[str]:
        """Which of these tests are stored."""
        ids = sorted(set(test_ids))
        if not ids:
            return set()
        rows = self._rows("SELECT test_id FROM tests WHERE list_contains(?, test_id)", [ids])
        return {t for (t,) in rows}

    def add_tests(self, records: Sequence[PerturbationTestRecord]) -> None:
        """Store test results (idempotent)."""
        if not records:
            return
        nulls = [np.asarray(r.null_distribution, dtype=np.float64) for r in records]
        table = pa.table(
            {
                "test_id": [r.test_id for r in records],
                "original_arm": [r.original_arm for r in records],
                "perturbed_arm": [r.perturbed_arm for r in records],
                "embedder": [r.embedder for r in records],
                "similarity": [r.similarity for r in records],
                "omega": [r.omega for r in records],
                "omega_options": [
                    json.dumps(dict(r.omega_options), sort_keys=True) for r in records
                ],
                "n_permutations": [r.n_permutations for r in records],
                "seed": pa.array([r.seed for r in records], pa.int64()),
                "statistic": [r.statistic for r in records],
                "p_value": [r.p_value for r in records],
                "null_mean": [r.null_mean for r in records],
                "null_std": [r.null_std for r in records],
                "effect": [r.effect for r in records],
                "z": pa.array([None if np.isnan(r.z) else r.z for r in records], pa.float64()),
                "evaluated": [r.evaluated for r in records],
                "exact": [r.exact for r in records],
                "k_a": [r.k_a for r in records],
                "k_b": [r.k_b for r in records],
                "null_distribution": pa.ListArray.from_arrays(
                    np.cumsum([0] + [len(n) for n in nulls]), pa.array(np.concatenate(nulls))
                ),
            }
        )
        with self._transaction() as con:
            _insert(con, "tests", table, "ON CONFLICT DO NOTHING")

    def tests(self, test_ids: Sequence[str]) -> pd.DataFrame:
        """Stored test rows, with their null distributions."""
        return self._df(
            "SELECT * FROM tests WHERE list_contains(?, test_id) ORDER BY test_id", [list(test_ids)]
        )

    # ------------------------------------------------------------------ runs

    def start_run(
        self,
        run_id: str,
        *,
        audit: str,
        config: Mapping[str, Any],
        config_hash: str,
        epoch: str,
        flow_run_id: str | None,
        versions: Mapping[str, str],
    ) -> None:
        """Record a run as running (a retried flow run keeps its row)."""
        with self._transaction() as con:
            con.execute(
                "INSERT INTO runs (run_id, audit, status, config, config_hash, epoch, "
                "flow_run_id, versions) VALUES (?, ?, 'running', ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET status = 'running', finished_at = NULL, "
                "message = NULL",
                [
                    run_id,
                    audit,
                    json.dumps(config, sort_keys=True),
                    config_hash,
                    epoch,
                    flow_run_id,
                    json.dumps(dict(versions), sort_keys=True),
                ],
            )

    def mark_interrupted_runs(self) -> int:
        """Runs left 'running' by a process that died become 'crashed'; returns how many."""
        with self._transaction() as con:
            (count,) = con.execute(
                "SELECT count(*) FROM runs WHERE status = 'running'"
            ).fetchone() or (0,)
            con.execute(
                "UPDATE runs SET status = 'crashed', message = "
                "'the process running it stopped before it finished (killed or crashed)' "
                "WHERE status = 'running'"
            )
        return int(count)

    def finish_run(
        self, run_id: str, status: str, message: str | None = None, report_path: str | None = None
    ) -> None:
        """Record how a run ended."""
        with self._transaction() as con:
            con.execute(
                "UPDATE runs SET status = ?, message = ?, report_path = COALESCE(?, report_path), "
                "finished_at = current_timestamp WHERE run_id = ?",
                [status, message, report_path, run_id],
            )

    def set_report_path(self, run_id: str, report_path: str) -> None:
        """Remember where the run's report was written."""
        with self._transaction() as con:
            con.execute("UPDATE runs SET report_path = ? WHERE run_id = ?", [report_path, run_id])

    def add_family(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """The perturbations tested by a run (keys: family, perturbation_id, position, kind,
        label, description, original_arm, perturbed_arm, test_id)."""
        keys = (
            "family",
            "perturbation_id",
            "position",
            "kind",
            "label",
            "description",
            "original_arm",
            "perturbed_arm",
            "test_id",
        )
        values = [{"run_id": run_id, **{key: row[key] for key in keys}} for row in rows]
        with self._transaction() as con:
            _insert(con, "run_tests", pa.Table.from_pylist(values), "ON CONFLICT DO NOTHING")

    def add_arm_failure(self, run_id: str, arm_id: str, model: str, reason: str) -> None:
        """Record that an arm could not be sampled in this run."""
        with self._transaction() as con:
            con.execute(
                "INSERT INTO arm_failures (run_id, arm_id, model, reason) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [run_id, arm_id, model, reason],
            )

    def arm_failures(self, run_id: str) -> pd.DataFrame:
        """Arms that failed in a run, with the reason."""
        return self._df("SELECT * FROM arm_failures WHERE run_id = ? ORDER BY arm_id", [run_id])

    def add_corrections(
        self, run_id: str, family: str, method: str, alpha: float, decisions: Sequence[Decision]
    ) -> None:
        """Store (or replace) the corrected decisions of one family of a run."""
        with self._transaction() as con:
            con.execute("DELETE FROM corrections WHERE run_id = ? AND family = ?", [run_id, family])
            rows = [
                {
                    "run_id": run_id,
                    "family": family,
                    "perturbation_id": d.perturbation_id,
                    "method": method,
                    "alpha": alpha,
                    "p_value": d.p_value,
                    "adjusted_p": d.adjusted_p,
                    "reject": d.reject,
                    "tested": d.tested,
                }
                for d in decisions
            ]
            _insert(con, "corrections", pa.Table.from_pylist(rows))

    def runs(self) -> pd.DataFrame:
        """Every run, newest first."""
        return self._df(
            "SELECT run_id, audit, status, epoch, started_at, finished_at, message, report_path "
            "FROM runs ORDER BY started_at DESC"
        )

    def run(self, run_id: str) -> dict[str, Any]:
        """One run's row; ``UnknownRunError`` naming the id when absent. ``latest`` is accepted."""
        if run_id == "latest":
            df = self._df("SELECT * FROM runs ORDER BY started_at DESC LIMIT 1")
        else:
            df = self._df("SELECT * FROM runs WHERE run_id = ?", [run_id])
        if df.empty:
            raise UnknownRunError(f"run {run_id!r} is not in {self.path}; `dbpa runs` lists them")
        return dict(df.iloc[0])

    def results(self, run_id: str) -> pd.DataFrame:
        """Per-perturbation results of a run, in family order."""
        return self._df(
            _RESULTS_SQL + " WHERE rt.run_id = ? ORDER BY rt.family, rt.position", [run_id]
        )

    def usage(self, arm_ids: Sequence[str]) -> pd.DataFrame:
        """Outputs, tokens and cost per arm."""
        return self._df(
            "SELECT arm_id, count(*) AS outputs, "
            "count(*) FILTER (WHERE status = 'empty') AS empty, "
            "count(*) FILTER (WHERE status = 'filtered') AS filtered, "
            "sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens, "
            "sum(cost_usd) AS cost_usd, avg(latency_s) AS mean_latency_s "
            "FROM samples WHERE list_contains(?, arm_id) GROUP BY arm_id ORDER BY arm_id",
            [list(arm_ids)],
        )

    # ------------------------------------------------------------------ export

    def export(self, table: str, path: str | Path, fmt: str = "parquet") -> Path:
        """Write a table (or ``results``) to Parquet or CSV; returns the file written."""
        if table not in EXPORTS:
            raise ValueError(f"table: unknown {table!r}; choose one of {', '.join(EXPORTS)}")
        if fmt not in ("parquet", "csv"):
            raise ValueError(f"format: unknown {fmt!r}; choose parquet or csv")
        with self._lock:
            data = self._con.sql(EXPORTS[table]).to_arrow_table()
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            pa_parquet.write_table(data, out)
        else:
            pa_csv.write_csv(_flatten_lists(data), out)
        return out

    # ---- drift

    def audit_epochs(self, audit: str) -> pd.DataFrame:
        """The epochs of ``audit`` that have a completed run, oldest first (by the start of
        their first run): epoch, started_at, and the run_id and config of the latest one."""
        return self._df(
            "SELECT epoch, min(started_at) AS started_at, arg_max(run_id, started_at) AS run_id, "
            "arg_max(config, started_at) AS config FROM runs "
            "WHERE audit = ? AND status = 'completed' GROUP BY epoch ORDER BY 2, 1",
            [audit],
        )

    def add_drift(
        self, audit: str, epoch: str, against: str, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        """Store (or replace) one family of drift tests: the arms of ``audit`` at ``epoch``
        against an earlier epoch (``against``: previous or baseline). Keys of ``rows``:
        reference_epoch, arm_id, reference_arm, family, role, test_id, method, alpha,
        adjusted_p, reject; the tests themselves are stored with ``add_tests``."""
        keys = (
            "reference_epoch",
            "arm_id",
            "reference_arm",
            "family",
            "role",
            "test_id",
            "method",
            "alpha",
            "adjusted_p",
            "reject",
        )
        with self._transaction() as con:
            con.execute(
                "DELETE FROM drift_tests WHERE audit = ? AND epoch = ? AND against = ?",
                [audit, epoch, against],
            )
            values = [
                {"audit": audit, "epoch": epoch, "against": against, **{k: row[k] for k in keys}}
                for row in rows
            ]
            _insert(con, "drift_tests", pa.Table.from_pylist(values))

    def drift(self, audit: str) -> pd.DataFrame:
        """The stored drift tests of ``audit`` with their statistics, in epoch order (empty
        for a database opened read-only before the drift migration)."""
        columns = (
            "d.epoch, d.against, d.reference_epoch, d.family, d.role, d.arm_id, d.reference_arm, "
            "d.test_id, d.method, d.alpha, d.adjusted_p, d.reject, t.statistic, t.effect, "
            "t.p_value, t.null_mean, t.evaluated, t.exact, t.k_a, t.k_b"
        )
        if self.schema_version < 2:
            return pd.DataFrame(columns=[c.strip()[2:] for c in columns.split(",")])
        return self._df(
            "WITH epochs AS (SELECT epoch, min(started_at) AS started_at FROM runs "
            "WHERE audit = ? AND status = 'completed' GROUP BY epoch) "
            f"SELECT {columns} FROM drift_tests d JOIN tests t ON t.test_id = d.test_id "
            "LEFT JOIN epochs e ON e.epoch = d.epoch WHERE d.audit = ? "
            "ORDER BY e.started_at, d.epoch, d.against, d.family, d.role",
            [audit, audit],
        )


def _flatten_lists(table: pa.Table) -> pa.Table:
    """CSV has no lists: write list columns (vectors, null distributions) as JSON text."""
    columns = []
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            col = pa.array(
                [None if v is None else json.dumps(v) for v in col.to_pylist()], pa.string()
            )
        columns.append(col)
    return pa.table(columns, names=table.column_names)


def _insert(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table, tail: str = "") -> None:
    """INSERT the rows of ``data`` (its column names: the table's) into ``table`` in one
    statement (DuckDB's ``executemany`` runs one statement per row: ~2 ms each).

    ``table``, the column names and ``tail`` (e.g. ``ON CONFLICT DO NOTHING``) come from this
    module, never from data; the values travel as Arrow.
    """
    if data.num_rows == 0:
        return
    columns = ", ".join(data.column_names)
    con.register("new_rows", data)
    try:
        con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM new_rows {tail}")
    finally:
        con.unregister("new_rows")
