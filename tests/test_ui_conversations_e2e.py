"""The conversation list of the chat, in Chromium against a real `skald serve`: tabs are
the open conversations only; the list holds every conversation, newest first, with when
it was last used and the open ones marked; a conversation is renamed from the list (a
phone has no double-click) and its tab follows; the search finds it by its new name; a
closed one picked from the list becomes a tab again. At 375 px (it, fr) and 1280 px
(en), never wider than the screen.

Launch flags, the skip rule and the CSP watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import pytest
from harness import Api, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    case_page,
    server_fixture,
    shot,
    speaking,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Locator, Page, expect

MEMBER, MEMBER_PW = "ada", "ada's long password"
NO_OVERFLOW = "() => document.documentElement.scrollWidth <= window.innerWidth"
CASES = [(375, "it", "aperta"), (375, "fr", "ouverte"), (1280, "en", "open")]

server = server_fixture()


def _seed(api: Api, lang: str) -> dict[str, str]:
    """Three conversations: soup (closed), garden and holiday (tabs)."""
    ids = {}
    for name in ("soup", "garden", "holiday"):
        r = api.post("/api/conversations", json={})
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]
        body: dict[str, object] = {"title": f"{name} {lang}"}
        if name == "soup":
            body["open"] = False
        assert api.patch(f"/api/conversations/{ids[name]}", json=body).status_code == 200
    return ids


def _row(page: Page, conversation_id: str) -> Locator:
    return page.locator(
        f'[data-testid="chat-history-item"][data-conversation-id="{conversation_id}"]'
    )


def _check(page: Page, api: Api, ids: dict[str, str], lang: str, open_word: str) -> None:
    tabs = page.get_by_test_id("chat-tab")
    expect(tabs).to_have_count(2)  # the open ones only
    expect(
        page.locator(f'[data-testid="chat-tab"][data-conversation-id="{ids["soup"]}"]')
    ).to_have_count(0)
    page.get_by_test_id("chat-history-toggle").click()
    rows = page.get_by_test_id("chat-history-item")
    expect(rows).to_have_count(3)
    # Newest first (times are to the second: ties in any order), the open ones marked,
    # each with when it was last used.
    used = {c["id"]: c["updated_at"] for c in api.get("/api/conversations").json()}
    order = [str(rows.nth(i).get_attribute("data-conversation-id")) for i in range(3)]
    assert set(order) == set(ids.values())
    assert [used[i] for i in order] == sorted(used.values(), reverse=True), order
    expect(_row(page, ids["garden"]).get_by_test_id("chat-history-open")).to_have_text(open_word)
    expect(_row(page, ids["soup"]).get_by_test_id("chat-history-open")).to_have_count(0)
    expect(_row(page, ids["soup"])).to_contain_text(":")  # used today: the time
    assert page.evaluate(NO_OVERFLOW), lang

    # Rename an open one from the list: its tab follows.
    _row(page, ids["garden"]).get_by_test_id("chat-history-rename").click()
    field = page.get_by_test_id("chat-history-rename-input")
    field.fill(f"vegetables {lang}")
    field.press("Enter")
    expect(_row(page, ids["garden"])).to_contain_text(f"vegetables {lang}")
    tab = page.locator(f'[data-testid="chat-tab"][data-conversation-id="{ids["garden"]}"]')
    expect(tab).to_contain_text(f"vegetables {lang}")
    titles = {c["id"]: c["title"] for c in api.get("/api/conversations").json()}
    assert titles[ids["garden"]] == f"vegetables {lang}"
    shot(page, f"chat-conversations-{page.viewport_size['width']}-{lang}")  # type: ignore[index]

    # The search finds it by the new name; a closed one picked becomes a tab.
    page.get_by_test_id("chat-search").fill(f"vegetables {lang}")
    expect(page.get_by_test_id("chat-search-hit")).to_have_count(1)
    page.get_by_test_id("chat-search").fill("")
    _row(page, ids["soup"]).get_by_test_id("chat-history-pick").click()
    expect(tabs).to_have_count(3)
    soup = page.locator(f'[data-testid="chat-tab"][data-conversation-id="{ids["soup"]}"]')
    expect(soup).to_have_attribute("data-active", "true")
    assert page.evaluate(NO_OVERFLOW), lang


@pytest.mark.timeout(240)
def test_the_conversation_list_has_dates_search_and_rename_on_a_phone_and_a_desktop(
    server: ServerProcess, browser: Browser
) -> None:
    watch = SignedInWatch()
    for width, lang, open_word in CASES:
        member = f"{MEMBER}-{lang}"  # each case a member of its own: no conversations yet
        server.add_user(member, MEMBER_PW)
        api = speaking(server, member, MEMBER_PW, lang)
        ids = _seed(api, lang)
        try:
            with case_page(
                browser, server, member, MEMBER_PW, "conversations", watch, lang, width, 780
            ) as page:
                _check(page, api, ids, lang, open_word)
        finally:
            api.close()
