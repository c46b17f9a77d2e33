"""A connector's resources and prompts on the Connectors page, in a real browser (Debian's
Chromium through Playwright) at phone and desktop width, against a real `skald serve`
and a legacy HTTP+SSE MCP server (tests/mcp_servers/rich_server.py): the card lists the
resources and templates and opens one (text, picture), and a prompt filled in lands
in the chat composer.

Launch flags, the skip rule, the console and CSP watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from connector_support import simple_feed
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from mcp_support import rich_http
from ui_support import (
    PLAYWRIGHT_MISSING,
    Watch,
    browser_fixture,  # noqa: F401
    open_context,
    sign_in,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect


@pytest.mark.timeout(180)
@pytest.mark.parametrize("width", [375, 1280])
def test_the_card_lists_resources_and_a_prompt_goes_into_the_composer(
    width: int, tmp_path: Path, browser: Browser
) -> None:
    with rich_http("sse") as url:
        feed = simple_feed(
            tmp_path / "feed",
            ("notes",),
            notes={"scope": "personal", "transport": "http", "url": url},
        )
        srv = ServerProcess(tmp_path)
        srv.data.mkdir(parents=True, exist_ok=True)
        (srv.data / "config.toml").write_text(f'[connectors]\nfeed = "{feed}"\n')
        srv.create_admin()
        srv.start()
        watch = Watch()
        ctx = open_context(browser, srv, viewport={"width": width, "height": 900}, timeout=20_000)
        try:
            admin = Api(srv.url)
            admin.login(ADMIN, ADMIN_PW)
            assert admin.post("/api/marketplace/notes/install", json={}).status_code in (200, 201)
            page = watch.attach("admin", ctx.new_page())
            sign_in(page, ADMIN, ADMIN_PW)
            page.goto("/#/connectors")
            card = page.locator('[data-testid="connector"][data-name="notes"]')
            card.get_by_test_id("connector-toggle").click()
            expect(card.get_by_test_id("connector-state")).to_have_text("Running", timeout=60_000)
            resources = card.get_by_test_id("connector-resources")
            resources.locator("summary").click()
            expect(resources.locator('[data-uri="note://shopping"]')).to_contain_text(
                "Shopping list"
            )
            expect(resources.locator('[data-uri="note://{name}"]')).to_be_visible()
            # A listed resource opens on the page: its text, and a picture as a picture.
            shopping = resources.locator('[data-uri="note://shopping"]')
            shopping.get_by_test_id("connector-resource-open").click()
            expect(shopping.get_by_test_id("connector-resource-content")).to_have_text("milk, eggs")
            logo = resources.locator('[data-uri="file:///logo.png"]')
            logo.get_by_test_id("connector-resource-open").click()
            image = logo.get_by_test_id("connector-resource-content").locator("img")
            expect(image).to_be_visible()
            assert image.evaluate("img => img.complete && img.naturalWidth") == 2
            prompts = card.get_by_test_id("connector-prompts")
            prompts.locator("summary").click()
            greet = prompts.locator('[data-prompt="greet"]')
            greet.locator('[data-arg="name"]').fill("Ada")
            greet.get_by_test_id("connector-prompt-use").click()
            composer = page.locator("#chat-input")
            expect(composer).to_have_value("Say hello to Ada in Italian.")
            assert not watch.problems, watch.problems
            assert not watch.csp_violations()
        finally:
            ctx.close()
            srv.close()
