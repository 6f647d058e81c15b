"""The store is a drift reader: drift reads the record through its small protocols only."""

from __future__ import annotations

from pathlib import Path

from dbpa.drift import EpochReader, HistoryReader, VectorReader
from storage import Store


def test_the_store_is_every_drift_reader(tmp_path: Path) -> None:
    with Store(tmp_path / "audit.duckdb") as store:
        epochs: EpochReader = store  # mypy checks the signatures
        vectors: VectorReader = store
        history: HistoryReader = store
        for reader, protocol in (
            (epochs, EpochReader),
            (vectors, VectorReader),
            (history, HistoryReader),
        ):
            assert isinstance(reader, protocol)
            assert not isinstance(object(), protocol)
