"""The Marketplace in a real browser, on the default feed: a household sees the items in
its own language, and the MCP reference test server (`audience: developers`) only after
ticking "Show tools for developers".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household
from ui_support import PLAYWRIGHT_MISSING, SignedInWatch, open_context, report_failure, sign_in

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

# (language, the `time` item's name, the test server's name)
NAMES = {
    "en": ("Time and time zones", "MCP test server"),
    "it": ("Ora e fusi orari", "Server di prova MCP"),
    "fr": ("Heure et fuseaux horaires", "Serveur de test MCP"),
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path) as srv:
        yield srv


@pytest.mark.timeout(90)
def test_the_marketplace_speaks_the_members_language_and_keeps_the_test_server_for_developers(
    server: ServerProcess, browser: Browser
) -> None:
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    context = open_context(browser, server)
    watch = SignedInWatch()
    try:
        page = watch.attach("admin", context.new_page())
        sign_in(page, ADMIN, ADMIN_PW)
        for lang, (clock, tester) in NAMES.items():
            assert admin.patch("/api/auth/me", json={"locale": lang}).status_code == 200
            page.goto("/#/admin/marketplace")
            page.reload()
            names = page.get_by_test_id("market-name")
            expect(names.filter(has_text=clock)).to_have_count(1)
            expect(names).to_have_count(3)  # fetch, filesystem, time
            expect(names.filter(has_text=tester)).to_have_count(0)
            page.get_by_test_id("market-developers").check()
            expect(names.filter(has_text=tester)).to_have_count(1)
            item = page.locator('[data-testid="market-item"][data-folder="everything"]')
            expect(item.get_by_test_id("market-install")).to_be_visible()
        assert not watch.problems, watch.problems
    except BaseException:
        report_failure(server, watch, "marketplace")
        raise
    finally:
        context.close()
        admin.close()
