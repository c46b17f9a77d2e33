"""The Skills page in the browser (#26 item 7): Debian's Chromium driven by Playwright
against a real `skald serve`. A household skill (made by the server, as an
administrator's import would) and Ada's own are listed with their name and one line;
Ada opens a SKILL.md read-only, adds a skill of her own from a ZIP and deletes it; she
is offered no way to change the household's skills (her role lacks `skills.manage`).
Run at 375 px in Italian and at 1280 px in English.

Launch flags, the skip rule and the console and CSP watching are those of
`test_ui_e2e.py`.
"""

from __future__ import annotations

import io
import zipfile

import pytest
from harness import ServerProcess
from ui_support import BOTH_WIDTHS, PLAYWRIGHT_MISSING, go, server_fixture, speaking, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, FilePayload, expect

PW = "ada's long password"
WEEKLY = "# Weekly shop\nBuy what the list says, cheapest shop first.\n\n1. Read the list.\n"


server = server_fixture(("ada", PW))


def _zip(text: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("SKILL.md", text)
    return out.getvalue()


@pytest.mark.timeout(150)
@BOTH_WIDTHS
def test_the_skills_page_lists_both_trees_opens_a_skill_and_adds_and_deletes_ones_own(
    server: ServerProcess, browser: Browser, width: int, lang: str
) -> None:
    api = speaking(server, "ada", PW, lang)
    shared = server.data / "skills" / "shared" / "weekly-shop"
    shared.mkdir(parents=True)
    (shared / "SKILL.md").write_text(WEEKLY)
    viewport = {"width": width, "height": 800}
    with watched_page(
        browser, server, "ada", PW, prefix=f"skills-{width}", timeout=15_000, viewport=viewport
    ) as page:
        go(page, "#/skills", "sk-page")
        item = page.locator('[data-testid="sk-skill"][data-tree="shared"][data-id="weekly-shop"]')
        expect(item.get_by_test_id("sk-name")).to_have_text("Weekly shop")
        expect(item.get_by_test_id("sk-line")).to_have_text(
            "Buy what the list says, cheapest shop first."
        )
        expect(item.get_by_test_id("sk-delete")).to_have_count(0)  # no skills.manage
        expect(page.get_by_test_id("sk-new-tree")).to_have_count(0)
        item.get_by_test_id("sk-open").click()
        expect(item.get_by_test_id("sk-text")).to_contain_text("1. Read the list.")
        assert page.evaluate("document.documentElement.scrollWidth") <= width

        page.get_by_test_id("sk-new-id").fill("plants")
        page.get_by_test_id("sk-new-zip").set_input_files(
            FilePayload(
                name="plants.zip",
                mimeType="application/zip",
                buffer=_zip("# Watering\nWater the ferns on Sundays.\n"),
            )
        )
        page.get_by_test_id("sk-add").click()
        mine = page.locator('[data-testid="sk-skill"][data-tree="mine"][data-id="plants"]')
        expect(mine.get_by_test_id("sk-name")).to_have_text("Watering")
        assert [s["id"] for s in api.get("/api/skills").json() if s["tree"] == "mine"] == ["plants"]
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.once("dialog", lambda d: d.accept())
        mine.get_by_test_id("sk-delete").click()
        expect(mine).to_have_count(0)
        assert [s for s in api.get("/api/skills").json() if s["tree"] == "mine"] == []
