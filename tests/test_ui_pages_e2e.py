"""A plugin's page in a real browser: Debian's Chromium driven by Playwright against a
real `skald serve` with the sample plugin (`tests/plugins/sample_plugin.py`) loaded.

The navigation comes from `GET /api/pages`: the plugin's pages (guarded by its
capability `sample.widgets`) are absent for a member whose role lacks it, and typing
their address shows "not found"; once the role holds it, the entries appear after the
built-in ones, titled by their key's last segment (no translation), the page's ES
module (served by the plugin's own route) renders through the app's API client, and a
module that throws shows a clear "could not be loaded" message instead of a blank page.

Launch flags, the skip rule, the console and CSP watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from harness import ServerProcess
from ui_support import PLAYWRIGHT_MISSING, Watch, api_as, server_fixture, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

TESTS = Path(__file__).resolve().parent
USER, USER_PW = "bea", "bea's rather long password"
CONFIG = '[plugins]\nmodules = ["plugins.sample_plugin"]\n'
PATH = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
# The boot-time "who am I?" before a login, and the plugin's module fetched without
# the capability (403) are the only failed requests expected.
EXPECTED_STATUS = re.compile(r"status of 40[13] \(")


class PagesWatch(Watch):
    @staticmethod
    def expected(text: str, url: str) -> bool:
        return bool(EXPECTED_STATUS.search(text))


server = server_fixture((USER, USER_PW), config=CONFIG, PYTHONPATH=PATH)


@pytest.mark.timeout(120)
def test_a_plugin_page_is_in_the_navigation_only_for_a_role_with_its_capability(
    server: ServerProcess, browser: Browser
) -> None:
    with watched_page(browser, server, USER, USER_PW, prefix="pages", watch=PagesWatch()) as page:
        expect(page.get_by_test_id("nav-files")).to_be_visible()
        expect(page.get_by_test_id("nav-page-sample")).to_have_count(0)
        expect(page.get_by_test_id("nav-page-sample-broken")).to_have_count(0)
        page.goto("/#/sample")  # not listed for her: not found, never the plugin's page
        expect(page.get_by_test_id("not-found")).to_be_visible()
        expect(page.get_by_test_id("plugin-page")).to_have_count(0)
        page.goto("/#/admin/users")  # a built-in page she may not see
        expect(page.get_by_test_id("not-allowed")).to_be_visible()

        # The administrator grants the plugin's capability to her role.
        admin = api_as(server)
        role = admin.get("/api/roles").json()
        member = next(r for r in role if r["name"] == "member")
        caps = [*member["capabilities"], "sample.widgets"]
        r = admin.patch("/api/roles/member", json={"capabilities": caps})
        assert r.status_code == 200, r.text
        admin.close()

        page.goto("/#/")
        page.reload()
        expect(page.get_by_test_id("chat-page")).to_be_visible()
        entry = page.get_by_test_id("nav-page-sample")
        expect(entry).to_have_text("Widgets")
        # The server's order: the built-in pages (order < 100) first, then the plugin's.
        testids = page.locator("#sidebar .nav a").evaluate_all(
            "els => els.map(e => e.dataset.testid)"
        )
        assert testids == [
            "nav-home",
            "nav-inbox",
            "nav-overview",
            "nav-tasks",
            "nav-reports",
            "nav-system-agents",
            "nav-files",
            "nav-connectors",
            "nav-projects",
            "nav-skills",
            "nav-agents",
            "nav-profile",
            "nav-usage",
            "nav-requests",
            "nav-privacy",
            "nav-telegram",
            "nav-page-sample",
            "nav-page-sample-broken",
        ]
        entry.click()
        expect(page.get_by_test_id("plugin-page")).to_have_attribute("data-path", "/sample")
        expect(page.get_by_test_id("sample-page-text")).to_have_text("Hello, bea: 0 widgets")
        expect(page.get_by_test_id("plugin-page-error")).to_have_count(0)
        assert page.title() == "Widgets · Skald"

        page.get_by_test_id("nav-page-sample-broken").click()
        expect(page.get_by_test_id("plugin-page-error")).to_contain_text(
            "This page could not be loaded"
        )
        expect(page.get_by_test_id("sample-page-text")).to_have_count(0)
