"""Every format rendered from a stored run shows the stored numbers, and nothing else."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import json
import re

import numpy as np
import pandas as pd
import pytest
from markdown_it import MarkdownIt

from dbpa.report import gather, render_html, render_json, render_markdown, summary_markdown
from storage import Store, UnknownRunError
from tests.report.conftest import PAYLOADS, REPORT_SCRIPT, BuiltRun, build_run, html_tables


def _clipped(r):
    """The estimate as a table shows it: the stored (unbiased) one, clipped into its interval."""
    return min(max(r.effect_estimate, r.effect_low), r.effect_high)


def expected_stars(p: float) -> str:
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def assert_p_cell(cell: str, p: float, n_permutations: int) -> None:
    """4 significant digits, or "≤ bound" exactly when p is the smallest possible 1/(B+1)."""
    floor = 1 / (n_permutations + 1)
    if np.isclose(p, floor):
        assert cell.startswith("≤"), cell
        assert p <= float(cell[1:]) < 1.5 * p
    else:
        assert float(cell) == pytest.approx(p, rel=5e-4), (cell, p)


def _render(run: BuiltRun) -> tuple[pd.DataFrame, str, str, dict]:
    with Store(run.db, read_only=True) as store:
        data = gather(store, run.run_id)
        results = store.results(run.run_id)
    return results, render_html(data), render_markdown(data), json.loads(render_json(data))


@pytest.fixture(scope="module")
def labelled(labelled_run):
    return _render(labelled_run)


@pytest.fixture(scope="module")
def unlabelled(unlabelled_run):
    return _render(unlabelled_run)


# ---------------------------------------------------------------------- the results table


def test_html_table_rows_show_the_stored_results(labelled, labelled_run):
    results, page, _, _ = labelled
    rows = {
        (attrs["data-family"], attrs["data-perturbation"]): cells
        for table in html_tables(page)
        if table.css_class == "results"
        for attrs, cells in table.rows
        if "data-family" in attrs
    }
    assert len(rows) == len(results) == 12
    for r in results.itertuples():
        number, pid, label, description, omega, effect, interval, p, adjusted, decision = rows[
            (r.family, r.perturbation_id)
        ]
        assert number == str(r.position + 1)
        assert pid.startswith(r.perturbation_id)
        assert label == r.label
        assert description == r.description
        assert omega == f"{r.statistic:.3f}{expected_stars(r.p_value)}"
        assert effect == f"{r.effect:+.3f}"
        shown = [float(x) for x in re.findall(r"-?(?:inf|[0-9.]+(?:e-?[0-9]+)?)", interval)]
        np.testing.assert_allclose(
            shown, [_clipped(r), r.effect_low, r.effect_high], rtol=5e-3, atol=5e-4
        )
        assert_p_cell(p, r.p_value, labelled_run.n_permutations)
        assert float(adjusted) == pytest.approx(r.adjusted_p, rel=5e-4)
        assert decision.startswith("changed" if r.reject else "no change")
        assert ("control changed" in decision) == (r.label == "control" and r.reject)


def test_the_fixture_covers_every_star_level_and_both_decisions(labelled_run):
    stars = {expected_stars(r.p_value) for r in labelled_run.records.values()}
    assert stars == {"", "*", "**", "***"}
    assert {d.reject for d in labelled_run.decisions.values()} == {True, False}


def test_families_sit_side_by_side_in_config_order(labelled, labelled_run):
    results, page, markdown, _ = labelled
    (matrix,) = [t for t in html_tables(page) if t.css_class == "matrix"]
    header, *body = matrix.rows
    assert header[1] == ["perturbation", "label", *labelled_run.families]
    assert list(labelled_run.families) == ["llama-3.1-8b", "gpt-4"]
    by_key = {(r.family, r.perturbation_id): r for r in results.itertuples()}
    assert [attrs["data-perturbation"] for attrs, _ in body] == [c.id for c in labelled_run.cases]
    for attrs, cells in body:
        for family, cell in zip(labelled_run.families, cells[2:], strict=True):
            r = by_key[(family, attrs["data-perturbation"])]
            assert cell == f"{r.statistic:.3f}{expected_stars(r.p_value)}"
    assert "| perturbation | label | llama-3.1-8b | gpt-4 |" in markdown


def test_summary_counts_changes_and_calls_out_rejected_controls_in_red(labelled):
    results, page, markdown, _ = labelled
    summary = page[page.index('id="summary"') : page.index('id="results"')]
    for _, group in results.groupby("family"):
        changed = f'<span class="changed-count">{int(group.reject.sum())}</span>'
        assert f'{changed}<span class="of"> of {len(group)} changed' in summary
    rejected = results[(results.label == "control") & results.reject]
    assert len(rejected) == 1
    alert = re.search(r'<div class="alert" id="controls-alert">(.*?)</div>', summary, re.S)
    assert alert is not None
    assert rejected.perturbation_id.iloc[0] in alert.group(1)
    assert "🔴" in markdown


def markdown_tables(markdown: str) -> dict[str, list[list[str]]]:
    """Cells of the table rows under each ``### heading``."""
    tables: dict[str, list[list[str]]] = {}
    heading = None
    for line in markdown.splitlines():
        if line.startswith("### "):
            heading = line.removeprefix("### ")
            tables[heading] = []
        elif line.startswith("## "):
            heading = None
        elif heading is not None and line.startswith("| "):
            tables[heading].append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return tables


def test_markdown_has_the_table_with_the_stored_values(labelled):
    results, _, markdown, _ = labelled
    tables = markdown_tables(markdown)
    for family, group in results.groupby("family"):
        header, *rows = tables[family]
        assert header == [
            "#",
            "perturbation",
            "kind",
            "label",
            "description",
            "ω",
            "effect",
            "distance [90% CI]",
            "p",
            "adj. p",
            "decision",
        ]
        assert [r[1] for r in rows] == group.perturbation_id.tolist()
        for cells, r in zip(rows, group.itertuples(), strict=True):
            omega = f"{r.statistic:.3f}" + expected_stars(r.p_value).replace("*", r"\*")
            assert cells[5] == (f"**{omega}**" if r.reject else omega)
            assert cells[6] == f"{r.effect:+.3f}"
            shown = [float(x) for x in re.findall(r"-?(?:inf|[0-9.]+(?:e-?[0-9]+)?)", cells[7])]
            np.testing.assert_allclose(
                shown, [_clipped(r), r.effect_low, r.effect_high], rtol=5e-3, atol=5e-4
            )
            assert cells[10] == ("changed" if r.reject else "no change")


def test_json_round_trips_the_stored_numbers(labelled, labelled_run):
    results, _, _, report = labelled
    rows = {(f["name"], r["perturbation_id"]): r for f in report["families"] for r in f["results"]}
    assert len(rows) == len(results)
    for r in results.itertuples():
        row = rows[(r.family, r.perturbation_id)]
        assert row["omega"] == r.statistic
        assert row["effect"] == r.effect
        assert row["z"] == r.z
        assert row["null_mean"] == r.null_mean
        assert row["p_value"] == r.p_value
        assert row["adjusted_p"] == r.adjusted_p
        assert row["reject"] is bool(r.reject)
        assert row["stars"] == expected_stars(r.p_value)
        assert row["evaluated"] == labelled_run.n_permutations
        assert row["p_floor"] == 1 / (labelled_run.n_permutations + 1)
        record = labelled_run.records[(r.family, r.perturbation_id)]
        assert row["seed"] == record.seed
    assert report["summary"]["changed"] == int(results.reject.sum())
    assert report["run"]["run_id"] == labelled_run.run_id
    assert report["settings"]["n_permutations"] == labelled_run.n_permutations


def test_unknown_run_is_an_error(labelled_run):
    with Store(labelled_run.db, read_only=True) as store, pytest.raises(UnknownRunError):
        gather(store, "no-such-run")


# ---------------------------------------------------------------------- labels and ROC


def _auc(p_control: list[float], p_target: list[float]) -> float:
    """P(p_target < p_control) + P(tie)/2, counted pair by pair."""
    wins = sum((t < c) + 0.5 * (t == c) for t in p_target for c in p_control)
    return wins / (len(p_target) * len(p_control))


def _tpr_at(p_control: list[float], p_target: list[float], max_fpr: float) -> float:
    thresholds = [-1.0, *sorted(set(p_control + p_target))]
    return max(
        np.mean([t <= a for t in p_target])
        for a in thresholds
        if np.mean([c <= a for c in p_control]) <= max_fpr
    )


def test_roc_section_is_shown_exactly_when_labels_exist(labelled, unlabelled):
    for (_, page, markdown, report), has_labels in ((labelled, True), (unlabelled, False)):
        assert ('id="roc"' in page) == has_labels
        assert ("ROC curves" in page) == has_labels
        assert ("## Control vs target perturbations" in markdown) == has_labels
        assert bool(report["roc"]) == has_labels


def test_roc_auc_and_tpr_at_allowed_fpr_match_the_stored_p_values(labelled):
    results, page, _, report = labelled
    best = {}
    for roc in report["roc"]:
        group = results[results.family == roc["family"]]
        control = group[group.label == "control"].p_value.tolist()
        target = group[group.label == "target"].p_value.tolist()
        assert roc["auc"] == pytest.approx(_auc(control, target))
        assert [p["max_fpr"] for p in roc["points"]] == [0.01, 0.05]
        for point in roc["points"]:
            assert point["tpr"] == pytest.approx(_tpr_at(control, target, point["max_fpr"]))
            best.setdefault(point["max_fpr"], []).append((point["tpr"], roc["auc"], roc["family"]))
    assert [c["max_fpr"] for c in report["best_models"]] == [0.01, 0.05]
    for choice in report["best_models"]:
        top = max(best[choice["max_fpr"]], key=lambda x: (x[0], x[1]))
        assert choice["model"] == top[2]
        assert f"<strong>{choice['model']}</strong>" in page


# ---------------------------------------------------------------------- failures, alignment


def test_a_perturbation_that_could_not_be_tested_says_why(unlabelled, unlabelled_run):
    _, page, markdown, report = unlabelled
    (child,) = [
        cells
        for table in html_tables(page)
        if table.css_class == "results"
        for attrs, cells in table.rows
        if attrs.get("data-perturbation") == "child"
    ]
    reason = f"the perturbed arm could not be sampled: {unlabelled_run.failure_reason}"
    assert child[4:9] == ["\N{EN DASH}"] * 5
    assert child[9] == f"not tested {reason}"
    assert f"not tested: {reason}" in markdown
    rows = [r for f in report["families"] for r in f["results"]]
    (row,) = [r for r in rows if r["perturbation_id"] == "child"]
    assert row["tested"] is False
    assert row["p_value"] is None
    assert row["decision"] == "not tested"
    assert unlabelled_run.failure_reason in row["reason"]
    assert report["run"]["status"] == "incomplete"


def test_model_swaps_are_charted_against_the_reference_model(unlabelled, unlabelled_run, labelled):
    results, page, markdown, report = unlabelled
    swaps = [c for c in unlabelled_run.cases if c.kind == "model"]
    assert [(a["reference"], a["model"]) for a in report["alignment"]] == [
        ("gpt-4", c.model) for c in swaps
    ]
    for a in report["alignment"]:
        stored = results[results.perturbation_id == a["perturbation_id"]].iloc[0]
        assert (a["omega"], a["p_value"]) == (stored.statistic, stored.p_value)
    alignment = page[page.index('id="alignment"') : page.index('id="tests"')]
    assert all(c.model in alignment for c in swaps)
    assert 'alt="alignment chart"' in alignment
    assert "## Alignment with the reference model" in markdown
    assert 'id="alignment"' not in labelled[1]


# ---------------------------------------------------------------------- figures


def test_per_test_figures_show_p0_p1_and_the_null(labelled_run):
    with Store(labelled_run.db, read_only=True) as store:
        data = gather(store, labelled_run.run_id)
        for view in data.test_views:
            record = labelled_run.records[(view.family, view.perturbation_id)]
            assert sum(view.null.counts) == labelled_run.n_permutations
            assert view.null.observed == record.statistic
            arm, k = record.original_arm, record.k_a
            original = store.arms_vectors([arm], record.embedder, k)[arm]
            unit = original / np.linalg.norm(original, axis=1, keepdims=True)
            within = (unit @ unit.T)[np.triu_indices(len(unit), 1)]
            assert view.similarity is not None
            assert view.similarity.p0_mean == pytest.approx(within.mean(), abs=1e-6)
            assert sum(view.similarity.p0) == pytest.approx(1.0)
            assert sum(view.similarity.p1) == pytest.approx(1.0)
    page = render_html(data)
    figures = page[page.index('id="tests"') : page.index('id="outputs"')]
    assert figures.count('src="data:image/svg+xml;base64,') == len(labelled_run.records)


def test_a_run_without_embeddings_skips_the_similarity_histograms(unembedded_run):
    with Store(unembedded_run.db, read_only=True) as store:
        data = gather(store, unembedded_run.run_id)
    assert len(data.test_views) == len(unembedded_run.records)
    assert all(v.similarity is None and v.note for v in data.test_views)
    page = render_html(data)
    figures = page[page.index('id="tests"') : page.index('id="outputs"')]
    assert figures.count('src="data:image/svg+xml;base64,') == len(unembedded_run.records)
    assert figures.count("no P0/P1 histogram") == len(unembedded_run.records)


def test_figures_are_limited_but_every_row_stays_in_the_table(labelled_run):
    with Store(labelled_run.db, read_only=True) as store:
        data = gather(store, labelled_run.run_id, max_test_figures=5)
    assert len(data.test_views) == 5
    assert data.figures_omitted == len(labelled_run.records) - 5
    assert "7 more are in the tables only" in render_html(data)


# ---------------------------------------------------------------------- safety, usage, provenance


def test_every_user_string_is_escaped(hostile_run):
    with Store(hostile_run.db, read_only=True) as store:
        data = gather(store, hostile_run.run_id)
    page, markdown, report = render_html(data), render_markdown(data), render_json(data)
    lowered = page.replace(f"<script>{REPORT_SCRIPT}</script>", "", 1).lower()
    for tag in ("<script", "<svg", "<img src=x", '<a href="javascript'):
        assert tag not in lowered
    shown = html.unescape(page)  # what a browser displays as text
    assert all(payload in shown for payload in PAYLOADS)
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)  # code blocks show text literally
    assert "<" not in prose.replace("p&lt;", "")
    outputs = [o["text"] for arm in json.loads(report)["arms"] for o in arm["outputs"]]
    assert all(" ".join(PAYLOADS) in text for text in outputs)


def test_the_page_is_self_contained_and_runs_only_its_own_script(labelled):
    _, page, _, _ = labelled
    digest = base64.b64encode(hashlib.sha256(REPORT_SCRIPT.encode()).digest()).decode()
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;; '
        "img-src data:; style-src &#39;unsafe-inline&#39;; "
        f'script-src &#39;sha256-{digest}&#39;">' in page
    )
    assert "unsafe-eval" not in page
    sources = re.findall(r'\b(?:src|href)="([^"]*)"', page)
    assert sources
    images = ("data:image/png;base64,", "data:image/svg+xml;base64,")
    assert all(s.startswith((*images, "#")) for s in sources)
    assert "<link" not in page
    assert page.count("<script") == 1
    assert f"<script>{REPORT_SCRIPT}</script>" in page  # inline, nothing to fetch


def test_tokens_and_cost_add_up_over_every_stored_output(labelled, labelled_run):
    _, page, _, report = labelled
    total = report["usage"]["total"]
    assert total["outputs"] == labelled_run.n_outputs
    assert total["completion_tokens"] == labelled_run.completion_tokens
    assert total["cost_usd"] == pytest.approx(labelled_run.cost_usd)
    (usage,) = [
        t for t in html_tables(page) if t.rows and t.rows[0][1][:3] == ["model", "arms", "outputs"]
    ]
    assert usage.rows[-1][1][0] == "total"
    assert usage.rows[-1][1][6] == f"{labelled_run.completion_tokens:,}"
    assert usage.rows[-1][1][7] == f"${labelled_run.cost_usd:.4f}"


def test_provenance_names_the_config_versions_seed_embedder_and_database(labelled, labelled_run):
    _, page, markdown, report = labelled
    with Store(labelled_run.db, read_only=True) as store:
        run = store.run(labelled_run.run_id)
    config, versions = json.loads(run["config"]), json.loads(run["versions"])
    assert report["provenance"] == {"config": config, "versions": versions}
    provenance = page[page.index('id="provenance"') :]
    for text in (
        str(labelled_run.db),
        run["config_hash"],
        "sentence-transformers/all-MiniLM-L6-v2",
        f"dbpa report {labelled_run.run_id}",
        *versions,
        *versions.values(),
    ):
        assert text in provenance
    assert json.dumps(config, indent=2, sort_keys=True) in html.unescape(provenance)
    assert str(labelled_run.db) in markdown


def test_markdown_shows_versions_as_written_and_user_text_literally(labelled_run):
    """A version cell is ``1.106.2``, not ``\\1.106.2``; text that would start a list, a
    heading or emphasis still shows as written once the Markdown is rendered."""
    with Store(labelled_run.db, read_only=True) as store:
        data = gather(store, labelled_run.run_id)
    user_text = "1. first # not a heading *not bold* 2) [link](x)"
    versions = {"litellm": "1.106.2", "other": "2) x", "third": "10. y"}
    data = dataclasses.replace(
        data, run=dataclasses.replace(data.run, description=user_text, versions=versions)
    )
    markdown = render_markdown(data)
    for version in versions.values():
        assert f"\\{version}" not in markdown
    assert "| litellm | 1.106.2 |" in markdown
    page = MarkdownIt("commonmark").enable("table").render(markdown)
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert all(v in cells for v in versions.values()), cells
    assert f"<p>{html.escape(user_text, quote=False)}</p>" in page
    assert "<ol" not in page
    assert "<em>" not in page


def test_latest_is_the_newest_run_of_the_database(tmp_path):
    first = build_run(tmp_path / "audit.duckdb", cases=(), run_id="first")
    second = build_run(tmp_path / "audit.duckdb", audit="second", cases=(), run_id="second")
    assert first.db == second.db
    with Store(second.db, read_only=True) as store:
        data = gather(store, "latest")
    assert data.run.run_id == "second"
    assert data.rows == ()
    assert "second" in render_html(data)


def test_per_test_svg_draws_every_bin_and_the_observed_statistic(labelled_run):
    import base64
    import xml.etree.ElementTree as ET

    from dbpa.report._svg import test_figure

    with Store(labelled_run.db, read_only=True) as store:
        view = gather(store, labelled_run.run_id).test_views[0]
    chart = test_figure(view)
    svg = ET.fromstring(base64.b64decode(chart.uri.split(",", 1)[1]))
    ns = "{http://www.w3.org/2000/svg}"
    groups = svg.findall(f"{ns}g")
    bar_counts = [len(g.findall(f"{ns}rect")) for g in groups if g.find(f"{ns}rect") is not None]
    s = view.similarity
    assert bar_counts == [
        sum(h > 0 for h in s.p0),
        sum(h > 0 for h in s.p1),
        sum(c > 0 for c in view.null.counts),
    ]
    # The output map: one dot per output of each arm (k = 10), between the two histograms.
    dots = [len(g.findall(f"{ns}circle")) for g in groups if g.find(f"{ns}circle") is not None]
    assert dots == [10, 10]
    red_lines = [e for e in svg.iter(f"{ns}line") if e.get("stroke") == "#c0392b"]
    assert len(red_lines) == 1
    assert chart.width == int(svg.get("width"))


def test_the_roc_svg_draws_every_point_of_each_family_and_escapes_its_names():
    import xml.etree.ElementTree as ET

    from dbpa.report._data import RocView
    from dbpa.report._roc import roc_figure

    rocs = [
        RocView("typos", (0.0, 0.0, 0.5, 1.0), (0.0, 0.5, 1.0, 1.0), 0.875, (), 2, 2, 0),
        RocView("<b>&co</b>", (0.0, 1.0), (0.0, 1.0), 0.5, (), 2, 2, 0),
    ]
    chart = roc_figure(rocs)
    assert chart.uri.startswith("data:image/svg+xml;base64,")
    svg = ET.fromstring(base64.b64decode(chart.uri.split(",", 1)[1]))
    ns = "{http://www.w3.org/2000/svg}"
    curves = svg.findall(f"{ns}polyline")
    assert [len(c.get("points").split()) for c in curves] == [4, 2]
    dots = [len(g.findall(f"{ns}circle")) for g in svg.findall(f"{ns}g")]
    assert dots == [4, 2]
    # the plot is square: (0, 0) to (1, 1) spans as many pixels across as up
    first = [tuple(map(float, xy.split(","))) for xy in curves[1].get("points").split()]
    (x0, y0), (x1, y1) = first
    assert x1 - x0 == pytest.approx(y0 - y1)
    texts = [t.text for t in svg.iter(f"{ns}text")]
    assert "typos (AUC 0.88)" in texts
    assert "<b>&co</b> (AUC 0.50)" in texts  # parsed back from its escaped form
    assert chart.width == int(svg.get("width"))


def test_a_margin_shows_in_every_format(tmp_path):
    run = build_run(tmp_path / "m.duckdb", margin=0.8)
    with Store(run.db, read_only=True) as store:
        data = gather(store, run.run_id)
        results = store.results(run.run_id).set_index("perturbation_id")
    markdown, report = render_markdown(data), json.loads(render_json(data))
    assert "Equivalence margin 0.8 on the distance scale: set in the config." in markdown
    family = report["families"][0]
    assert family["margin"] == {
        "value": 0.8,
        "source": "fixed",
        "quantile": None,
        "pairs": None,
        "multiple": None,
        "basis": "set in the config",
    }
    rows = {r["perturbation_id"]: r for r in family["results"]}
    for pid, r in rows.items():
        assert r["decision"] == results.loc[pid, "decision"]
        high = results.loc[pid, "effect_high"]  # infinite (JSON null): the outputs bound none
        assert r["interval"]["high"] == (None if np.isinf(high) else high)
        assert r["equivalence"]["p_value"] == results.loc[pid, "equivalence_p"]
    assert family["equivalent"] == sum(r["decision"] == "equivalent" for r in rows.values())
    assert "inconclusive" in {r["decision"] for r in rows.values()}
    for r in rows.values():  # a projection only where the interval has not settled it
        if r["decision"] != "inconclusive":
            assert r["settling"] is None
        elif r["settling"] is not None:
            assert r["settling"]["k"] > run.records[(r["family"], r["perturbation_id"])].k_a
            assert f"k = {r['settling']['k']} would likely show it" in markdown
    summary = summary_markdown(data)
    assert f"{family['equivalent']} equivalent within the margin" in summary


def test_every_text_of_a_per_test_figure_is_at_least_10_px(labelled_run):
    import base64
    import xml.etree.ElementTree as ET

    from dbpa.report._svg import test_figure

    with Store(labelled_run.db, read_only=True) as store:
        views = gather(store, labelled_run.run_id).test_views
    ns = "{http://www.w3.org/2000/svg}"
    for view in views:
        svg = ET.fromstring(base64.b64decode(test_figure(view).uri.split(",", 1)[1]))
        texts = list(svg.iter(f"{ns}text"))
        assert len(texts) >= 12  # ticks, axis labels and legends of three panels
        assert float(svg.get("font-size")) >= 10
        # none sets a smaller size of its own, and none leaves the figure
        assert all(t.get("font-size") is None and t.get("style") is None for t in texts)
        height = float(svg.get("height"))
        for t in texts:
            if t.get("y") is not None:
                assert 10 <= float(t.get("y")) <= height - 2, t.text


def test_results_rows_link_to_their_figure(labelled, labelled_run):
    _, page, _, _ = labelled
    with Store(labelled_run.db, read_only=True) as store:
        views = gather(store, labelled_run.run_id).test_views
    figures = re.findall(r'<figure id="(fig-\d+)">', page)
    assert len(figures) == len(views) > 0
    results = page[page.index('id="results"') : page.index('id="tests"')]
    for anchor in figures:
        assert results.count(f'href="#{anchor}"') >= 1, anchor
    # the link sits in the row of the figure's perturbation
    first = views[0]
    row = re.search(
        rf'<tr [^>]*data-family="{re.escape(first.family)}" '
        rf'data-perturbation="{re.escape(first.perturbation_id)}"[^>]*>(.*?)</tr>',
        results,
        re.S,
    )
    assert row is not None
    assert 'href="#fig-0"' in row[1]


def test_sample_outputs_say_how_many_of_each_arms_outputs_they_show(labelled):
    _, page, _, data = labelled
    outputs = page[page.index('id="outputs"') : page.index('id="usage"')]
    shown = re.findall(r"· (\d+) of (\d+) outputs shown", outputs)
    assert len(shown) == len(data["arms"])
    for (n, of), arm in zip(shown, data["arms"], strict=True):
        assert (int(n), int(of)) == (len(arm["outputs"]), arm["usage"]["outputs"])
        assert int(n) < int(of)  # 3 of the 10 each arm holds
    assert "The first 3 outputs of each of the" in outputs


def test_the_summary_says_what_the_run_cost_and_at_which_price(labelled, labelled_run):
    results, _, markdown, _ = labelled
    with Store(labelled_run.db, read_only=True) as store:
        arms = sorted({*results.original_arm, *results.perturbed_arm})
        samples = store.samples(arms)
    cost = samples.cost_usd.sum()
    assert (
        f"- Cost: ${cost:.4f} for {len(samples):,} outputs "
        f"(${cost / len(results):.4f} per perturbation), at list prices"
    ) in markdown
