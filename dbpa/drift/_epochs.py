"""The epochs of an audit: the ticks that have a completed run, in epoch order.

Epoch order is time order when every epoch of the audit is an ISO 8601 date or date and
time (a scheduled tick's epoch is its scheduled time: ``2026-11-27T03:00:00+00:00``; one
without a zone counts as UTC), else numeric order when every one is a decimal number
(``0``, ``1``, ``2.5``), else the order in which the epochs were first run. So the epoch
before a tick is the one before it in time, whatever order the ticks ran in (a tick
re-run or run late, a backfill).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Epoch", "EpochReader", "epoch_order", "read_epochs"]

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")


@runtime_checkable
class EpochReader(Protocol):
    """Reads the epochs of an audit from the record (``storage.Store`` is one)."""

    def audit_epochs(self, audit: str) -> pd.DataFrame:
        """epoch, started_at, run_id and config of each epoch with a completed run, in the
        order of their first runs."""
        ...


@dataclass(frozen=True)
class Epoch:
    """An epoch of an audit that has a completed run."""

    epoch: str
    run_id: str
    """Its latest completed run."""
    config: Mapping[str, Any] = field(repr=False)
    """The configuration of that run, as stored."""


def read_epochs(store: EpochReader, audit: str) -> tuple[Epoch, ...]:
    """The epochs of ``audit`` with a completed run, in epoch order (:func:`epoch_order`)."""
    found = {
        str(r.epoch): Epoch(str(r.epoch), str(r.run_id), _as_mapping(r.config))
        for r in store.audit_epochs(audit).itertuples()
    }
    return tuple(found[name] for name in epoch_order(list(found)))


def epoch_order(epochs: Sequence[str]) -> tuple[str, ...]:
    """``epochs`` (given in the order they were first run) in epoch order: by time when
    every one is an ISO 8601 date or date and time (UTC when it names no zone), else by
    value when every one is a decimal number, else as given."""
    times = [_as_time(e) for e in epochs]
    if all(t is not None for t in times):
        keys: list[Any] = times
    elif all(_NUMBER.fullmatch(e) for e in epochs):
        keys = [Decimal(e) for e in epochs]
    else:
        return tuple(epochs)
    order = sorted(range(len(epochs)), key=lambda i: (keys[i], i))
    return tuple(epochs[i] for i in order)


def _as_time(epoch: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(epoch)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _as_mapping(value: Any) -> Mapping[str, Any]:
    """A stored JSON column (text, or already decoded) as a mapping."""
    return json.loads(value) if isinstance(value, str) else dict(value)
