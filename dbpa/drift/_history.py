"""The drift history of an audit: its ticks and the drift tests recorded between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._epochs import EpochReader, epoch_order

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DriftHistory", "DriftPoint", "HistoryReader", "read_history"]


@runtime_checkable
class HistoryReader(EpochReader, Protocol):
    """Reads an audit's epochs and drift tests from the record (``storage.Store`` is one)."""

    def drift(self, audit: str) -> pd.DataFrame:
        """The stored drift tests of ``audit`` with their statistics, in epoch order."""
        ...


@dataclass(frozen=True)
class DriftPoint:
    """One arm of the audit at one tick, tested against the same arm at an earlier tick."""

    epoch: str
    against: str
    """``previous`` or ``baseline``."""
    reference_epoch: str
    family: str
    role: str
    """``original`` or the perturbation that samples the arm."""
    omega: float
    effect: float
    p_value: float
    adjusted_p: float
    """Within the arms of the same tick and reference (one family)."""
    reject: bool
    method: str
    alpha: float
    evaluated: int
    exact: bool

    @property
    def label(self) -> str:
        """``role (family)``."""
        return f"{self.role} ({self.family})"


@dataclass(frozen=True)
class DriftHistory:
    """The drift tests of the audit's ticks up to this run's (only with several ticks)."""

    epochs: tuple[str, ...]
    """Ticks with a completed run, in epoch order (``epoch_order``); the first has nothing
    to compare with."""
    current: str
    """This run's epoch."""
    points: tuple[DriftPoint, ...]

    def at(self, epoch: str) -> dict[str, tuple[DriftPoint, ...]]:
        """The tests of one tick by what they compare against (previous first)."""
        found: dict[str, tuple[DriftPoint, ...]] = {}
        for against in ("previous", "baseline"):
            points = tuple(p for p in self.points if p.epoch == epoch and p.against == against)
            if points:
                found[against] = points
        return found


def read_history(store: HistoryReader, audit: str, epoch: str) -> DriftHistory | None:
    """The ticks of ``audit`` up to ``epoch`` in epoch order and their drift tests; None with
    one tick or no drift test recorded."""
    epochs = list(epoch_order([str(e) for e in store.audit_epochs(audit).epoch]))
    if epoch in epochs:
        epochs = epochs[: epochs.index(epoch) + 1]
    recorded = store.drift(audit)
    recorded = recorded[recorded.epoch.isin(epochs)]
    if len(epochs) < 2 or recorded.empty:
        return None
    points = tuple(
        DriftPoint(
            epoch=str(r.epoch),
            against=str(r.against),
            reference_epoch=str(r.reference_epoch),
            family=str(r.family),
            role=str(r.role),
            omega=float(r.statistic),
            effect=float(r.effect),
            p_value=float(r.p_value),
            adjusted_p=float(r.adjusted_p),
            reject=bool(r.reject),
            method=str(r.method),
            alpha=float(r.alpha),
            evaluated=int(r.evaluated),
            exact=bool(r.exact),
        )
        for r in recorded.itertuples()
    )
    return DriftHistory(epochs=tuple(epochs), current=epoch, points=points)
