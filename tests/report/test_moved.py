"""The answers that moved: chosen by the witness rule from the stored vectors and texts, and
shown in every format."""

from __future__ import annotations

import html
import json

import numpy as np

from dbpa.report import gather, render_html, render_json, render_markdown, summary_markdown
from dbpa.stats import witness_scores
from storage import Store
from tests.report.conftest import EMBEDDER, BuiltRun


def _moved(run: BuiltRun) -> tuple[dict, str, str, str]:
    with Store(run.db, read_only=True) as store:
        data = gather(store, run.run_id)
    return (
        {(m["family"], m["perturbation_id"]): m for m in json.loads(render_json(data))["moved"]},
        render_markdown(data),
        render_html(data),
        summary_markdown(data),
    )


def test_the_exemplars_are_the_top_witness_scores_of_the_stored_outputs(labelled_run):
    moved, *_ = _moved(labelled_run)
    family = "gpt-4"
    original = labelled_run.arms[(family, "original")]
    perturbed = labelled_run.arms[(family, "comedian")]
    with Store(labelled_run.db, read_only=True) as store:
        vectors = store.arms_vectors([original, perturbed], EMBEDDER, 10)
    scores = witness_scores(vectors[original], vectors[perturbed])
    comedian = moved[(family, "comedian")]

    after_expected = np.argsort(-scores.perturbed, kind="stable")[:3]
    assert [e["index"] for e in comedian["after"]] == list(after_expected)
    assert [e["text"] for e in comedian["after"]] == [
        labelled_run.outputs[perturbed][i] for i in after_expected
    ]
    shown = [e["score"] for e in comedian["after"]]
    np.testing.assert_allclose(shown, scores.perturbed[after_expected])
    before_expected = np.argsort(scores.original, kind="stable")[:3]
    assert [e["index"] for e in comedian["before"]] == list(before_expected)
    assert all(e["text"].startswith(f"{family} original answer") for e in comedian["before"])
    # A large shift: what the perturbation brought is closer to its own arm, and conversely.
    assert min(shown) > 0 > max(e["score"] for e in comedian["before"])


def test_every_format_shows_them(labelled_run):
    moved, markdown, page, summary = _moved(labelled_run)
    first_after = moved[("gpt-4", "comedian")]["after"][0]["text"]
    assert html.escape(first_after, quote=False) in page
    assert "More typical after the perturbation" in page
    assert "## The answers that moved" in markdown
    assert "### comedian (gpt-4)" in markdown
    assert first_after.split(":")[0] in markdown
    assert "What moved in **comedian** (gpt-4)" in summary  # the Prefect summary artifact
    # Only perturbations that changed get the Markdown section (the controls did not here).
    assert "### doctor (gpt-4)" not in markdown


def test_identical_outputs_are_one_exemplar_with_their_copies():
    from dbpa.report import moved_answers

    a = np.vstack([np.eye(4)[0]] * 4 + [np.eye(4)[1]] * 2)
    b = np.vstack([np.eye(4)[2]] * 3 + [np.eye(4)[0]] * 3)
    texts_a = {i: ("same" if i < 4 else "other") for i in range(6)}
    texts_b = {i: ("new" if i < 3 else "same") for i in range(6)}
    moved = moved_answers(a, b, texts_a, texts_b)
    assert [(e.text, e.copies, e.index) for e in moved.after] == [("new", 3, 0), ("same", 3, 3)]
    assert moved.before[0].text == "other"
