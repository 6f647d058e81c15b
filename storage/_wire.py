"""What a writing process answers to readers of its record, and how it travels.

A fixed list of read methods, each with typed arguments; no SQL and no pickle cross the
wire. Requests are JSON; tables come back as Arrow IPC streams (DataFrames keep their
pandas types through Arrow's pandas metadata), the record's id and schema version as JSON,
errors as JSON naming one of a few error classes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from ._errors import DamagedRecordError, UnknownRunError

ARROW = "application/vnd.apache.arrow.stream"
JSON = "application/json"
MAX_REQUEST_BYTES = 64 * 2**20
"""Arguments beyond this are refused (a report of 10,000 perturbations sends ~1 MB of ids)."""


@dataclass(frozen=True)
class Read:
    """A read method readers may call: its parameters (name, kind) and what it returns."""

    params: tuple[tuple[str, str], ...]
    """Kinds: ``str``, ``int``, ``strs`` (a list of str), ``strs?`` (or null)."""
    result: str
    """``frame`` (a DataFrame), ``table`` (Arrow), ``vectors`` (arm id -> (k, d)) or ``json``."""

    def check(self, args: Any) -> dict[str, Any]:
        """The arguments of a request, checked against the parameters; ``ValueError`` naming
        the bad one."""
        if not isinstance(args, dict):
            raise ValueError("arguments: expected a JSON object")
        names = {name for name, _ in self.params}
        if extra := set(args) - names:
            raise ValueError(f"arguments: unknown {', '.join(sorted(extra))}")
        checked = {}
        for name, kind in self.params:
            value = args.get(name)
            if not _fits(value, kind):
                raise ValueError(f"{name}: expected {kind}, got {type(value).__name__}")
            checked[name] = value
        return checked


def _fits(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int?":
        return value is None or (isinstance(value, int) and not isinstance(value, bool))
    if kind == "strs?" and value is None:
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_ONE_RUN = (("run_id", "str"),)
_ARMS = (("arm_ids", "strs"),)
_AUDIT = (("audit", "str"),)
READS: dict[str, Read] = {
    "info": Read((), "json"),
    "runs": Read((), "frame"),
    "run": Read(_ONE_RUN, "frame"),
    "results": Read(_ONE_RUN, "frame"),
    "prompt_results": Read(_ONE_RUN, "frame"),
    "arm_failures": Read(_ONE_RUN, "frame"),
    "tests": Read((("test_ids", "strs"), ("nulls", "bool")), "frame"),
    "interval_replicates": Read((("test_ids", "strs"),), "frame"),
    "arms": Read((("arm_ids", "strs?"),), "frame"),
    "samples": Read((("arm_ids", "strs?"), ("first", "int?")), "frame"),
    "usage": Read(_ARMS, "frame"),
    "arms_vectors": Read((*_ARMS, ("embedder", "str"), ("k", "int")), "vectors"),
    "audit_epochs": Read(_AUDIT, "frame"),
    "drift": Read(_AUDIT, "frame"),
    "monitor_ticks": Read(_AUDIT, "frame"),
    "monitor_resets": Read(_AUDIT, "frame"),
    "table": Read((("name", "str"),), "table"),
}
"""Every method a writer answers, by name (``run`` returns the run's one-row frame)."""

ERRORS: dict[str, type[Exception]] = {
    "UnknownRunError": UnknownRunError,
    "DamagedRecordError": DamagedRecordError,
    "ValueError": ValueError,
}
"""Errors a reader re-raises as they were raised in the writer; others become RuntimeError."""


def error_name(error: Exception) -> str | None:
    """The name ``error`` travels under, if readers re-raise it."""
    for name, cls in ERRORS.items():
        if isinstance(error, cls):
            return name
    return None


# ---------------------------------------------------------------------- encoding


def encode(result: str, value: Any) -> tuple[bytes, str]:
    """A method's return value as (body, content type)."""
    if result == "json":
        return json.dumps(value).encode(), JSON
    if result == "frame":
        table = pa.Table.from_pandas(value, preserve_index=False)
    elif result == "vectors":
        table = _vectors_table(value)
    else:
        table = value
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes(), ARROW


def decode(result: str, body: bytes) -> Any:
    """The return value of a method from its body."""
    if result == "json":
        return json.loads(body)
    table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    if result == "frame":
        return table.to_pandas()
    if result == "vectors":
        return _vectors_from(table)
    return table


def _vectors_table(vectors: dict[str, NDArray[np.float32]]) -> pa.Table:
    arrays = [np.ascontiguousarray(v, dtype=np.float32) for v in vectors.values()]
    return pa.table(
        {
            "arm_id": pa.array(list(vectors), pa.string()),
            "rows": pa.array([a.shape[0] for a in arrays], pa.int64()),
            "dim": pa.array([a.shape[1] if a.ndim == 2 else 0 for a in arrays], pa.int64()),
            "data": pa.array([a.tobytes() for a in arrays], pa.large_binary()),
        }
    )


def _vectors_from(table: pa.Table) -> dict[str, NDArray[np.float32]]:
    found = {}
    for arm_id, rows, dim, data in zip(
        *(table.column(c).to_pylist() for c in ("arm_id", "rows", "dim", "data")), strict=True
    ):
        found[arm_id] = np.frombuffer(bytearray(data), dtype=np.float32).reshape(rows, dim)
    return found


def frame_row(frame: pd.DataFrame) -> dict[str, Any]:
    """A one-row frame as the row dict ``Store.run`` returns."""
    return dict(frame.iloc[0])
