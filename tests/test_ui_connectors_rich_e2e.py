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
from mcp_support import rich_http
from ui_support import (
    PLAYWRIGHT_MISSING,
    connector_admin_page,
    feed_household,
    install_connector,
    switch_on,
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
        with feed_household(tmp_path, feed) as srv:
            install_connector(srv, "notes")
            with connector_admin_page(browser, srv, f"connectors-rich-{width}", width, 900) as page:
                card = switch_on(page, "notes")
                resources = card.get_by_test_id("connector-resources")
                resources.locator("summary").click()
                expect(resources.locator('[data-uri="note://shopping"]')).to_contain_text(
                    "Shopping list"
                )
                expect(resources.locator('[data-uri="note://{name}"]')).to_be_visible()
                # A listed resource opens on the page: its text, and a picture as a picture.
                shopping = resources.locator('[data-uri="note://shopping"]')
                shopping.get_by_test_id("connector-resource-open").click()
                expect(shopping.get_by_test_id("connector-resource-content")).to_have_text(
                    "milk, eggs"
                )
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
