"""Every example audit runs end to end on the embedded defaults, with the network refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dbpa.config import parse_config
from flows.audit import audit
from storage import Store
from tests.support.network import loopback_only

pytestmark = pytest.mark.xdist_group("embedded-model")  # one worker loads torch and the models

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))
SMALL = {"k": 6, "n_permutations": 999}
SHORT_OUTPUTS = 8
"""max_tokens: a few words to embed. The embedded model's cost is the tokens it reads and
writes (about 150 a CPU-second on one thread, prompts included); 8 rather than 24 took the
file from 164 to 119 CPU-s (2026-11-27)."""


PROMPTS = 3
"""Prompts of a dataset's set: a seeded sample of its rows."""


def _shrunk(raw: dict[str, Any]) -> dict[str, Any]:
    """The example with k=6, short outputs, at most three prompts of a dataset, one variant of
    each noise operation and one edit of the first kind of each label a generator counts
    (cardiovascular's controls and targets: every kind is rendered in
    ``tests/perturbations``); everything else as written. Each request reads the whole
    prompt (a patient record: about 1 CPU-s), so the arms are the cost."""
    if isinstance(raw.get("prompts"), dict):
        raw["prompts"] = {"sample": PROMPTS, "seed": 0, **raw["prompts"]}
    for model in raw["models"]:
        model.setdefault("params", {})["max_tokens"] = SHORT_OUTPUTS
    for spec in raw["perturbations"]:
        for model in spec.get("models", []):
            if isinstance(model, dict):
                model.setdefault("params", {})["max_tokens"] = SHORT_OUTPUTS
        for counted in ("controls", "targets"):
            if isinstance(spec.get(counted), dict):
                spec[counted] = {kind: int(i == 0) for i, kind in enumerate(spec[counted])}
        if spec.get("kind") == "noise":
            spec["variants"] = 1
    return {**raw, **SMALL}


def test_every_example_is_listed():
    listed = {"personas", "cardiovascular", "alignment", "paraphrase", "noise", "robustness"}
    listed |= {"prompt_set"}
    assert {p.stem for p in EXAMPLES} >= listed


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_offline(example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    raw = _shrunk(yaml.safe_load(example.read_text()))
    config = parse_config(raw, source=str(example), base=example.parent)
    refused = loopback_only(monkeypatch)
    outcome = audit(config=config, db=str(tmp_path / "e.duckdb"), out=str(tmp_path / "reports"))
    assert refused == []
    assert outcome.status == "completed"
    with Store(tmp_path / "e.duckdb", read_only=True) as store:
        results = store.results(outcome.run_id)
        samples = store.samples()
    assert results.tested.all()
    assert len(results) == len(config.family)
    assert (samples.text.str.len() > 0).mean() > 0.9  # real text came back
    html = Path(outcome.reports["html"]).read_text()
    labelled = results.label.notna().any() and results.label.nunique() == 2
    assert ("ROC" in html) == bool(labelled)
    if config.equivalence is not None:  # every test decided three ways, against one margin
        assert set(results.decision) <= {"changed", "equivalent", "inconclusive"}
        assert (results.margin > 0).all()
        assert "Equivalence margin" in html
