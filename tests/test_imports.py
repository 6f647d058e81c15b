"""The house: a package uses another package only through the names it exports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dbpa", "flows", "tasks", "storage")


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line name`` for every private module or name of another package that the
    module at ``path`` (in the tree at ``root``) imports."""
    here = ".".join(path.relative_to(root).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] not in PACKAGES:
                continue
            for i, part in enumerate(parts):
                owner = ".".join(parts[:i])
                if part.startswith("_") and not part.startswith("__"):
                    if owner != here and not here.startswith(owner + "."):
                        found.append(f"{path.relative_to(root)}:{node.lineno} {target}")
                    break
    return found


def test_no_package_imports_another_packages_private_modules_or_names():
    modules = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    assert len(modules) > 100
    assert [hit for path in modules for hit in private_imports(path)] == []


@pytest.mark.parametrize(
    ("source", "where", "expected"),
    [
        ("from dbpa.report._evidence import evidence_figure", "flows/x.py", 1),
        ("from flows import _record", "dbpa/launch/x.py", 1),
        ("import storage._core", "tasks/x.py", 1),
        ("from dbpa.report import evidence_figure", "flows/x.py", 0),
        ("from dbpa.report._evidence import evidence_figure", "dbpa/report/x.py", 0),
        ("from dbpa.stats._omega import omega", "dbpa/stats/x.py", 0),
    ],
)
def test_the_check_finds_a_private_import_of_another_package(tmp_path, source, where, expected):
    module = tmp_path / where
    module.parent.mkdir(parents=True)
    module.write_text(f"{source}\n", encoding="utf-8")
    assert len(private_imports(module, tmp_path)) == expected
