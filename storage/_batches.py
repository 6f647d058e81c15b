"""The provider batches of ``batch: true`` models (migration 12).

A batch is stored as soon as the provider has created it, with every request it holds
(``batch_requests``: custom_id, arm, output indices, seed), so a run that stops while it
waits finds the same batches at its next start and sends none of their requests again. A
batch is *open* until its answers are stored (``collected``); its provider status is kept
as last seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ._core import StoreCore, retried
from ._schema import PROVIDER_BATCHES


@dataclass(frozen=True)
class StoredRequest:
    """One request of a stored batch."""

    custom_id: str
    arm_id: str
    indices: tuple[int, ...]
    seed: int | None


@dataclass(frozen=True)
class StoredBatch:
    """A provider batch as the record holds it."""

    batch_id: str
    model: str
    """The label of its model."""
    input_file_id: str
    requests: tuple[StoredRequest, ...]
    reserved_usd: float | None
    """What the spend cap reserved for it (None: no cap held it)."""
    deadline: datetime
    status: str
    """The provider's status when last polled."""
    collected: bool
    created_at: datetime


class BatchRecord(StoreCore):
    """Provider batches and their requests."""

    @retried
    def add_batch(
        self,
        batch_id: str,
        model: str,
        input_file_id: str,
        requests: Sequence[StoredRequest],
        reserved_usd: float | None,
        deadline: datetime,
        status: str,
    ) -> None:
        """Store a batch the provider created, with its requests (again: stored once)."""
        with self._transaction() as con:
            con.execute(
                "INSERT INTO provider_batches (batch_id, model, input_file_id, requests, "
                "reserved_usd, deadline, status, collected) VALUES (?, ?, ?, ?, ?, ?, ?, false) "
                "ON CONFLICT DO NOTHING",
                [batch_id, model, input_file_id, len(requests), reserved_usd, deadline, status],
            )
            for r in requests:
                con.execute(
                    "INSERT INTO batch_requests (batch_id, custom_id, arm_id, indices, seed) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [batch_id, r.custom_id, r.arm_id, ",".join(map(str, r.indices)), r.seed],
                )

    @retried
    def update_batch(self, batch_id: str, status: str, *, collected: bool = False) -> None:
        """The provider's latest status of a batch; ``collected``: its answers are stored."""
        with self._transaction() as con:
            con.execute(
                "UPDATE provider_batches SET status = ?, collected = (collected OR ?), "
                "collected_at = CASE WHEN ? AND collected_at IS NULL THEN current_timestamp "
                "ELSE collected_at END WHERE batch_id = ?",
                [status, collected, collected, batch_id],
            )

    def open_batches(self, arm_ids: Sequence[str]) -> list[StoredBatch]:
        """The batches not yet collected that hold a request of one of ``arm_ids`` (none
        before migration 12), oldest first, with all their requests."""
        if self.schema_version < PROVIDER_BATCHES or not arm_ids:
            return []
        ids = [
            str(b)
            for (b,) in self._rows(
                "SELECT DISTINCT r.batch_id FROM batch_requests r JOIN provider_batches b "
                "ON b.batch_id = r.batch_id WHERE NOT b.collected AND r.arm_id = ANY(?)",
                [list(arm_ids)],
            )
        ]
        return self.batches(ids)

    def batches(self, batch_ids: Sequence[str] | None = None) -> list[StoredBatch]:
        """The stored batches (those of ``batch_ids``, or all), oldest first."""
        if self.schema_version < PROVIDER_BATCHES:
            return []
        where, params = (
            ("", []) if batch_ids is None else ("WHERE batch_id = ANY(?)", [list(batch_ids)])
        )
        if batch_ids is not None and not batch_ids:
            return []
        rows = self._rows(
            "SELECT batch_id, model, input_file_id, reserved_usd, deadline, status, collected, "
            f"created_at FROM provider_batches {where} ORDER BY created_at, batch_id",
            params,
        )
        requests: dict[str, list[StoredRequest]] = {}
        for batch_id, custom_id, arm_id, indices, seed in self._rows(
            "SELECT batch_id, custom_id, arm_id, indices, seed FROM batch_requests "
            f"{where} ORDER BY batch_id, custom_id",
            params,
        ):
            requests.setdefault(str(batch_id), []).append(
                StoredRequest(
                    str(custom_id),
                    str(arm_id),
                    tuple(int(i) for i in str(indices).split(",") if i),
                    None if seed is None else int(seed),
                )
            )
        return [
            StoredBatch(
                str(b),
                str(model),
                str(file_id),
                tuple(requests.get(str(b), ())),
                None if reserved is None else float(reserved),
                deadline,
                str(status),
                bool(collected),
                created,
            )
            for b, model, file_id, reserved, deadline, status, collected, created in rows
        ]
