"""The documentation site: it builds with ``mkdocs build --strict`` (no broken link or anchor,
no page outside the navigation), its generated reference names every command, option, config
key, table and column the code has, and every config the tutorials and guides show is valid."""

from __future__ import annotations

import html
import re
from pathlib import Path

import duckdb
import pytest
import typer

from dbpa.cli import app
from dbpa.config import AuditConfig
from dbpa.launch import load_audit
from storage import MIGRATIONS

pytestmark = pytest.mark.xdist_group("docs")  # one worker builds the site once (conftest)

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 250


def _sections(page: Path) -> dict[str, str]:
    """A built page's text under each h2, keyed by the heading's id."""
    text = page.read_text(encoding="utf-8")
    parts = re.split(r'<h2 id="([^"]+)"', text)
    return {parts[i]: html.unescape(parts[i + 1]) for i in range(1, len(parts), 2)}


def _codes(text: str) -> set[str]:
    """The texts of a section's inline code spans."""
    return {html.unescape(c) for c in re.findall(r"<code>([^<]*)</code>", text)}


def _commands(command, words):
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, [*words, name])
    else:
        yield words, command


def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file()
    assert (site / "search" / "search_index.json").is_file()


def test_every_command_and_option_is_in_the_cli_reference(site):
    sections = _sections(site / "reference" / "cli" / "index.html")
    for words, command in _commands(typer.main.get_command(app), []):
        anchor = "-".join(words)
        assert anchor in sections, f"dbpa {' '.join(words)} has no section"
        codes = _codes(sections[anchor])
        for param in command.params:
            if param.param_type_name == "option":
                for name in [*param.opts, *param.secondary_opts]:
                    assert name in codes, f"dbpa {' '.join(words)} {name}"
            else:
                assert any(param.name.upper() in c or (param.metavar or "") in c for c in codes)
        assert " ".join((command.help or "").split()[:6]).replace("``", "`") in " ".join(
            re.sub(r"<[^>]+>", "", sections[anchor]).split()
        )


def test_every_config_key_is_in_the_config_reference(site):
    schema = AuditConfig.model_json_schema()
    sections = _sections(site / "reference" / "config" / "index.html")
    models = {"auditconfig": schema, **{n.lower(): d for n, d in schema["$defs"].items()}}
    for anchor, model in models.items():
        assert anchor in sections, f"{anchor} has no section"
        codes = _codes(sections[anchor])
        for key in model.get("properties", {}):
            assert key in codes, f"{anchor}: {key}"


def test_every_table_and_column_is_in_the_record_reference(site):
    db = duckdb.connect()
    for _, _, statements in MIGRATIONS:
        for statement in statements:
            db.execute(statement)
    sections = _sections(site / "reference" / "record" / "index.html")
    query = "SELECT table_name, column_name FROM information_schema.columns"
    columns = db.execute(query).fetchall()
    assert len({table for table, _ in columns}) >= 17
    for table, column in columns:
        assert table in sections, f"table {table}"
        assert column in _codes(sections[table]), f"{table}.{column}"


def test_every_variable_the_code_reads_is_in_the_environment_reference(site):
    page = html.unescape((site / "reference" / "environment" / "index.html").read_text())
    read = set()
    for package in ("dbpa", "storage", "flows", "tasks"):
        for file in (ROOT / package).rglob("*.py"):
            read |= set(re.findall(r"environ\.get\(\s*\"([A-Z0-9_]+)\"", file.read_text()))
    assert "DBPA_LOCAL_THREADS" in read
    assert sorted(name for name in read if name not in page) == []


def test_every_artifact_key_is_in_the_prefect_reference(site):
    page = html.unescape((site / "reference" / "prefect" / "index.html").read_text())
    suffixes = set()
    for package in ("flows", "tasks"):
        for file in (ROOT / package).rglob("*.py"):
            suffixes |= set(re.findall(r"artifact_key\([^,]+,\s*\"([a-z]+)\"\)", file.read_text()))
    assert len(suffixes) >= 6
    assert sorted(s for s in suffixes if f"<audit>-{s}</code>" not in page) == []
    assert "dbpa.drift.alarm" in page


def _titled_blocks(page: Path) -> dict[str, str]:
    """The fenced blocks of a page that name their file (```yaml title="x.yaml")."""
    found = re.findall(r'^```\w+ title="([^"]+)"\n(.*?)^```', page.read_text(), re.S | re.M)
    return dict(found)


GUIDES = sorted([*(DOCS / "tutorials").glob("*.md"), *(DOCS / "how-to").glob("*.md")])


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_config_a_guide_shows_is_valid(page, tmp_path):
    blocks = _titled_blocks(page)
    for name, text in blocks.items():
        (tmp_path / name).write_text(text)
    for name in blocks:
        if name.endswith(".yaml"):
            config, _ = load_audit(tmp_path / name)
            assert config.name


def test_the_guides_show_configs():
    configs = [n for p in GUIDES for n in _titled_blocks(p) if n.endswith(".yaml")]
    assert len(configs) >= 6


def test_the_config_reference_example_is_valid(site, tmp_path):
    section = _sections(site / "reference" / "config" / "index.html")["auditconfig"]
    block = re.search(r"<pre.*?</pre>", section, re.S).group(0)
    text = html.unescape(re.sub(r"<[^>]+>", "", block))
    (tmp_path / "minimal.yaml").write_text(text)
    config, _ = load_audit(tmp_path / "minimal.yaml")
    assert config.name == "minimal"


NEWCOMER_TASKS = {
    "audit my OpenAI model on my prompts": "how-to/providers.md",
    "fail CI when a control changes": "how-to/ci-gate.md",
    "schedule a nightly audit with an alert": "tutorials/scheduling.md",
    "show a perturbation does not matter": "how-to/equivalence.md",
    "read results in pandas": "how-to/record-sql.md",
}


def test_the_home_page_links_each_newcomer_task():
    home = (DOCS / "index.md").read_text()
    for task, page in NEWCOMER_TASKS.items():
        assert f"]({page})" in home, task


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines"


MAX_CLICKS = 3


def _content_links(page: Path) -> set[Path]:
    """The site's pages that ``page``'s own content (its article, not the theme's navigation)
    links to."""
    text = page.read_text(encoding="utf-8")
    article = re.search(r'<article class="md-content__inner[^"]*">(.*?)</article>', text, re.S)
    assert article, page
    found = set()
    for href in re.findall(r'href="([^"#?]*)', article.group(1)):
        if not href or ":" in href:
            continue
        target = (page.parent / href).resolve()
        target = target / "index.html" if target.is_dir() else target
        if target.suffix == ".html" and target.is_file():
            found.add(target)
    return found


def test_each_newcomer_task_is_at_most_three_clicks_from_the_home_page(site):
    """Through the links of the pages' content alone (the sidebar links every page once)."""
    home = (site / "index.html").resolve()
    clicks, frontier = {home: 0}, [home]
    for depth in range(1, MAX_CLICKS + 1):
        frontier = [t for p in frontier for t in _content_links(p) if t not in clicks]
        clicks.update({t: depth for t in frontier if t not in clicks})
    for task, source in NEWCOMER_TASKS.items():
        built = (site / source.removesuffix(".md") / "index.html").resolve()
        assert built in clicks, f"{task}: {source} is more than {MAX_CLICKS} clicks from home"
