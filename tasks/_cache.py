"""Cache keys from content ids, never from pickled inputs (numpy bytes are not stable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.context import TaskRunContext

from dbpa.specs import content_hash

KeyFn = Callable[[TaskRunContext, dict[str, Any]], str]

RESULT_FORMAT = 2
"""Part of every key: bump it when a cached result's class changes shape (a test record
pickled before ``driver`` and ``components`` existed would otherwise be replayed)."""


def content_key(describe: Callable[[dict[str, Any]], Any]) -> KeyFn:
    """A ``cache_key_fn``: the task's name plus a JSON-able description of its inputs."""

    def key(context: TaskRunContext, parameters: dict[str, Any]) -> str:
        return content_hash("dbpa-task", RESULT_FORMAT, context.task.name, describe(parameters))

    return key
