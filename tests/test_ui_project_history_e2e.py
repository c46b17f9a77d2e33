"""A project's history in the browser (#26 items 3 and 7): Debian's Chromium driven by
Playwright against a real `skald serve`. Ada turns the history on with the switch on her
project, saves a file twice, opens the history, opens the first version's change (its
diff shows) and restores the file from it. Run at 375 px in Italian and at 1280 px in
English; console and CSP watching as in `test_ui_e2e.py`.
"""

from __future__ import annotations

import pytest
from harness import ServerProcess
from ui_support import BOTH_WIDTHS, PLAYWRIGHT_MISSING, go, server_fixture, speaking, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

PW = "ada's long password"
NOTES = "projects/ada/kitchen/notes.md"


server = server_fixture(("ada", PW))


@pytest.mark.timeout(150)
@BOTH_WIDTHS
def test_the_owner_turns_history_on_opens_a_change_and_restores_a_file(
    server: ServerProcess, browser: Browser, width: int, lang: str
) -> None:
    api = speaking(server, "ada", PW, lang)
    assert api.post("/api/projects", json={"name": "Kitchen"}).status_code == 201
    viewport = {"width": width, "height": 800}
    with watched_page(
        browser, server, "ada", PW, prefix=f"history-{width}", timeout=15_000, viewport=viewport
    ) as page:
        go(page, "#/projects", "pj-page")
        project = page.locator('[data-testid="pj-project"][data-path="projects/ada/kitchen"]')
        project.get_by_test_id("pj-history-switch").click()
        expect(project.get_by_test_id("pj-history-show")).to_be_visible()
        for text in ("tiles: white\n", "tiles: green\n"):
            assert api.post("/api/file", json={"path": NOTES, "content": text}).status_code in (
                200,
                201,
            )
        project.get_by_test_id("pj-history-show").click()
        commits = project.get_by_test_id("pj-commit")
        expect(commits).to_have_count(3)  # turned on, then two saves
        commits.nth(1).get_by_test_id("pj-commit-open").click()
        expect(project.get_by_test_id("pj-diff")).to_contain_text("+tiles: white")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        project.locator('[data-testid="pj-history-file"][data-path="notes.md"]').get_by_test_id(
            "pj-history-restore"
        ).click()
        expect(commits).to_have_count(4)
        assert api.get("/api/file", params={"path": NOTES}).text == "tiles: white\n"
