"""Ticks run by ``dbpa run --set epoch=...`` against the scripted provider, monitored by
``dbpa drift``: a prompt set's change found as the library finds it.

Ten prompts under the original and one system prompt (two series of ten arms each, pooled
over the prompts), k = 5 per arm and tick, ten quiet ticks (the first the baseline) shared
by both tests, then the provider changes for every request: 30% of its answers become a
hedge (a new kind of answer), or one of its familiar answers grows from a quarter of them
to 80%.
The monitor runs its default design (``monitor.conformal: both``, weighted).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.conftest import invoke
from tests.pipeline.conftest import KEY_ENV, make_config
from tests.support.scripted_server import Rule, ScriptedServer

pytestmark = [
    pytest.mark.slow,  # 25 ticks of ``dbpa run``
    pytest.mark.usefixtures("wide_console", "prefect_harness"),
    pytest.mark.xdist_group("monitor-ticks"),  # one worker runs the quiet ticks once
]

QUIET = 10
EPOCHS = [f"2026-01-{day:02d}T03:00:00+00:00" for day in range(5, 31)]
FAMILIAR = [
    ("Rest, drink fluids and see a doctor if it gets worse.", 2.0),
    ("See a doctor if your fever lasts more than three days.", 1.0),
    ("Most flu gets better with rest at home.", 1.0),
]
HEDGE = Rule(
    "", [(text, 0.7 * w) for text, w in FAMILIAR] + [("I cannot give medical advice.", 1.2)]
)
"""30% of the answers are a hedge, the others the familiar ones in their shares."""
MOVED = Rule("", [(FAMILIAR[0][0], 0.4), (FAMILIAR[1][0], 0.4), (FAMILIAR[2][0], 3.2)])
"""The familiar answers in other shares: 1/10, 1/10 and 8/10 instead of 1/2, 1/4 and 1/4."""
PROMPTS = [
    {"id": f"q{i}", "prompt": f"Flu question {i}: should I see a doctor?"} for i in range(10)
]


def _config(provider: ScriptedServer) -> dict[str, Any]:
    config = make_config(
        provider,
        name="hedging",
        prompts=PROMPTS,
        perturbations=[{"kind": "system_prompt", "variants": ["Answer briefly."]}],
        k=5,
        n_permutations=99,
    )
    del config["prompt"]
    return config


def _tick(work: Path, db: Path, epoch: str) -> None:
    """``dbpa run`` of one tick at ``epoch``."""
    result = invoke(
        "run",
        str(work / "hedging.yaml"),
        "--db",
        str(db),
        "--out",
        str(work / "reports"),
        "--set",
        f"epoch={epoch}",
    )
    assert result.exit_code == 0, result.output


def _monitor(db: Path) -> dict[str, Any]:
    shown = invoke("drift", "hedging", "--db", str(db), "--format", "json")
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.output)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ScriptedServer, Path]]:
    """The provider and a record of ``QUIET`` quiet ticks (its familiar answers in their
    shares, seeds ignored as most hosted APIs do)."""
    work = tmp_path_factory.mktemp("quiet")
    with (
        pytest.MonkeyPatch.context() as patch,
        ScriptedServer(rules=[Rule("", FAMILIAR)], embedding_dimension=24, ignore_seed=True) as p,
    ):
        patch.setenv(KEY_ENV, "sk-monitor-test")
        (work / "hedging.yaml").write_text(yaml.safe_dump(_config(p)))
        for epoch in EPOCHS[:QUIET]:
            _tick(work, work / "quiet.duckdb", epoch)
        yield p, work


def _changed(
    quiet: tuple[ScriptedServer, Path], tmp_path: Path, rule: Rule, ticks: int
) -> dict[str, int | None]:
    """Copy the quiet record, change the provider to ``rule`` and run ``ticks`` ticks: the
    changed tick (1-based) at which each series first alarmed (None: not by then)."""
    provider, work = quiet
    db = tmp_path / "changed.duckdb"
    shutil.copy(work / "quiet.duckdb", db)
    provider.rules = [rule]
    try:
        for epoch in EPOCHS[QUIET : QUIET + ticks]:
            _tick(work, db, epoch)
    finally:
        provider.rules = [Rule("", FAMILIAR)]
    shown = _monitor(db)
    assert shown["pool"] == "prompts"
    assert shown["series"] == {
        "original (openai/scripted)": 10,
        "system-answer-briefly (openai/scripted)": 10,
    }
    # the baseline is the first quiet tick, so monitor tick QUIET is the first changed one
    return {
        row["arm"]: row["alarm_tick"] - (QUIET - 1) if row["alarm"] else None
        for row in shown["latest"]
    }


def test_quiet_ticks_raise_no_alarm(quiet):
    shown = _monitor(quiet[1] / "quiet.duckdb")
    assert "2 series" in shown["design"]
    assert not any(row["alarm"] for row in shown["latest"])
    assert {row["ticks"] for row in shown["latest"]} == {QUIET - 1}


def test_a_new_kind_of_answer_in_30_percent_alarms_within_5_ticks(quiet, tmp_path):
    first = _changed(quiet, tmp_path, HEDGE, 5)
    assert any(n is not None and n <= 5 for n in first.values()), first


def test_shares_of_familiar_answers_moving_alarm_within_10_ticks(quiet, tmp_path):
    first = _changed(quiet, tmp_path, MOVED, 10)
    assert any(n is not None and n <= 10 for n in first.values()), first
