"""The pictures of the README and the site: every one shown exists, is a PNG that
``python -m docs.screenshots`` makes, and stays small."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
MAX_BYTES = 300_000
PNG = b"\x89PNG\r\n\x1a\n"


def _shown(page: Path) -> list[Path]:
    """The images a Markdown page shows (``![...](path)``), resolved from the page."""
    links = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text(encoding="utf-8"))
    return [(page.parent / link).resolve() for link in links if "://" not in link]


def test_the_readme_shows_the_report():
    assert ROOT / "docs" / "images" / "report.png" in _shown(ROOT / "README.md")


def test_every_picture_shown_exists_and_is_a_small_png():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    shown = {image for page in pages for image in _shown(page)}
    assert shown
    for image in shown:
        assert image.is_file(), image
        assert image.read_bytes()[:8] == PNG, image
        assert image.stat().st_size < MAX_BYTES, (image, image.stat().st_size)
    made = set((ROOT / "docs" / "images").glob("*.png"))
    assert made <= shown, f"pictures no page shows: {sorted(made - shown)}"
