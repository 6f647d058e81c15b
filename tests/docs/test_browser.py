"""Every page of the site loads in headless Chromium with no console error and no request
beyond the site's own address, and the search (in the page, no service) finds what a
newcomer types."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.chromium import NEEDS_CHROMIUM

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("docs"),
    NEEDS_CHROMIUM,
]

SEARCHES = {
    "drift alarm": "Scheduled audits and a drift alarm",
    "OpenAI": "Hosted providers and keys",
    "prompt set": "A prompt set from a CSV",
}
"""What a newcomer types into the search box, and a page the results must offer."""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (the search runs in a web worker, which a
    file:// page may not start)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_every_page_loads_without_an_error_or_a_foreign_request(site, served, browser):
    pages = sorted(p.parent.relative_to(site) for p in site.rglob("index.html"))
    assert len(pages) >= 30
    page = browser.new_page()
    errors: list[str] = []
    foreign: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda r: None if r.url.startswith(served) else foreign.append(r.url))
    for path in pages:
        page.goto(f"{served}/{path.as_posix()}/".replace("/./", "/"), wait_until="load")
        assert page.locator("h1").count() >= 1, path
    assert errors == []
    assert foreign == []


@pytest.mark.parametrize("query", SEARCHES)
def test_the_search_finds_what_a_newcomer_types(served, browser, query):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{served}/", wait_until="load")
    page.keyboard.press("/")  # Material's key for the search box
    page.keyboard.type(query)
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=30_000)
    titles = " | ".join(results.all_inner_texts())
    assert SEARCHES[query] in titles, titles
