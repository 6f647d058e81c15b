"""Debian's Chromium, driven through the playwright package (no browser is ever downloaded):
the path, the flags and a ``browser`` fixture for one test module (mark it ``NEEDS_CHROMIUM``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's chromium (``apt-get install -y chromium``; ``.ci/setup`` installs it)."""
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Headless, and none of Chromium's own connections (refused here, many at a time)."""
NEEDS_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.exists() and os.environ.get("CI") != "true",
    reason="Debian's chromium is not at /usr/bin/chromium (apt-get install -y chromium)",
)
"""Skipped on a machine without Debian's chromium, never in CI (where ``.ci/setup`` installs it)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium for one test module (a playwright ``Browser``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
