"""The epochs of an audit: the ticks that have a completed run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Epoch", "EpochReader", "read_epochs"]


@runtime_checkable
class EpochReader(Protocol):
    """Reads the epochs of an audit from the record (``storage.Store`` is one)."""

    def audit_epochs(self, audit: str) -> pd.DataFrame:
        """epoch, started_at, run_id and config of each epoch with a completed run, oldest
        first."""
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
    """The epochs of ``audit`` with a completed run, oldest first."""
    return tuple(
        Epoch(str(r.epoch), str(r.run_id), _as_mapping(r.config))
        for r in store.audit_epochs(audit).itertuples()
    )


def _as_mapping(value: Any) -> Mapping[str, Any]:
    """A stored JSON column (text, or already decoded) as a mapping."""
    return json.loads(value) if isinstance(value, str) else dict(value)
