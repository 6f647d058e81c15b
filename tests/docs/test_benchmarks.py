"""The benchmark pages: every result file that ``python -m benchmarks`` wrote says when,
where and on which commit it was measured, is in the site's navigation, and renders into a
page with its tables."""

from __future__ import annotations

import copy
import datetime
import html
import json
import re
from pathlib import Path

import pytest
import yaml

from docs.gen_benchmarks import check, render, with_figures

pytestmark = pytest.mark.xdist_group("docs")  # one worker builds the site once (conftest)

ROOT = Path(__file__).parents[2]
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_there_are_result_files():
    assert len(RESULTS) >= 5


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_a_result_file_says_when_where_and_what_was_measured(path):
    content = _load(path)
    assert content["suite"] == path.stem
    assert datetime.datetime.fromisoformat(content["date"]).tzinfo is not None
    machine = content["machine"]
    assert machine["cpu"]
    assert isinstance(machine["cores"], int)
    assert machine["cores"] >= 1
    assert machine["load_average_before"] >= 0
    assert machine["load_average_after"] >= 0
    assert re.fullmatch(r"\d+\.\d+\.\d+", content["python"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", content["numpy"])
    assert re.fullmatch(r"[0-9a-f]{40}", content["git"]["commit"])
    assert isinstance(content["git"]["dirty"], bool)
    assert content["command"].startswith("python -m benchmarks")
    assert path.stem in content["command"].split()
    assert content["tables"]
    for table in content["tables"]:
        assert table["title"]
        assert table["rows"]
        assert all(len(row) == len(table["columns"]) for row in table["rows"])


def test_every_result_file_has_a_page_in_the_navigation():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    section = next(entry["Benchmarks"] for entry in nav if "Benchmarks" in entry)
    pages = {p if isinstance(p, str) else next(iter(p.values())) for p in section}
    assert {f"benchmarks/{path.stem}.md" for path in RESULTS} <= pages


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_a_result_page_shows_its_tables_and_metadata(site, path):
    content = _load(path)
    page = html.unescape((site / "benchmarks" / path.stem / "index.html").read_text())
    assert content["git"]["commit"][:12] in page
    assert content["date"] in page
    assert content["machine"]["cpu"] in page
    for table in content["tables"]:
        for column in table["columns"]:
            assert column in page, column
        assert f"<td>{table['rows'][0][0]}" in page


@pytest.mark.parametrize(
    "remove", ["date", "git", "command", "tables", ("machine", "cpu"), ("git", "commit")]
)
def test_a_result_file_without_its_metadata_fails_the_build(remove):
    content = copy.deepcopy(_load(RESULTS[0]))
    if isinstance(remove, tuple):
        del content[remove[0]][remove[1]]
        name = ".".join(remove)
    else:
        del content[remove]
        name = remove
    with pytest.raises(ValueError, match=re.escape(f"'{name}'")):
        check(content, "x.json")
    check(_load(RESULTS[0]), "x.json")  # the file itself passes
    assert render(_load(RESULTS[0])).startswith(f"# `{RESULTS[0].stem}`")


def test_a_guide_quotes_a_suites_figures_from_its_result_file():
    suite = RESULTS[0].stem
    text = with_figures(f"before\n<!-- figures: {suite} -->\nafter", "how-to/x.md", 1)
    assert "<!-- figures" not in text
    assert text.startswith("before\n")
    assert text.endswith("\nafter")
    title = " ".join(_load(RESULTS[0])["tables"][0]["title"].split()).replace("|", "\\|")
    assert f"**{title}**" in text
    assert f"(../benchmarks/{suite}.md)" in text
    missing = re.escape("how-to/x.md: no benchmarks/results/nothing.json")
    with pytest.raises(ValueError, match=missing):
        with_figures("<!-- figures: nothing -->", "how-to/x.md", 1)


def test_the_shared_record_guide_shows_the_figures_of_its_benchmark(site):
    page = html.unescape((site / "how-to" / "shared-record" / "index.html").read_text())
    for table in _load(ROOT / "benchmarks" / "results" / "shared_record.json")["tables"]:
        title = " ".join(table["title"].split()).replace("`", "")  # code spans: tags here
        assert title in " ".join(re.sub("<[^>]+>", "", page).split())
    assert "figures: shared_record" not in page
