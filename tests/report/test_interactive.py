"""The HTML report's interactive thresholds, sorting and filtering, in headless Chromium.

The page's corrections are checked against ``dbpa.stats`` (the reference), its decisions
against the ones Python computes for the same alpha and method, and a family of 1,000
perturbations against the issue's budget: under 20 MB, open in under 3 s.
"""

from __future__ import annotations

import dataclasses
import html as html_module
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Browser, Page

from dbpa.report import RecordViewer, ReportData, gather, render_html
from dbpa.stats import CORRECTIONS, correct
from storage import Store
from tests.report.conftest import BuiltRun, build_run
from tests.report.large import build_large
from tests.support.chromium import NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM

MAX_BYTES = 20_000_000
MAX_LOAD_MS = 3000


@dataclass
class Opened:
    """A report open in a page, and what the page reported on the console."""

    page: Page
    data: ReportData
    errors: list[str] = field(default_factory=list)


def _open(browser: Browser, html: str, path: Path, data: ReportData, **context) -> Opened:
    path.write_text(html, encoding="utf-8")
    page = browser.new_context(**context).new_page()
    opened = Opened(page, data)
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: opened.errors.append(str(error)))
    page.goto(path.as_uri(), wait_until="load")
    return opened


def _report(run: BuiltRun) -> tuple[ReportData, str]:
    with Store(run.db, read_only=True) as store:
        data = gather(store, run.run_id)
    return data, render_html(data)


def _page(browser: Browser, run: BuiltRun, tmp_path: Path) -> Iterator[Opened]:
    """``run``'s report open in a page; no console error by the end of the test."""
    data, html = _report(run)
    opened = _open(browser, html, tmp_path / "report.html", data)
    yield opened
    assert opened.errors == []
    opened.page.context.close()


@pytest.fixture
def labelled_page(browser: Browser, labelled_run: BuiltRun, tmp_path: Path) -> Iterator[Opened]:
    yield from _page(browser, labelled_run, tmp_path)


@pytest.fixture
def unlabelled_page(browser: Browser, unlabelled_run: BuiltRun, tmp_path: Path) -> Iterator[Opened]:
    yield from _page(browser, unlabelled_run, tmp_path)


def _set(page: Page, alpha: float, method: str) -> None:
    page.select_option("#method", method)
    page.fill("#alpha", str(alpha))


def _shown(page: Page, table: str = "table.results") -> dict[tuple[str, str], tuple[str, str]]:
    """(family, perturbation) -> (adjusted p, decision) as the rows of ``table`` show them."""
    rows = page.eval_on_selector_all(
        f"{table} tbody tr",
        """rows => rows.map(tr => [tr.dataset.family, tr.dataset.perturbation,
            tr.querySelector('td.adj').textContent.trim(),
            (tr.querySelector('td.dec .pill') || tr.querySelector('td.dec'))
                .textContent.trim()])""",
    )
    return {(f, pid): (adj, dec) for f, pid, adj, dec in rows}


def _python_decisions(
    data: ReportData, alpha: float, method: str
) -> dict[tuple[str, str], tuple[float | None, str]]:
    """What dbpa.stats decides: each family corrected, untested perturbations as p = 1."""
    found: dict[tuple[str, str], tuple[float | None, str]] = {}
    for f in data.families:
        raw = [r.p_value if r.tested and r.p_value is not None else 1.0 for r in f.rows]
        result = correct(raw, method=method, alpha=alpha)
        for r, adjusted, reject in zip(f.rows, result.adjusted, result.reject, strict=True):
            if r.tested:
                found[(f.name, r.perturbation_id)] = (
                    float(adjusted),
                    "changed" if reject else "no change",
                )
            else:
                found[(f.name, r.perturbation_id)] = (None, "not tested")
    return found


def _assert_shows(page: Page, data: ReportData, alpha: float, method: str) -> None:
    expected = _python_decisions(data, alpha, method)
    shown = _shown(page)
    assert shown.keys() == expected.keys()
    for key, (adj_text, decision) in shown.items():
        adjusted, wanted = expected[key]
        assert decision == wanted, (key, alpha, method)
        if adjusted is None:
            assert adj_text == "\N{EN DASH}"
        else:
            assert float(adj_text) == pytest.approx(adjusted, rel=5e-4, abs=1e-12), key


# ---------------------------------------------------------------------- the reference


@pytest.mark.parametrize("method", sorted(CORRECTIONS))
def test_the_pages_corrections_equal_dbpa_stats(labelled_page: Opened, method: str):
    page = labelled_page.page
    assert sorted(page.evaluate("Object.keys(dbpaReport.CORRECTIONS)")) == sorted(CORRECTIONS)
    rng = np.random.default_rng(17)
    vectors = [[0.3], [0.02, 0.02], [1.0, 1.0, 1.0], [0.0005, 1.0, 0.0005, 0.2]]
    for m in (5, 12, 60, 400, 1000):
        ties = rng.integers(1, 500, size=m) / 500  # permutation p-values: many ties
        vectors.append(ties.tolist())
        vectors.append(np.where(rng.random(m) < 0.3, ties, rng.random(m) ** 3).tolist())
    for p in vectors:
        got = page.evaluate(f"p => dbpaReport.CORRECTIONS['{method}'](p)", p)
        want = CORRECTIONS[method](np.asarray(p, dtype=np.float64))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=f"{method}, m={len(p)}")


def test_the_equivalence_hook_follows_decide_familys_rule(labelled_page: Opened):
    rng = np.random.default_rng(5)
    m, alpha = 40, 0.1
    change = (rng.integers(1, 200, size=m) / 200) ** 2
    equivalence = (rng.integers(1, 200, size=m) / 200) ** 2
    rows = [
        {"p": float(c), "pEquivalence": float(e)} for c, e in zip(change, equivalence, strict=True)
    ]
    for method in CORRECTIONS:
        got = labelled_page.page.evaluate(
            f"rows => dbpaReport.decideFamily(rows, {alpha}, '{method}').map(d => d.decision)",
            rows,
        )
        changed = correct(change, method=method, alpha=alpha).reject
        equivalent = correct(equivalence, method=method, alpha=alpha).reject
        want = [
            "equivalent" if e else "changed" if c else "inconclusive"
            for c, e in zip(changed, equivalent, strict=True)
        ]
        assert got == want, method
        assert {"equivalent", "changed", "inconclusive"} <= set(want)


def test_rows_with_an_equivalence_p_value_get_three_decisions(
    browser: Browser, labelled_run: BuiltRun, tmp_path: Path
):
    data, html = _report(labelled_run)
    p_equivalence = {  # equivalence shown for every other perturbation
        (r.family, r.perturbation_id): 0.0005 if r.position % 2 == 0 else 0.9
        for r in data.rows
        if r.tested
    }

    def with_equivalence(match: re.Match[str]) -> str:
        key = (html_module.unescape(match[1]), html_module.unescape(match[2]))
        return f'{match[0]} data-p-equivalence="{p_equivalence[key]!r}"'

    html = re.sub(
        r'data-family="([^"]*)" data-perturbation="([^"]*)" data-p="[^"]*"', with_equivalence, html
    )
    opened = _open(browser, html, tmp_path / "report.html", data)
    page = opened.page
    _set(page, 0.3, "bh")
    shown = _shown(page)
    for f in data.families:
        rows = [r for r in f.rows if r.tested]
        changed = correct([r.p_value for r in rows], method="bh", alpha=0.3).reject
        equivalent = correct(
            [p_equivalence[(f.name, r.perturbation_id)] for r in rows], method="bh", alpha=0.3
        ).reject
        for r, c, e in zip(rows, changed, equivalent, strict=True):
            want = "equivalent" if e else "changed" if c else "inconclusive"
            assert shown[(f.name, r.perturbation_id)][1] == want
    assert {dec for _, dec in shown.values()} == {"equivalent", "changed", "inconclusive"}
    options = page.eval_on_selector_all("#filter-decision option", "os => os.map(o => o.value)")
    assert {"equivalent", "inconclusive"} <= set(options)
    assert opened.errors == []
    page.context.close()


# ---------------------------------------------------------------------- thresholds


def test_the_page_opens_on_the_runs_decisions(labelled_page: Opened):
    page, data = labelled_page.page, labelled_page.data
    assert page.locator("#controls").is_visible()
    assert page.input_value("#alpha") == "0.05"
    assert page.input_value("#method") == "holm"
    static = {(r.family, r.perturbation_id): r.decision for r in data.rows}
    assert {key: dec for key, (_, dec) in _shown(page).items()} == static
    _assert_shows(page, data, 0.05, "holm")  # and the page's own computation agrees
    assert "changed" in static.values()


def test_alpha_and_the_method_recompute_the_decisions(labelled_page: Opened):
    page, data = labelled_page.page, labelled_page.data
    section = page.inner_html("#results")
    seen = set()
    for alpha, method in [
        (0.5, "holm"),
        (0.001, "holm"),
        (0.2, "bh"),
        (0.05, "by"),
        (0.3, "bonferroni"),
    ]:
        _set(page, alpha, method)
        _assert_shows(page, data, alpha, method)
        seen.add(tuple(sorted(dec for _, dec in _shown(page).values())))
        # the matrix follows: shaded exactly where the family's row says changed
        shaded = page.eval_on_selector_all(
            "table.matrix td.cell[data-perturbation]",
            "cells => cells.map(td => [td.dataset.family, td.dataset.perturbation,"
            " td.classList.contains('changed')])",
        )
        expected = _python_decisions(data, alpha, method)
        assert shaded
        assert all((expected[(f, pid)][1] == "changed") == on for f, pid, on in shaded)
    assert len(seen) > 1, "the settings tried must change the decisions shown"
    assert "of 6 changed" in page.inner_text("#tally")
    _set(page, 0.05, "holm")  # back to the run's: exactly the static report again
    assert page.inner_html("#results") == section


def test_untested_rows_and_the_alignment_follow_too(unlabelled_page: Opened):
    page, data = unlabelled_page.page, unlabelled_page.data
    _set(page, 0.9, "bonferroni")
    _assert_shows(page, data, 0.9, "bonferroni")
    expected = _python_decisions(data, 0.9, "bonferroni")
    aligned = page.eval_on_selector_all(
        "#alignment tbody tr",
        "rows => rows.map(tr => [tr.dataset.family, tr.dataset.perturbation,"
        " tr.querySelector('td.dec .pill').textContent])",
    )
    assert len(aligned) == 2
    assert all(expected[(f, pid)][1] == dec for f, pid, dec in aligned)
    assert expected[(data.families[0].name, "child")] == (None, "not tested")


def test_a_family_the_run_did_not_correct_reads_so_at_the_runs_settings(
    browser: Browser, labelled_run: BuiltRun, tmp_path: Path
):
    data, _ = _report(labelled_run)
    stopped = dataclasses.replace(
        data.families[0],
        rows=tuple(
            dataclasses.replace(r, adjusted_p=None, reject=None) for r in data.families[0].rows
        ),
    )
    data = dataclasses.replace(data, families=(stopped, *data.families[1:]))
    opened = _open(browser, render_html(data), tmp_path / "report.html", data)
    page = opened.page

    def of_stopped() -> set[str]:
        return {dec for (f, _), (_, dec) in _shown(page).items() if f == stopped.name}

    assert of_stopped() == {"pending"}
    _set(page, 0.05, "bonferroni")  # what the correction would decide
    assert of_stopped() <= {"changed", "no change"}
    _assert_shows(page, data, 0.05, "bonferroni")
    _set(page, 0.05, "holm")
    assert of_stopped() == {"pending"}
    assert opened.errors == []
    page.context.close()


def test_an_invalid_alpha_changes_nothing(labelled_page: Opened):
    page = labelled_page.page
    before = _shown(page)
    for bad in ("0", "1", "-0.1", "2"):
        page.fill("#alpha", bad)
        assert _shown(page) == before
        assert page.eval_on_selector("#alpha", "input => !input.checkValidity()")


def test_the_summary_cards_and_the_control_alert_follow_the_thresholds(labelled_page: Opened):
    page, data = labelled_page.page, labelled_page.data
    summary = page.inner_html("#summary")
    labels = {(r.family, r.perturbation_id): r.label for r in data.rows}
    alert = page.locator("#controls-alert-page")
    for alpha, method in [(0.5, "bh"), (0.001, "holm"), (0.3, "bonferroni")]:
        _set(page, alpha, method)
        expected = _python_decisions(data, alpha, method)
        for f in data.families:
            card = page.locator(f'[data-card="{f.name}"]')
            changed = [
                key for key, (_, dec) in expected.items() if key[0] == f.name and dec == "changed"
            ]
            assert card.locator(".changed-count").inner_text() == str(len(changed))
            verdict = card.locator(".verdict").inner_text()
            assert verdict.startswith(f"At \N{GREEK SMALL LETTER ALPHA} = {alpha} with {method}:")
            assert f"{len(changed)} of {f.tested} tested perturbations changed" in verdict
            controls = [key for key in changed if labels[key] == "control"]
            assert ("alarm" in card.get_attribute("class")) == bool(controls)
        controls = [
            key
            for key, (_, dec) in expected.items()
            if dec == "changed" and labels[key] == "control"
        ]
        assert (
            page.locator("#controls-alert").count() == 0
            or not page.locator("#controls-alert").is_visible()
        )
        if controls:
            said = alert.inner_text()
            assert said.startswith(f"{len(controls)} control perturbation")
            assert f"at \N{GREEK SMALL LETTER ALPHA} = {alpha} with {method}" in said
            for family, pid in controls:
                assert f"{pid} ({family}, adj. p " in said
        else:
            assert not alert.is_visible()
    _set(page, 0.05, "holm")  # back to the run's: exactly the static summary again
    assert page.inner_html("#summary") == summary


def test_a_figure_opens_large_without_a_script_and_a_results_row_leads_to_it(
    browser: Browser, labelled_run: BuiltRun, tmp_path: Path
):
    data, html = _report(labelled_run)
    opened = _open(browser, html, tmp_path / "report.html", data, java_script_enabled=False)
    page = opened.page
    image = page.locator("#fig-0 img")
    natural = image.bounding_box()["width"]
    assert natural == 3 * 260  # shown at its natural size: its 10 px texts stay 10 px
    page.locator("table.results a[href='#fig-0']").first.click()
    assert page.url.endswith("#fig-0")
    top = page.evaluate("document.getElementById('fig-0').getBoundingClientRect().top")
    assert -1 < top < 100  # at the top of the window, to the subpixel rounding of the scroll
    image.click()
    assert page.url.endswith("#fig-0-large")
    large = image.bounding_box()
    assert large["width"] > 1.5 * natural
    assert page.locator("#fig-0-large a.close").is_visible()
    page.locator("#fig-0-large a.close").click()
    assert page.url.endswith("#fig-0")
    assert image.bounding_box()["width"] == natural
    assert opened.errors == []
    page.context.close()


def test_long_words_wrap_instead_of_widening_the_page(
    browser: Browser, labelled_run: BuiltRun, tmp_path: Path
):
    data, _ = _report(labelled_run)
    word = "w" * 400  # an output, a description, an audit name without a space

    def long(view):
        moved = view.moved
        after = tuple(dataclasses.replace(e, text=word) for e in moved.after)
        return dataclasses.replace(view, moved=dataclasses.replace(moved, after=after))

    families = tuple(
        dataclasses.replace(f, rows=tuple(dataclasses.replace(r, description=word) for r in f.rows))
        for f in data.families
    )
    arms = tuple(
        dataclasses.replace(a, outputs=tuple(dataclasses.replace(o, text=word) for o in a.outputs))
        for a in data.arms
    )
    data = dataclasses.replace(
        data,
        run=dataclasses.replace(data.run, audit=word, description=word),
        families=families,
        arms=arms,
        test_views=tuple(long(v) for v in data.test_views),
    )
    opened = _open(
        browser,
        render_html(data),
        tmp_path / "report.html",
        data,
        viewport={"width": 800, "height": 900},
    )
    page = opened.page
    for summary in page.locator("details > summary").all():
        summary.click()
    assert page.get_by_text(word[:50]).first.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    assert opened.errors == []
    page.context.close()


# ---------------------------------------------------------------------- sorting, filtering


def test_a_header_click_sorts_and_a_second_reverses(labelled_page: Opened):
    page, data = labelled_page.page, labelled_page.data
    table = page.locator("table.results").first
    rows = data.families[0].rows
    headers = [h.strip() for h in table.locator("th").all_inner_texts()]
    assert headers[:2] == ["#", "perturbation"]
    assert headers[7:9] == ["p", "adj. p"]

    def sort_by(column: int) -> list[str]:
        table.locator("th").nth(column).click()
        return table.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.perturbation)"
        )

    def ids(ordered) -> list[str]:
        return [r.perturbation_id for r in ordered]

    # ties keep the order the rows had: the family's, as the page opens
    assert sort_by(8) == ids(sorted(rows, key=lambda r: (r.adjusted_p, r.position)))
    assert sort_by(0) == ids(rows)
    assert sort_by(7) == ids(sorted(rows, key=lambda r: (r.p_value, r.position)))
    assert sort_by(7) == ids(sorted(rows, key=lambda r: (-r.p_value, r.position)))
    assert table.locator("th").nth(7).get_attribute("aria-sort") == "descending"
    assert sort_by(6) == ids(sorted(rows, key=lambda r: (r.interval.estimate, r.position)))
    assert sort_by(1) == sorted(ids(rows))
    assert sort_by(0) == ids(rows)


def test_the_filters_show_matching_rows(labelled_page: Opened):
    page, data = labelled_page.page, labelled_page.data

    def visible() -> set[tuple[str, str]]:
        return set(
            map(
                tuple,
                page.eval_on_selector_all(
                    "table.results tbody tr:not([hidden])",
                    "rows => rows.map(r => [r.dataset.family, r.dataset.perturbation])",
                ),
            )
        )

    page.fill("#filter-text", "COMEDIAN")
    assert visible() == {(f.name, "comedian") for f in data.families}
    assert "2 of 12 rows shown" in page.inner_text("#filter-shown")
    page.fill("#filter-text", "control")  # by label
    assert visible() == {(r.family, r.perturbation_id) for r in data.rows if r.label == "control"}
    page.fill("#filter-text", "")
    page.select_option("#filter-decision", "changed")
    assert visible() == {(r.family, r.perturbation_id) for r in data.rows if r.reject}
    _set(page, 0.5, "bh")  # the decision filter follows the thresholds
    expected = _python_decisions(data, 0.5, "bh")
    assert visible() == {key for key, (_, dec) in expected.items() if dec == "changed"}
    page.select_option("#filter-decision", "not changed")
    assert visible() == {key for key, (_, dec) in expected.items() if dec != "changed"}
    page.select_option("#filter-decision", "")
    assert len(visible()) == len(data.rows)


# ---------------------------------------------------------------------- without the script, served


def test_without_javascript_the_page_is_the_static_report(
    browser: Browser, labelled_run: BuiltRun, tmp_path: Path
):
    data, html = _report(labelled_run)
    opened = _open(browser, html, tmp_path / "report.html", data, java_script_enabled=False)
    page = opened.page
    assert not page.locator("#controls").is_visible()
    static = {(r.family, r.perturbation_id): r.decision for r in data.rows}
    assert {key: dec for key, (_, dec) in _shown(page).items()} == static
    assert opened.errors == []
    page.context.close()


def test_the_served_report_runs_its_script_under_the_header_policy(
    browser: Browser, labelled_run: BuiltRun
):
    server = RecordViewer(labelled_run.db, lambda: Store(labelled_run.db, read_only=True))
    with server.running():
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{server.url}/runs/{labelled_run.run_id}", wait_until="load")
        assert page.locator("#controls").is_visible()
        page.fill("#alpha", "0.5")
        assert "At \N{GREEK SMALL LETTER ALPHA} = 0.5 with holm" in page.inner_text("#tally")
        page.close()
    assert errors == []


# ---------------------------------------------------------------------- 1,000 perturbations


def test_a_family_of_1000_perturbations_is_small_and_opens_fast(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory
):
    start = time.perf_counter()
    built = build_large(tmp_path_factory.mktemp("thousand") / "audit.duckdb", 1000, 99)
    with Store(built.db, read_only=True) as store:
        data = gather(store, built.run_id)
    html = render_html(data)
    built_s = time.perf_counter() - start
    size = len(html.encode("utf-8"))
    assert data.summarised
    assert len(data.families[0].rows) == 1000

    path = tmp_path_factory.mktemp("thousand-page") / "report.html"
    opened = _open(browser, html, path, data)
    page = opened.page
    load_ms = page.evaluate(
        "() => { const [n] = performance.getEntriesByType('navigation');"
        " return n.loadEventEnd - n.startTime; }"
    )
    print(f"\n1,000 perturbations: {size / 1e6:.2f} MB, load {load_ms:.0f} ms", end=" ")
    print(f"(record built and report rendered in {built_s:.1f} s)")
    assert size < MAX_BYTES
    assert 0 < load_ms < MAX_LOAD_MS
    assert page.locator("table.summary tbody tr").count() == 1000

    _set(page, 0.5, "bh")  # the controls still work at this size
    expected = _python_decisions(data, 0.5, "bh")
    shown = _shown(page, "table.summary")
    assert {key: dec for key, (_, dec) in shown.items()} == {k: d for k, (_, d) in expected.items()}
    page.fill("#filter-text", "p999")
    assert page.locator("table.summary tbody tr:not([hidden])").count() == 1
    assert opened.errors == []
    page.context.close()


# ---------------------------------------------------------------------- equivalence


@pytest.fixture(scope="module")
def margin_run(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    """Six personas decided against a fixed margin of 0.8: equivalent, changed, inconclusive."""
    return build_run(tmp_path_factory.mktemp("margin") / "audit.duckdb", margin=0.8)


def test_a_run_with_a_margin_opens_on_its_three_way_decisions_and_recomputes_them(
    browser: Browser, margin_run: BuiltRun, tmp_path: Path
):
    data, html = _report(margin_run)
    assert "Equivalence margin 0.8 on the distance scale: set in the config" in html
    opened = _open(browser, html, tmp_path / "report.html", data)
    page = opened.page
    static = {(r.family, r.perturbation_id): r.decision for r in data.rows}
    assert set(static.values()) == {"equivalent", "changed", "inconclusive"}
    assert {key: dec for key, (_, dec) in _shown(page).items()} == static
    for alpha, method in [(0.2, "bh"), (0.01, "bonferroni"), (0.05, "holm")]:
        _set(page, alpha, method)
        shown = _shown(page)
        for f in data.families:
            rows = [r for r in f.rows if r.tested]
            changed = correct([r.p_value for r in rows], method=method, alpha=alpha).reject
            equivalent = correct(
                [r.equivalence.p_value for r in rows], method=method, alpha=alpha
            ).reject
            for r, c, e in zip(rows, changed, equivalent, strict=True):
                want = "equivalent" if e else "changed" if c else "inconclusive"
                assert shown[(f.name, r.perturbation_id)][1] == want, (alpha, method)
    assert {key: dec for key, (_, dec) in _shown(page).items()} == static  # back at the run's
    assert opened.errors == []
    page.context.close()
