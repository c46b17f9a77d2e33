"""A parent reads the night's report in Chromium (Debian's, driven by Playwright)
against a real `skald serve`: the child's worrying message, the review run by the
admin's "Run now" with the fake provider as the model; mum on a phone (375 px) in
Italian, dad on a desktop (1280 px) in English. Each sees the unread count on the
Reports entry and on the Overview, opens the report, reads it, and the count is gone
from both; each reader's count is their own. The child's Profile says for whom and when their conversations were
read. Launch flags, the skip rule and the console/CSP watching are those of
`test_ui_e2e.py`."""

from __future__ import annotations

import time

import pytest
from fake_llm import FakeLLM
from harness import ADMIN, ADMIN_PW, ServerProcess
from review_support import REPORT, WORRY
from ui_support import (
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    api_as,
    server_fixture,
    speaking,
    watched_page,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

PW = "a long family password"


server = server_fixture(("dad", PW), others=(("tim", PW, "children"),))


def _night(server: ServerProcess, fake: FakeLLM) -> None:
    mum = api_as(server)
    mum.add_model(fake.base_url_openai, "model-a")
    ids = {u["username"]: u["id"] for u in mum.get("/api/users").json()}
    for parent in (ADMIN, "dad"):
        assert (
            mum.request("PUT", f"/api/people/links/{ids[parent]}/{ids['tim']}").status_code == 200
        )
    fake.script("model-a", ["That sounds hard.", REPORT])
    tim = api_as(server, "tim", PW)
    assert tim.post("/api/chat", json={"text": WORRY}).status_code == 200
    time.sleep(1.1)  # past the second the message was stored in
    assert mum.post("/api/system-agents/conversation-review/run").status_code == 202
    deadline = time.monotonic() + 30
    while not mum.get("/api/reports").json():
        assert time.monotonic() < deadline, "no report"
        time.sleep(0.2)
    speaking(server, "dad", PW, "en")
    assert mum.patch("/api/auth/me", json={"locale": "it"}).status_code == 200


@pytest.mark.timeout(180)
def test_a_parent_opens_reports_reads_the_report_and_the_unread_count_clears(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    _night(server, fake)
    watch = SignedInWatch()
    for who, password, width, locale, title, line in (
        (ADMIN, ADMIN_PW, 375, "it-IT", "Rapporti", "Rapporti da leggere: 1"),
        ("dad", PW, 1280, "en-US", "Reports", "Unread reports: 1"),
    ):
        with watched_page(
            browser,
            server,
            who,
            password,
            prefix=f"reports-{who}",
            watch=watch,
            name=f"{who}-{width}",
            locale=locale,
            viewport={"width": width, "height": 800},
        ) as page:
            # The Overview says it too, and links to the Reports page (issue 30).
            page.goto(f"{server.url}/#/overview")
            expect(page.get_by_test_id("dash-reports")).to_have_attribute("data-count", "1")
            expect(page.get_by_test_id("dash-reports")).to_have_text(line)
            expect(page.get_by_test_id("dash-reports").locator("a")).to_have_attribute(
                "href", "#/reports"
            )
            entry = page.get_by_test_id("nav-reports")
            expect(entry).to_contain_text(title)
            expect(page.get_by_test_id("nav-reports-count")).to_have_attribute("data-count", "1")
            if width < 860:  # the menu is a drawer on a phone
                page.get_by_test_id("nav-toggle").click()
            entry.click()
            item = page.locator('[data-testid="report-item"][data-read="false"]')
            expect(item).to_contain_text("Tim felt nobody would notice him")
            item.get_by_test_id("report-open").click()
            expect(page.get_by_test_id("report-title")).to_have_text(
                "Tim felt nobody would notice him"
            )
            expect(page.get_by_test_id("report")).to_contain_text("A talk soon would help.")
            expect(page.get_by_test_id("nav-reports-count")).to_have_count(0)
            page.get_by_test_id("report-back").click()
            expect(page.locator('[data-testid="report-item"][data-read="true"]')).to_have_count(1)
            # Read: the Overview's line is gone (the rest of what waits is still there).
            page.goto(f"{server.url}/#/overview")
            expect(page.get_by_test_id("dash-waiting")).to_be_visible()
            expect(page.get_by_test_id("dash-reports")).to_have_count(0)

    # The child's profile says, in plain words, for whom and when they were read.
    with watched_page(
        browser,
        server,
        "tim",
        PW,
        prefix="reports-tim",
        watch=watch,
        viewport={"width": 375, "height": 800},
    ) as page:
        page.get_by_test_id("nav-profile").click()
        expect(page.get_by_test_id("review-reviewed-for")).to_contain_text(
            "Your conversations are reviewed each night for mum, dad"
        )
        expect(page.get_by_test_id("review-audit-line")).to_contain_text(
            "Your conversations from the beginning to"
        )
        expect(page.get_by_test_id("review-audit-line")).to_contain_text("reviewed for mum")
