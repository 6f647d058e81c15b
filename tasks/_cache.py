"""Cache keys from the content a task computes from, never from names alone or pickles.

A key holds the task's name and a description of everything its result depends on: the
texts (by hash) for an embedding, the two arms' vectors (by digest) and the analysis
settings for a test, the p-values for a correction. Ids such as a test id name *what* is
computed, not *from what*: two records of one config hold the same ids over different
outputs (a provider that ignores seeds, a deleted record sampled again), so a key of ids
alone would replay one record's results into another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from prefect.context import TaskRunContext

from dbpa.specs import content_hash

KeyFn = Callable[[TaskRunContext, dict[str, Any]], str]

RESULT_FORMAT = 3
"""Part of every key: bump it when a cached result's class changes shape (a test record
pickled before ``driver`` and ``components`` existed would otherwise be replayed)."""


def content_key(describe: Callable[[dict[str, Any]], Any]) -> KeyFn:
    """A ``cache_key_fn``: the task's name plus a JSON-able description of its inputs."""

    def key(context: TaskRunContext, parameters: dict[str, Any]) -> str:
        return content_hash("dbpa-task", RESULT_FORMAT, context.task.name, describe(parameters))

    return key


def array_digest(values: NDArray[Any]) -> str:
    """Digest of an array's dtype, shape and bytes (pickled arrays are not stable keys)."""
    array = np.ascontiguousarray(values)
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.tobytes())
    return digest.hexdigest()[:32]
