"""Write one page per benchmark result file (mkdocs-gen-files), none typed by hand.

Run by ``mkdocs build``: every ``benchmarks/results/<suite>.json`` that ``python -m benchmarks
<suite>`` wrote becomes ``benchmarks/<suite>.md``, with what the suite measures (its module's
docstring), when, where and on which commit it was measured, its tables and its notes. A
file that lacks a required key fails the build, naming the file and the key; a page that is
not in ``mkdocs.yml``'s nav fails the strict build. A guide quotes a suite's figures with a
line ``<!-- figures: SUITE -->``: the build puts the suite's tables and findings there (a
suite without a result file fails it, naming the page).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import mkdocs_gen_files

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "benchmarks" / "results"
REQUIRED = ("suite", "quick", "date", "machine", "python", "numpy", "git", "command", "tables")
"""The keys a result file must have (``benchmarks/_results.py`` writes them)."""
MACHINE = ("cpu", "cores", "load_average_before", "load_average_after")
"""The keys its ``machine`` must have."""
FIGURES = re.compile(r"^<!-- figures: ([a-z_]+) -->$", re.M)
"""The line of a guide that the build replaces with a suite's figures."""


def _cell(value: object) -> str:
    """One Markdown table cell: floats to 4 significant digits, no newlines or bare pipes."""
    if isinstance(value, float):
        value = f"{value:.4g}"
    return " ".join(str(value).split()).replace("|", "\\|")


def _suite_doc(suite: str) -> str:
    """The docstring of the suite's module (read, not imported: a suite imports heavy things)."""
    source = (ROOT / "benchmarks" / "__main__.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    suites: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SUITES":
            suites = ast.literal_eval(node.value)
    module = suites.get(suite)
    if module is None:
        raise ValueError(f"benchmarks/results/{suite}.json: no suite {suite!r} in SUITES")
    path = ROOT / (module.replace(".", "/") + ".py")
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def check(content: dict[str, Any], name: str) -> None:
    """Raise ``ValueError`` naming the file and key when a result file lacks metadata or a
    table's row does not match its columns."""
    for key in REQUIRED:
        if key not in content:
            raise ValueError(f"{name}: no {key!r}")
    for key in MACHINE:
        if key not in content["machine"]:
            raise ValueError(f"{name}: no 'machine.{key}'")
    for key in ("commit", "dirty"):
        if key not in content["git"]:
            raise ValueError(f"{name}: no 'git.{key}'")
    if not content["tables"]:
        raise ValueError(f"{name}: no tables")
    for table in content["tables"]:
        for row in table["rows"]:
            if len(row) != len(table["columns"]):
                raise ValueError(f"{name}: a row of {table['title']!r} does not fit its columns")


def render(content: dict[str, Any]) -> str:
    """The Markdown page of one result file."""
    machine = content["machine"]
    git = content["git"]
    commit = "unknown" if git["commit"] is None else f"`{git['commit'][:12]}`"
    if git["dirty"]:
        changed = ", ".join(f"`{path}`" for path in git.get("changed", []))
        commit += (
            f" with uncommitted changes to {changed}" if changed else " with uncommitted changes"
        )
    size = "`--quick` sizes" if content["quick"] else "full sizes"
    lines = [
        f"# `{content['suite']}`",
        "",
        _suite_doc(content["suite"]).replace("``", "`"),
        "",
        "| measured | |",
        "|---|---|",
        f"| date (UTC) | {content['date']} |",
        f"| command | `{content['command']}` ({size}) |",
        f"| commit | {commit} |",
        f"| machine | {_cell(machine['cpu'])}, {machine['cores']} cores |",
        f"| load average | {machine['load_average_before']} before, "
        f"{machine['load_average_after']} after |",
        f"| Python, numpy | {content['python']}, {content['numpy']} |",
        "",
        "Generated from `benchmarks/results/"
        f"{content['suite']}.json`, which the command above wrote. Run it again to measure "
        "on your machine.",
        "",
    ]
    return "\n".join(lines + _tables(content))


def _tables(content: dict[str, Any]) -> list[str]:
    """The Markdown lines of a result file's tables and findings."""
    lines = []
    for table in content["tables"]:
        lines += [f"**{_cell(table['title'])}**", ""]
        lines += ["| " + " | ".join(_cell(c) for c in table["columns"]) + " |"]
        lines += ["|" + "---|" * len(table["columns"])]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table["rows"]]
        lines.append("")
    if content.get("notes"):
        lines += ["Findings printed by the run:", ""]
        lines += [f"- {_cell(note)}" for note in content["notes"]]
    return lines


def with_figures(text: str, page: str, depth: int) -> str:
    """``text`` of the guide ``page`` (``depth`` folders below the docs' root) with each
    ``<!-- figures: SUITE -->`` line replaced by the suite's tables, findings and a line on
    when and where they were measured, with a link to its page."""

    def figures(match: re.Match[str]) -> str:
        suite = match.group(1)
        path = RESULTS / f"{suite}.json"
        if not path.exists():
            raise ValueError(f"{page}: no benchmarks/results/{suite}.json for its figures")
        content = json.loads(path.read_text(encoding="utf-8"))
        check(content, f"benchmarks/results/{path.name}")
        machine = content["machine"]
        link = "../" * depth + f"benchmarks/{suite}.md"
        when = (
            f"Measured by `python -m benchmarks {suite}` on {content['date'][:10]}, "
            f"{_cell(machine['cpu'])}, {machine['cores']} cores, load average "
            f"{machine['load_average_before']} before and {machine['load_average_after']} "
            f"after ([the whole run]({link}))."
        )
        return "\n".join([*_tables(content), "", when])

    return FIGURES.sub(figures, text)


def pages() -> dict[str, str]:
    """Every result file's page, by its path in the site."""
    found = {}
    for path in sorted(RESULTS.glob("*.json")):
        content = json.loads(path.read_text(encoding="utf-8"))
        check(content, f"benchmarks/results/{path.name}")
        found[f"benchmarks/{path.stem}.md"] = render(content)
    return found


def guides() -> dict[str, str]:
    """Every page of ``docs/`` that quotes figures, with them, by its path in the site."""
    docs, found = ROOT / "docs", {}
    for path in sorted(docs.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if FIGURES.search(text):
            page = path.relative_to(docs).as_posix()
            found[page] = with_figures(text, page, page.count("/"))
    return found


if __name__ == "<run_path>":  # run by mkdocs-gen-files; importing it writes nothing
    for page, text in (pages() | guides()).items():
        with mkdocs_gen_files.open(page, "w") as file:
            file.write(text.rstrip("\n") + "\n")
