"""Memory upkeep in Chromium against a real `skald serve`: mum's assistant wrote two notes
that disagree; the upkeep pass (started by "Run now", the fake provider as the model)
reports it; on a phone (375 px) in Italian she opens the report, accepts the suggested
change, is told it waits for her approval, and the request is in her Inbox while the
note is unchanged. dad, on a desktop in English, has no report. Launch flags, the skip
rule and the console/CSP watching are those of `test_ui_e2e.py`."""

from __future__ import annotations

import time

import pytest
from fake_llm import Call, FakeLLM
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from ui_support import PLAYWRIGHT_MISSING, SignedInWatch, api_as, server_fixture, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

PW = "a long family password"
DATES = "user-memory/dates.md"
SARA = "user-memory/sara.md"
server = server_fixture(("dad", PW))


def _week(server: ServerProcess, fake: FakeLLM) -> Api:
    mum = api_as(server)
    mum.add_model(fake.base_url_openai, "model-a")
    fake.script(
        "model-a",
        [
            [
                Call("write_file", {"path": SARA, "content": "Sara's birthday: 12 March\n"}),
                Call("write_file", {"path": DATES, "content": "- Sara's birthday: 14 March\n"}),
            ],
            "Noted.",
            [Call("read_file", {"path": SARA}), Call("read_file", {"path": DATES})],
            [
                Call(
                    "report_finding",
                    {
                        "kind": "contradiction",
                        "notes": [SARA, DATES],
                        "problem": "Two different dates for Sara's birthday.",
                        "suggestion": "Keep 12 March.",
                        "note": DATES,
                        "old_text": "14 March",
                        "new_text": "12 March",
                    },
                )
            ],
            "Reported 1 problem.",
        ],
    )
    assert mum.post("/api/chat", json={"text": "remember Sara's birthday"}).status_code == 200
    assert mum.post("/api/system-agents/memory-upkeep/run").status_code == 202
    deadline = time.monotonic() + 30
    while not mum.get("/api/reports").json():
        assert time.monotonic() < deadline, "no report"
        time.sleep(0.2)
    assert mum.patch("/api/auth/me", json={"locale": "it"}).status_code == 200
    return mum


@pytest.mark.timeout(180)
def test_a_member_accepts_a_suggested_change_and_it_waits_in_the_inbox(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    mum = _week(server, fake)
    watch = SignedInWatch()
    with watched_page(
        browser,
        server,
        ADMIN,
        ADMIN_PW,
        prefix="upkeep-mum",
        watch=watch,
        name="mum-375",
        locale="it-IT",
        viewport={"width": 375, "height": 800},
    ) as page:
        page.get_by_test_id("nav-toggle").click()  # the menu is a drawer on a phone
        page.get_by_test_id("nav-reports").click()
        item = page.get_by_test_id("report-item")
        expect(item).to_contain_text("Memory upkeep: 1 finding in your notes")
        expect(item).to_contain_text("Da Cura della memoria")  # "By <agent>" in Italian
        item.get_by_test_id("report-open").click()
        suggestion = page.get_by_test_id("suggestion")
        expect(suggestion).to_contain_text("Contraddizione")
        expect(suggestion).to_contain_text(DATES)
        suggestion.get_by_test_id("suggestion-accept").click()
        expect(page.get_by_test_id("suggestion-accepted")).to_contain_text("Da decidere")
    deadline = time.monotonic() + 20
    while not (items := mum.get("/api/inbox").json()):
        assert time.monotonic() < deadline, "no approval request"
        time.sleep(0.2)
    (request,) = items
    assert request["tool"] == "edit_file" and "12 March" in (request["preview"] or "")

    with watched_page(
        browser,
        server,
        "dad",
        PW,
        prefix="upkeep-dad",
        watch=watch,
        name="dad-1280",
        viewport={"width": 1280, "height": 800},
    ) as page:
        page.get_by_test_id("nav-reports").click()
        expect(page.get_by_test_id("reports-empty")).to_be_visible()
