"""The HTML report in headless Chromium: hostile outputs show as text and run nothing but
the report's own script.

Uses Debian's chromium (``apt-get install -y chromium``) through the playwright
package; no browser is ever downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser

from dbpa.report import CONTENT_SECURITY_POLICY, gather, render_html
from storage import Store
from tests.report.conftest import (
    HOSTILE_FAMILY,
    HOSTILE_ID,
    PAYLOADS,
    REPORT_SCRIPT,
)
from tests.support.chromium import NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def hostile_page(hostile_run) -> str:
    with Store(hostile_run.db, read_only=True) as store:
        return render_html(gather(store, hostile_run.run_id))


@pytest.mark.parametrize("csp", [True, False], ids=["with-csp", "escaping-alone"])
def test_hostile_outputs_show_as_text_and_run_nothing(
    browser: Browser, hostile_page: str, tmp_path: Path, csp: bool
):
    meta = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
    page_html = hostile_page
    if not csp:  # without the policy, only the escaping stands between a payload and the page
        page_html = page_html.replace(meta.replace("'", "&#39;"), "")
        assert 'http-equiv="Content-Security-Policy"' not in page_html
    path = tmp_path / "report.html"
    path.write_text(page_html, encoding="utf-8")

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    requests: list[str] = []
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri(), wait_until="load")
    for summary in page.locator("details > summary").all():
        summary.click()  # show every sample output and prompt
    page.get_by_text("click me").first.click()
    page.select_option("#method", "bonferroni")  # the script rewrites decisions and the tally
    page.fill("#alpha", "0.9")
    page.locator("table.results th").nth(1).click()
    page.fill("#filter-text", "<script")
    page.fill("#filter-text", "")
    page.wait_for_timeout(200)

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []
    assert page.locator("svg, iframe, object, embed").count() == 0
    scripts = page.locator("script")  # only the report's own, and it ran (its controls show)
    assert scripts.count() == 1
    assert scripts.first.evaluate("s => s.text") == REPORT_SCRIPT
    assert page.locator("#controls").is_visible()
    assert errors == []
    assert page.locator("[onerror], [onload], a[href^='javascript']").count() == 0
    assert page.url == path.as_uri()
    assert all(url.startswith(("file://", "data:")) for url in requests), requests
    for text in (*PAYLOADS, HOSTILE_ID, HOSTILE_FAMILY):
        assert page.get_by_text(text, exact=False).first.is_visible(), text
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280, "long outputs must wrap, not widen the page"

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    page.close()
