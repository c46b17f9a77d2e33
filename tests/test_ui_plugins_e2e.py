"""The example plugin from its wheel in a real browser (Debian's Chromium, Playwright)
against a real `skald serve`, in Italian: its page is in the navigation with its own
translations and shows what its route answers; the Plugins page lists it with a
health dot, and switching it off there takes its page away at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from plugin_wheels import build_example
from ui_support import PLAYWRIGHT_MISSING, speaking, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    out = srv.cli("plugin", "install", str(build_example(tmp_path / "wheels")))
    assert out.returncode == 0, out.stderr
    srv.start()
    yield srv
    srv.close()


@pytest.mark.timeout(150)
def test_the_example_plugins_page_shows_in_italian_and_goes_when_switched_off(
    server: ServerProcess, browser: Browser
) -> None:
    speaking(server, ADMIN, ADMIN_PW, "it").close()
    with watched_page(browser, server, ADMIN, ADMIN_PW, prefix="plugins", locale="it-IT") as page:
        entry = page.get_by_test_id("nav-page-example")
        expect(entry).to_have_text("Esempio")
        entry.click()
        expect(page.get_by_test_id("example-motto")).to_have_text(
            "Il nostro motto: Many hands make light work"
        )
        page.get_by_test_id("nav-admin-plugins").click()
        card = page.locator('[data-testid="plugin-card"][data-plugin="example"]')
        expect(card.get_by_test_id("plugin-status")).to_have_attribute("data-status", "ok")
        expect(card.get_by_test_id("plugin-status")).to_contain_text("Funziona")
        card.get_by_test_id("plugin-enabled").click()
        expect(card.get_by_test_id("plugin-status")).to_have_attribute("data-status", "off")
        expect(card.get_by_test_id("plugin-status")).to_contain_text("Spento")
        page.reload()
        expect(page.get_by_test_id("nav-admin-plugins")).to_be_visible()
        expect(page.get_by_test_id("nav-page-example")).to_have_count(0)
