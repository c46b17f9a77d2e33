"""get_outline has its own chat card: the outline as a list, each entry with its line
range, in the member's language (a real `skald serve`, the fake provider, Chromium)."""

from __future__ import annotations

import pytest
from fake_llm import Call, FakeLLM, ToolCalls
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import PLAYWRIGHT_MISSING, api_as, server_fixture, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

PLAN = "# Trip\nintro\n## Packing\nsocks\n## Tickets\ntrain\n"
server = server_fixture(model="fake-main")


@pytest.mark.timeout(120)
def test_the_outline_card_lists_each_heading_with_its_line_range(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    fake.script(
        "fake-main",
        [
            ToolCalls([Call("write_file", {"path": "trip.md", "content": PLAN})]),
            ToolCalls([Call("get_outline", {"path": "trip.md"})]),
            "Three sections.",
        ],
    )
    admin = api_as(server)
    try:
        with watched_page(browser, server, ADMIN, ADMIN_PW, prefix="outline") as page:
            page.get_by_test_id("chat-input").fill("Outline my trip plan")
            page.get_by_test_id("chat-send").click()
            card = page.locator('[data-testid="tool-card"][data-tool="get_outline"]')
            entries = card.get_by_test_id("tool-outline-entry")
            expect(entries).to_have_count(3)
            expect(entries.nth(0)).to_contain_text("# Trip")
            expect(entries.nth(0)).to_contain_text("lines 1–6")
            expect(entries.nth(2)).to_contain_text("## Tickets")
            expect(entries.nth(2)).to_contain_text("lines 5–6")
            assert admin.patch("/api/auth/me", json={"locale": "it"}).status_code == 200
            page.reload()
            expect(card.get_by_test_id("tool-name")).to_have_text("Schema di un file")
            expect(card.get_by_test_id("tool-outline-entry").nth(1)).to_contain_text("righe 3–4")
    finally:
        admin.close()
