"""``import dbpa``: cheap, and every name the README and the docs write after it resolves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WRITTEN = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_every_dbpa_stats_name_of_the_readme_and_docs_resolves_after_a_bare_import():
    text = "\n".join(page.read_text() for page in WRITTEN)
    names = sorted(set(re.findall(r"\bdbpa\.stats\.([A-Za-z_]\w*)", text)))
    assert len(names) > 10
    done = _fresh(f"import dbpa\nfor n in {names!r}:\n    getattr(dbpa.stats, n)\nprint('ok')")
    assert done.stdout.strip() == "ok", done.stderr


def test_a_bare_import_loads_no_subpackage_until_one_is_used():
    done = _fresh(
        "import sys, dbpa\n"
        "print('dbpa.stats' in sys.modules, 'dbpa.config' in sys.modules)\n"
        "dbpa.config.AuditConfig\n"
        "print('dbpa.config' in sys.modules)"
    )
    assert done.stdout.split() == ["False", "False", "True"], done.stderr


def test_an_unknown_name_is_an_attribute_error():
    import dbpa

    with pytest.raises(AttributeError, match="module 'dbpa' has no attribute 'nope'"):
        dbpa.nope  # noqa: B018
    with pytest.raises(AttributeError):
        dbpa._private  # noqa: B018


def test_the_report_package_leaves_matplotlib_to_the_figures_that_need_it():
    """Only the TPR-by-FPR, alignment, drift and evidence figures are drawn on matplotlib
    (``dbpa/report/_html.py``); its import costs about a second of every reporting process."""
    done = _fresh(
        "import sys, dbpa.report\n"
        "print('matplotlib' in sys.modules)\n"
        "from dbpa.report import _figures\n"
        "print('matplotlib' in sys.modules)"
    )
    assert done.stdout.split() == ["False", "True"], done.stderr
