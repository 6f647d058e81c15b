"""A run of hundreds of perturbations: its report shows the top changes in full and every
perturbation as one summary row."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dbpa.analysis import AnalysisSpec, decide_family, run_test
from dbpa.arms import Arm
from dbpa.report import gather, most_changed, render_html, render_json, render_markdown
from dbpa.specs import EmbeddingBatch, Generation, Message, ModelSpec, content_hash, text_hash
from storage import Store
from tests.report.conftest import DIM, EMBEDDER, html_tables

M = 300
K = 8
IDS = [f"p{i:03d}" for i in range(M)]
LABELS = ("control", "target", None)
SHIFTED = set(IDS[7::15])
"""20 perturbations whose outputs move; the other 280 keep the original's distribution."""


def _build(db: Path) -> Built:
    """One model, M perturbations, k=8 outputs per arm, every write one batch (but the
    outputs, which the store takes one arm at a time)."""
    rng = np.random.default_rng(3)
    analysis = AnalysisSpec(n_permutations=499, alpha=0.05, correction="holm")
    model = ModelSpec(model="openai/gpt-4", name="gpt-4")
    prompt = (Message(role="user", content="What should I do about a cough?"),)
    config = {
        "name": "large",
        "models": [{"model": "openai/gpt-4", "name": "gpt-4"}],
        "prompt": [m.model_dump() for m in prompt],
        "k": K,
        "embedder": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2"},
        "n_permutations": 499,
        "alpha": 0.05,
        "correction": "holm",
        "seed": 3,
    }
    original = Arm.of(model, prompt, "0")
    arms = [original]
    rows, records = [], []
    centre = rng.normal(size=DIM) + 2.0
    vectors = {original.arm_id: centre + 0.35 * rng.normal(size=(K, DIM))}
    for i, pid in enumerate(IDS):
        kind = "template" if i < 200 else "prompt"
        messages = (Message(role="user", content=f"Perturbation number {i}. {prompt[0].content}"),)
        arm = Arm.of(model, messages, "0")
        arms.append(arm)
        shift = 2.4 * (pid in SHIFTED) * rng.normal(size=DIM) / np.sqrt(DIM)
        vectors[arm.arm_id] = centre + shift + 0.35 * rng.normal(size=(K, DIM))
        test_id = content_hash("test", original.arm_id, arm.arm_id)
        rows.append(
            {
                "family": "gpt-4",
                "perturbation_id": pid,
                "position": i,
                "kind": kind,
                "label": LABELS[i % 3],
                "description": f"Perturbation number {i}.",
                "original_arm": original.arm_id,
                "perturbed_arm": arm.arm_id,
                "test_id": test_id,
            }
        )
        records.append(
            run_test(
                test_id,
                vectors[original.arm_id],
                vectors[arm.arm_id],
                original_arm=original.arm_id,
                perturbed_arm=arm.arm_id,
                embedder=EMBEDDER,
                analysis=analysis,
            )
        )
    with Store(db) as store:
        store.start_run(
            "large-run",
            audit="large",
            config=config,
            config_hash=content_hash(config),
            epoch="0",
            flow_run_id=None,
            versions={"dbpa": "0.1.0"},
        )
        store.add_arms(arms)
        hashes, flat = [], []
        for arm in arms:
            texts = [f"{arm.arm_id[:8]} answer {j}" for j in range(K)]
            store.add_samples(arm.arm_id, [_output(j, t) for j, t in enumerate(texts)])
            hashes += [text_hash(t) for t in texts]
            flat.append(vectors[arm.arm_id])
        batch = EmbeddingBatch(np.vstack(flat).astype(np.float32), np.zeros(len(hashes), bool))
        store.add_embeddings(EMBEDDER, hashes, batch)
        store.add_tests(records)
        store.add_family("large-run", rows)
        decisions = decide_family(
            {r["perturbation_id"]: t.p_value for r, t in zip(rows, records, strict=True)}, analysis
        )
        store.add_corrections("large-run", "gpt-4", "holm", 0.05, decisions)
        store.finish_run("large-run", "completed")
    return Built(db=db, run_id="large-run")


def _output(index: int, text: str) -> Generation:
    return Generation(
        index=index,
        text=text,
        status="ok",
        finish_reason="stop",
        prompt_tokens=9,
        completion_tokens=3,
        cost_usd=None,
        latency_s=0.1,
        seed=index,
        request_id=f"req-{index}",
    )


@dataclass(frozen=True)
class Built:
    db: Path
    run_id: str


@pytest.fixture(scope="module")
def large_run(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(tmp_path_factory.mktemp("large") / "audit.duckdb")


@pytest.fixture(scope="module")
def rendered(large_run):
    with Store(large_run.db, read_only=True) as store:
        data = gather(store, large_run.run_id, top=50)
    return data, render_html(data), render_markdown(data), json.loads(render_json(data))


def _rows(page: str, css_class: str) -> list[str]:
    return [
        attrs["data-perturbation"]
        for table in html_tables(page)
        if table.css_class == css_class
        for attrs, _ in table.rows
        if "data-perturbation" in attrs
    ]


def test_the_top_50_are_the_most_changed(rendered):
    data, _, _, _ = rendered
    (family,) = data.families
    assert data.summarised
    assert len(family.top) == 50
    assert {r.perturbation_id for r in family.top} >= SHIFTED
    keys = [(r.adjusted_p, r.p_value) for r in family.top]
    assert keys == sorted(keys)
    assert family.top == most_changed(family.rows, 50)
    worst_shown = max(r.adjusted_p for r in family.top)
    assert all(r.adjusted_p >= worst_shown for r in family.rows if r not in family.top)


def test_full_sections_only_for_the_top_and_a_summary_row_for_every_perturbation(
    rendered, large_run
):
    data, page, _, _ = rendered
    top = [r.perturbation_id for r in data.families[0].top]
    assert _rows(page, "results") == top
    summary = _rows(page, "summary")
    assert summary == IDS  # every one, in family order

    figures = page[page.index('id="tests"') : page.index('id="outputs"')]
    assert figures.count('src="data:image/svg+xml;base64,') == 50
    assert "the other 250 tested ones are in the summary tables only" in figures
    outputs = page[page.index('id="outputs"') : page.index('id="usage"')]
    assert outputs.count("<details>") == 51  # the original arm and the top 50
    shown = set(re.findall(r"<strong>(p\d{3}) \(gpt-4\)</strong>", outputs))
    assert shown == set(top)
    provenance = html_tables(page[page.index('id="provenance"') :])[-1]
    assert [cells[1] for _, cells in provenance.rows[1:]] == top  # ids and seeds: top rows


def test_counts_per_kind_and_label(rendered):
    data, page, markdown, _ = rendered
    (kinds,) = [t for t in html_tables(page) if t.css_class == "kinds"]
    counts = {(cells[0], cells[1]): cells[2] for _, cells in kinds.rows[1:]}
    assert counts == {
        ("template", "control"): "67",
        ("template", "target"): "67",
        ("template", ""): "66",
        ("prompt", "control"): "33",
        ("prompt", "target"): "33",
        ("prompt", ""): "34",
    }
    assert sum(c.perturbations for c in data.families[0].by_kind) == M
    assert "| template | control | 67 |" in markdown


def test_markdown_and_json_keep_every_perturbation(rendered):
    _, _, markdown, report = rendered
    assert all(f"| {pid} |" in markdown for pid in IDS)
    assert markdown.count("Perturbation number") == 50  # descriptions: the top rows only
    assert [r["perturbation_id"] for r in report["families"][0]["results"]] == IDS
    assert len(report["arms"]) == M + 1
    assert all(len(a["outputs"]) == 3 for a in report["arms"])


def test_a_run_at_the_threshold_is_shown_in_full(large_run):
    with Store(large_run.db, read_only=True) as store:
        data = gather(store, large_run.run_id, summarise_over=M)
    assert not data.summarised
    page = render_html(data)
    assert len(_rows(page, "results")) == M
    assert not _rows(page, "summary")
    assert page.count("<details>") >= M + 1
