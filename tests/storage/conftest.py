"""A fresh store per test, and small records to write into it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dbpa.analysis import PerturbationTestRecord
from dbpa.arms import Arm
from dbpa.specs import Generation, Message, ModelSpec
from storage import EXPORTS, Store


def make_arm(prompt: str = "hello", epoch: str = "0") -> Arm:
    return Arm.of(ModelSpec(model="openai/m"), [Message(role="user", content=prompt)], epoch)


def make_gen(i: int, text: str | None = None) -> Generation:
    return Generation(i, text or f"text {i}", "ok", "stop", 5, 7, 0.001, 0.2, 100 + i, f"r{i}")


def make_record(
    test_id: str = "t1", arm_a: str = "a", arm_b: str = "b", p: float = 0.01
) -> PerturbationTestRecord:
    return PerturbationTestRecord(
        test_id,
        arm_a,
        arm_b,
        "emb",
        "cosine",
        "jsd",
        {"bins": 30},
        100,
        1,
        0.3,
        p,
        0.1,
        0.05,
        0.2,
        4.0,
        100,
        False,
        5,
        5,
        np.linspace(0, 1, 100),
    )


def count(store: Store, table: str) -> int:
    """Rows of an exportable table."""
    return len(store._df(EXPORTS[table]))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "audit.duckdb") as s:
        yield s
