"""A plugin's own web files in a real browser: Debian's Chromium driven by Playwright
against a real `skald serve` with the sample plugin (`tests/plugins/sample_plugin.py`).

The plugin ships, in `tests/plugins/sample_plugin_web/`, a page module and an icon
(served under `/plugins/sample/`) and the page's translations (merged into the app's
`/i18n/<locale>.json`). An administrator who speaks Italian sees the entry titled in
Italian with the plugin's icon loaded, and the page says its text in Italian.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import PLAYWRIGHT_MISSING, server_fixture, speaking, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

TESTS = Path(__file__).resolve().parent
CONFIG = '[plugins]\nmodules = ["plugins.sample_plugin"]\n'
PATH = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
server = server_fixture(config=CONFIG, PYTHONPATH=PATH)


@pytest.mark.timeout(120)
def test_a_plugin_page_shows_in_italian_with_its_own_translations_and_icon(
    server: ServerProcess, browser: Browser
) -> None:
    speaking(server, ADMIN, ADMIN_PW, "it").close()
    with watched_page(
        browser, server, ADMIN, ADMIN_PW, prefix="plugin-web", locale="it-IT"
    ) as page:
        entry = page.get_by_test_id("nav-page-sample-hello")
        expect(entry).to_have_text("Pagina di saluto")
        icon = entry.locator("img")
        expect(icon).to_have_attribute("src", f"{server.url}/plugins/sample/icon.svg")
        page.wait_for_function(
            "img => img.complete && img.naturalWidth > 0", arg=icon.element_handle()
        )
        entry.click()
        expect(page.get_by_test_id("sample-hello-text")).to_have_text(
            f"Ciao, {ADMIN}: questa pagina è arrivata con il suo plugin."
        )
        shown = page.get_by_test_id("sample-hello-icon")
        page.wait_for_function(
            "img => img.complete && img.naturalWidth > 0", arg=shown.element_handle()
        )
        assert page.title() == "Pagina di saluto · Skald"
        # A built-in page still comes from its feature's folder, in Italian too.
        page.get_by_test_id("nav-files").click()
        expect(page.get_by_test_id("files-page")).to_be_visible()
