"""Export of every table, and the ``results`` view, to Parquet and CSV."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dbpa.specs import EmbeddingBatch, text_hash
from storage import EXPORTS
from tests.storage.conftest import count, make_arm, make_gen, make_record


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_every_table_exports(store, tmp_path, fmt):
    arm = make_arm()
    store.add_arms([arm])
    store.add_samples(arm.arm_id, [make_gen(0)])
    store.add_embeddings(
        "emb", [text_hash("text 0")], EmbeddingBatch(np.ones((1, 3), np.float32), np.array([False]))
    )
    store.add_tests([make_record()])
    for table in EXPORTS:
        out = store.export(table, tmp_path / f"{table}.{fmt}", fmt)
        if fmt == "parquet":
            assert pq.read_table(out).num_rows == count(store, table)
        else:
            assert len(pd.read_csv(out)) == count(store, table)
    if fmt == "csv":
        vectors = pd.read_csv(tmp_path / "embeddings.csv").vector
        assert json.loads(vectors.iloc[0]) == [1.0, 1.0, 1.0]


def test_export_rejects_unknown_names(store, tmp_path):
    with pytest.raises(ValueError, match="table: unknown 'secrets'"):
        store.export("secrets", tmp_path / "x")
    with pytest.raises(ValueError, match="format: unknown 'xlsx'"):
        store.export("runs", tmp_path / "x", "xlsx")
