"""Shared folders and projects in the browser (#26 item 7): Debian's Chromium driven by
Playwright against a real `skald serve`. The administrator makes a shared folder on its
page and grants Ada read-write; Ada sees it on the Files page and uploads a file into
it; Ada makes a project on the Projects page and opens her project chat. Run at 375 px
in Italian and at 1280 px in English (the two widths and both languages).

Launch flags, the skip rule (and its failure under `SKALD_CI`) and the console and CSP
watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    BOTH_WIDTHS,
    PLAYWRIGHT_MISSING,
    api_as,
    go,
    server_fixture,
    speaking,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, FilePayload, expect

PW = "ada's long password"

server = server_fixture(("ada", PW))


@pytest.mark.timeout(150)
@BOTH_WIDTHS
def test_a_shared_folder_granted_in_the_browser_takes_a_members_upload_and_a_project_chat_opens(
    server: ServerProcess, browser: Browser, width: int, lang: str
) -> None:
    for who, password in ((ADMIN, ADMIN_PW), ("ada", PW)):
        speaking(server, who, password, lang)
    viewport = {"width": width, "height": 800}
    with watched_scenario(
        browser, server, prefix=f"shared-{width}", timeout=15_000, viewport=viewport
    ) as scenario:
        mum = scenario.page(ADMIN, ADMIN_PW, name="admin")
        go(mum, "#/admin/shared-folders", "sf-page")
        mum.get_by_test_id("sf-name").fill("Family photos")
        mum.get_by_test_id("sf-description").fill("Holiday pictures")
        mum.get_by_test_id("sf-create").click()
        folder = mum.locator('[data-testid="sf-folder"][data-slug="family-photos"]')
        expect(folder).to_be_visible()
        folder.get_by_test_id("sf-member-user").select_option(label="ada")
        folder.get_by_test_id("sf-member-access").select_option("write")
        folder.get_by_test_id("sf-member-add").click()
        expect(
            folder.locator('[data-testid="sf-member"][data-user="ada"][data-access="write"]')
        ).to_be_visible()
        assert mum.evaluate("document.documentElement.scrollWidth") <= width

        ada = scenario.page("ada", PW)
        go(ada, "#/files?path=shared/family-photos", "files-listing")
        listing = ada.get_by_test_id("files-listing")
        expect(listing).to_have_attribute("data-path", "shared/family-photos")
        expect(listing).to_have_attribute("data-writable", "true")
        ada.get_by_test_id("files-upload-input").set_input_files(
            FilePayload(name="beach.txt", mimeType="text/plain", buffer=b"sunny")
        )
        expect(ada.locator('[data-testid="files-row"][data-name="beach.txt"]')).to_be_visible()
        assert ada.evaluate("document.documentElement.scrollWidth") <= width
        check = api_as(server, "ada", PW)
        r = check.get("/api/file", params={"path": "shared/family-photos/beach.txt"})
        assert r.status_code == 200 and r.text == "sunny"

        go(ada, "#/projects", "pj-page")
        ada.get_by_test_id("pj-new-name").fill("Kitchen")
        ada.get_by_test_id("pj-create").click()
        project = ada.locator('[data-testid="pj-project"][data-path="projects/ada/kitchen"]')
        expect(project).to_be_visible()
        assert ada.evaluate("document.documentElement.scrollWidth") <= width
        project.get_by_test_id("pj-chat").click()
        expect(ada.get_by_test_id("chat-page")).to_be_visible()
        mine = [
            c
            for c in check.get("/api/conversations").json()
            if c["agent_id"] == "project-coordinator"
        ]
        assert len(mine) == 1
        expect(ada.get_by_test_id("chat-page")).to_have_attribute(
            "data-conversation-id", mine[0]["id"]
        )
