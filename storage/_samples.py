"""The sample record: arms, their outputs and the outputs' embeddings.

Writes are idempotent (primary keys + ``ON CONFLICT DO NOTHING``): an arm is keyed by its
content hash, an output by (arm, index), a vector by (text hash, embedder), so a retried
or resumed write never duplicates a row and the first write of an output wins.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from dbpa.arms import Arm
from dbpa.specs import EmbeddingBatch, Generation, text_hash

from ._core import StoreCore, retried

_SAMPLE_COLUMNS = (
    "arm_id",
    "idx",
    "text",
    "text_hash",
    "status",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
    "seed",
    "request_id",
)
"""The columns an output is written with, in the order of ``add_samples``'s rows."""
_VALUES_ROWS = 24
"""Outputs written as one VALUES list at most; more go over Arrow (measured: a VALUES list
of 6 rows 15 ms, 30 rows 26 ms, 200 rows 85 ms; Arrow 19-21 ms for any of them)."""


@dataclass
class _Waiting:
    """Outputs of one ``add_samples`` call, waiting for their transaction."""

    rows: list[tuple[object, ...]]
    done: bool = False
    error: Exception | None = None


class SampleRecord(StoreCore):
    """Arms, samples and embeddings."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._waiting: list[_Waiting] = []
        """Outputs of ``add_samples`` calls not yet written (see there)."""
        self._writing_samples = False
        self._samples_waiting = threading.Condition()
        super().__init__(*args, **kwargs)

    # ---------------------------------------------------------------------- arms and samples

    @retried
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
            self._insert(con, "arms", pa.Table.from_pylist(rows), "ON CONFLICT DO NOTHING")

    def add_samples(self, arm_id: str, outputs: Sequence[Generation]) -> None:
        """Store outputs of one arm as they arrive (idempotent on (arm, index)); returns once
        they are committed.

        Group commit: the outputs that other threads hand in while a write is under way wait
        for it to end, then the first of them to wake writes them all in one transaction (a
        commit costs milliseconds: one per request made sampling thousands of arms wait on
        the disk, and each waiting thread on the next). Nothing is held back on purpose: a
        batch is whatever arrived during the write before it.
        """
        rows = [
            (
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
            )
            for g in outputs
        ]
        if not rows:
            return
        mine = _Waiting(rows)
        with self._samples_waiting:
            self._waiting.append(mine)
            while self._writing_samples and not mine.done:
                self._samples_waiting.wait()
            batch = None if mine.done else self._waiting
            if batch is not None:  # this thread writes what waits, its own outputs included
                self._waiting, self._writing_samples = [], True
        if batch is not None:
            try:
                with self._lock:
                    self._write_samples(batch)
            finally:
                with self._samples_waiting:
                    self._waiting[:0] = [w for w in batch if not w.done]  # if interrupted
                    self._writing_samples = False
                    self._samples_waiting.notify_all()
        if mine.error is not None:
            raise mine.error

    def _write_samples(self, batch: list[_Waiting]) -> None:
        """Write the rows of ``batch`` in one transaction; if that fails, each call's rows in
        a statement of their own, so that every caller sees the error of its own outputs as
        DuckDB words it."""
        rows = [row for waiting in batch for row in waiting.rows]
        try:
            self._insert_samples(rows, arrow=len(rows) > _VALUES_ROWS)
        except Exception:
            for waiting in batch:
                try:
                    self._insert_samples(waiting.rows, arrow=False)
                except Exception as own:
                    waiting.error = own
        for waiting in batch:
            waiting.done = True

    @retried
    def _insert_samples(self, rows: list[tuple[object, ...]], *, arrow: bool) -> None:
        """One INSERT of ``rows`` (the first of two with one key wins): over an Arrow table,
        or as a VALUES list (faster up to a few dozen rows). In one order of their keys for
        every writer, so that writers of one PostgreSQL record wait rather than deadlock."""
        first = {(row[0], row[1]): row for row in reversed(rows)}
        unique = [first[key] for key in sorted(first, key=lambda k: (k[0], repr(k[1])))]
        columns = ", ".join(_SAMPLE_COLUMNS)
        with self._transaction() as con:
            if arrow:
                table = pa.table(dict(zip(_SAMPLE_COLUMNS, zip(*unique, strict=True), strict=True)))
                self._insert(con, "samples", table, "ON CONFLICT DO NOTHING")
            else:
                one = f"({', '.join('?' * len(_SAMPLE_COLUMNS))})"
                con.execute(
                    f"INSERT INTO samples ({columns}) VALUES {', '.join([one] * len(unique))} "
                    "ON CONFLICT DO NOTHING",
                    [value for row in unique for value in row],
                )

    def sample_indices(self, arm_ids: Sequence[str]) -> dict[str, set[int]]:
        """Stored output indices per arm."""
        found: dict[str, set[int]] = {a: set() for a in arm_ids}
        if arm_ids:
            for arm_id, idx in self._rows(
                "SELECT arm_id, idx FROM samples WHERE arm_id = ANY(?)", [list(arm_ids)]
            ):
                found[arm_id].add(int(idx))
        return found

    def arm_texts(self, arm_ids: Sequence[str], k: int) -> pd.DataFrame:
        """The first k outputs of each arm: arm_id, idx, text, text_hash."""
        return self._df(
            "SELECT arm_id, idx, text, text_hash FROM samples "
            "WHERE arm_id = ANY(?) AND idx < ? ORDER BY arm_id, idx",
            [list(arm_ids), k],
        )

    def samples(
        self, arm_ids: Sequence[str] | None = None, *, first: int | None = None
    ) -> pd.DataFrame:
        """Stored outputs (of the given arms, or all; with ``first``, those of index below it)."""
        below = "" if first is None else " AND idx < ?"
        last = [] if first is None else [first]
        if arm_ids is None:
            return self._df(f"SELECT * FROM samples WHERE true{below} ORDER BY arm_id, idx", last)
        return self._df(
            f"SELECT * FROM samples WHERE arm_id IN (SELECT unnest(CAST(? AS VARCHAR[]))){below} "
            "ORDER BY arm_id, idx",
            [list(arm_ids), *last],
        )

    def arms(self, arm_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """Stored arms (the given ones, or all)."""
        if arm_ids is None:
            return self._df("SELECT * FROM arms ORDER BY created_at, arm_id")
        return self._df(
            "SELECT * FROM arms WHERE arm_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
            "ORDER BY arm_id",
            [list(arm_ids)],
        )

    # ---------------------------------------------------------------------- embeddings

    def missing_embeddings(self, embedder: str, hashes: Iterable[str]) -> set[str]:
        """Text hashes that have no vector from ``embedder`` yet."""
        wanted = set(hashes)
        if not wanted:
            return set()
        have = self._rows(
            "SELECT text_hash FROM embeddings WHERE embedder = ? AND text_hash = ANY(?)",
            [embedder, sorted(wanted)],
        )
        return wanted - {h for (h,) in have}

    @retried
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
            self._insert(con, "embeddings", table, "ON CONFLICT DO NOTHING")

    def arms_vectors(
        self, arm_ids: Sequence[str], embedder: str, k: int
    ) -> dict[str, NDArray[np.float32]]:
        """(k, d) vectors per arm, in output order, for every arm whose first k are embedded."""
        table = self._arrow(
            "SELECT s.arm_id, s.idx, e.vector FROM samples s JOIN embeddings e "
            "ON e.text_hash = s.text_hash AND e.embedder = $embedder "
            "WHERE s.arm_id = ANY($arms) AND s.idx < $k ORDER BY s.arm_id, s.idx",
            {"embedder": embedder, "arms": list(arm_ids), "k": k},
        )
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
            "WHERE s.arm_id = ANY(?) AND s.idx < ? GROUP BY s.arm_id",
            [embedder, list(arm_ids), k],
        )
        return {a: int(n) for a, n in rows}
