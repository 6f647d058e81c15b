"""One record, two engines: the same writes read back the same from a DuckDB file and from
a PostgreSQL database (issue 50), through every reading method of ``Store``."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from dbpa.analysis import Decision, Margin
from dbpa.set_analysis import SetPrompt, SetTestRecord
from dbpa.specs import EmbeddingBatch, text_hash
from dbpa.stats import effect_interval
from storage import EXPORTS, Store
from tests.storage.conftest import family_row, make_arm, make_gen, make_record, postgres_url

_WRITTEN_AT = {"created_at", "started_at", "finished_at", "applied_at"}
"""Columns of the time of writing: different in two records written one after the other."""


def _write(store: Store) -> list[str]:
    """A small record of every kind; returns its arms' ids."""
    arms = [make_arm(f"prompt {a}", epoch=str(a % 2)) for a in range(3)]
    store.add_arms(arms)
    for a, arm in enumerate(arms):
        texts = [f"{arm.arm_id} {i}" for i in range(6)]
        store.add_samples(arm.arm_id, [make_gen(i, t) for i, t in enumerate(texts)])
        vectors = np.arange(24, dtype=np.float32).reshape(6, 4) / (a + 1)
        truncated = np.arange(6) % 3 == 0
        store.add_embeddings(
            "emb", [text_hash(t) for t in texts], EmbeddingBatch(vectors, truncated)
        )
    rng = np.random.default_rng(5)
    interval = effect_interval(rng.normal(size=(6, 4)), rng.normal(size=(6, 4)) + 1, rng=2)
    ids = [arm.arm_id for arm in arms]
    tests = [
        dataclasses.replace(make_record("t1", ids[0], ids[1]), k_a=6, k_b=6, interval=interval),
        make_record("t2", ids[0], ids[2], p=0.4),
        dataclasses.replace(make_record("s1", ids[0], ids[1]), n_prompts=2, combination="stouffer"),
    ]
    store.add_tests(tests[:2])
    prompts = tuple(
        SetPrompt(i, f"q{i}", f"t{i + 1}", 0.1 * (i + 1), 0.3, 0.1, None if i else 1.5, i == 1)
        for i in range(2)
    )
    store.add_set_tests([SetTestRecord(tests[2], prompts)])
    for run_id, epoch in (("r0", "0"), ("r1", "1")):
        store.start_run(
            run_id, audit="a", config={"k": 6, "sequential": None}, config_hash="h",
            epoch=epoch, flow_run_id=None, versions={"dbpa": "0"},
        )  # fmt: skip
        store.add_family(
            run_id,
            [family_row("p", ids[0], ids[1], "t1"), family_row("q", ids[0], ids[2], "s1")],
        )
        store.add_prompt_tests(
            run_id,
            [
                {"family": "m", "perturbation_id": "q", "prompt_id": f"q{i}",
                 "prompt_position": i, "original_arm": ids[0], "perturbed_arm": ids[2],
                 "test_id": f"t{i + 1}"}
                for i in range(2)
            ],
        )  # fmt: skip
    store.add_arm_failure("r1", ids[2], "openai/m", "refused")
    margin = Margin(0.5, "replicates", quantile=0.9, multiple=1.5, distances=(0.1, 0.2), k=6)
    decisions = [
        Decision("p", 0.01, 0.02, True, True, "changed", 0.9, 0.95, 0.5),
        Decision("q", 0.4, 0.4, False, True, "inconclusive", 0.2, 0.3, 0.5),
    ]
    store.add_corrections("r0", "m", "holm", 0.05, decisions, margin, stops={"p": (6, "x")})
    looks = [
        {"perturbation_id": "p", "look": 0, "k": 4, "test_id": "t2", "p_value": 0.3,
         "weight": 0.5},
        {"perturbation_id": "p", "look": 1, "k": 6, "test_id": "t1", "p_value": 0.01,
         "weight": 0.5, "stop": "changed"},
    ]  # fmt: skip
    store.add_sequential_looks("r1", "m", looks)
    store.add_prompt_decisions(
        "r0",
        "m",
        [
            {"perturbation_id": "q", "prompt_id": f"q{i}", "set_test_id": "s1", "position": i,
             "within": "holm", "level": 0.05, "adjusted_p": None if i else 0.02, "moved": i == 0}
            for i in range(2)
        ],
    )  # fmt: skip
    store.finish_run("r0", "completed", report_path="r0.html")
    store.add_drift(
        "a", "1", "baseline",
        [{"reference_epoch": "0", "arm_id": ids[1], "reference_arm": ids[0], "family": "m",
          "role": "original", "test_id": "t2", "method": "holm", "alpha": 0.05,
          "adjusted_p": 0.4, "reject": False}],
    )  # fmt: skip
    tick = {
        "series": "s", "baseline_epoch": "0", "epoch": "1", "tick": 1, "arm_id": ids[1],
        "reference_arm": ids[0], "form": "energy", "alpha": 0.05, "tolerance": 0.0,
        "e_value": 1.5, "log_e_value": 0.4, "threshold": 20.0, "alarm": False,
        "alarm_tick": None, "pairs": 6, "stake": 0.1,
    }  # fmt: skip
    store.add_monitor_ticks("a", [tick, tick | {"epoch": "2", "tick": 2, "alarm": True}])
    store.add_monitor_reset("a", "*", "2")
    return ids


def _read(store: Store, ids: list[str]) -> dict[str, Any]:
    """Everything the record's reading methods give, times of writing left out."""
    frames: dict[str, Any] = {f"table {name}": store.table(name).to_pandas() for name in EXPORTS}
    frames |= {
        "runs": store.runs(),
        "results r0": store.results("r0"),
        "results r1": store.results("r1"),
        "prompt results": store.prompt_results("r0"),
        "looks": store.sequential_looks("r1"),
        "failures": store.arm_failures("r1"),
        "usage": store.usage(ids),
        "samples first": store.samples(ids, first=3),
        "arms": store.arms(ids),
        "arm texts": store.arm_texts(ids, 4),
        "tests": store.tests(["t1", "t2", "s1"]),
        "tests without nulls": store.tests(["t1", "t2", "s1"], nulls=False),
        "replicates": store.interval_replicates(["t1", "t2"]),
        "epochs": store.audit_epochs("a"),
        "drift": store.drift("a"),
        "ticks": store.monitor_ticks("a"),
        "resets": store.monitor_resets("a"),
        "run": store.run_frame("r0"),
    }
    frames = {
        k: v.drop(columns=[c for c in v.columns if c in _WRITTEN_AT]) for k, v in frames.items()
    }
    frames["indices"] = store.sample_indices(ids)
    frames["vectors"] = store.arms_vectors(ids, "emb", 6)
    frames["truncated"] = store.truncated_counts(ids, "emb", 6)
    frames["missing"] = store.missing_embeddings("emb", [text_hash(f"{ids[0]} 1"), "none"])
    frames["existing"] = store.existing_tests(["t1", "t2", "s1", "t9"])
    frames["p-values"] = store.test_p_values(["t1", "t2"])
    frames["set p-values"] = store.set_prompt_p_values(["s1"])
    frames["intervals"] = store.effect_intervals(["t1", "t2"])
    return frames


def _same(duck: Any, pg: Any, what: str) -> None:
    if isinstance(duck, pd.DataFrame):
        assert list(duck.columns) == list(pg.columns), what
        assert len(duck) == len(pg), what
        for column in duck.columns:
            for a, b in zip(duck[column], pg[column], strict=True):
                _same(a, b, f"{what}: {column}")
    elif isinstance(duck, dict):
        assert sorted(duck) == sorted(pg), what  # a dict's order is no promise of the record
        for key in duck:
            _same(duck[key], pg[key], f"{what}: {key}")
    elif isinstance(duck, (np.ndarray, list)):
        np.testing.assert_array_equal(np.asarray(duck), np.asarray(pg), err_msg=what)
    elif dataclasses.is_dataclass(duck):
        _same(dataclasses.asdict(duck), dataclasses.asdict(pg), what)
    elif pd.api.types.is_scalar(duck) and pd.isna(duck):
        assert pd.api.types.is_scalar(pg), (what, duck, pg)
        assert pd.isna(pg), (what, duck, pg)
    else:
        assert duck == pg, (what, duck, pg)
        numbers = (float, int, np.number, Decimal)  # DuckDB sums INTEGER as HUGEINT: Decimal
        same_kind = type(duck) is type(pg) or (
            isinstance(duck, numbers) and isinstance(pg, numbers)
        )
        assert same_kind, (what, duck, pg)


def test_the_same_writes_read_the_same_on_both_engines(tmp_path, postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    read = {}
    for engine, target in (
        ("duckdb", tmp_path / "a.duckdb"),
        ("postgresql", postgres_url(postgres, postgres.create_database())),
    ):
        with Store(target, serve_readers=False) as store:
            read[engine] = _read(store, _write(store))
    for what, value in read["duckdb"].items():
        _same(value, read["postgresql"][what], what)
    assert len(read["duckdb"]["table results"]) == 4
    assert set(read["duckdb"]["runs"].status) == {"completed", "running"}
