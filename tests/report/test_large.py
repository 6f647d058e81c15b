"""A run of hundreds of perturbations: its report shows the top changes in full and every
perturbation as one summary row."""

from __future__ import annotations

import json
import re

import pytest

from dbpa.report import gather, most_changed, render_html, render_json, render_markdown
from storage import Store
from tests.report.conftest import html_tables
from tests.report.large import Built, build_large, perturbation_ids, shifted_ids

M = 300
IDS = perturbation_ids(M)
SHIFTED = shifted_ids(M)
"""20 perturbations whose outputs move; the other 280 keep the original's distribution."""

pytestmark = pytest.mark.xdist_group("large-report")  # one worker builds the module's run


@pytest.fixture(scope="module")
def large_run(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_large(tmp_path_factory.mktemp("large") / "audit.duckdb", M)


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
