"""Supervision in a real browser (Debian's Chromium) against a real `skald serve`: on the
People page an administrator sets a child's date of birth and links a parent to them;
the child's profile then says, in their language, who looks after them and that they get
reports, not every message. At 375 px in English and at 1280 px in Italian.

Launch flags and the skip rule are those of tests/ui_support.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    chromium,
    login,
    open_context,
    report_failure,
)

from skald.store.people import age_on

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

PW = "a long family password"
NO_OVERFLOW = "() => document.documentElement.scrollWidth <= window.innerWidth"
CASES = [("en", 375, "Dad looks after you here"), ("it", 1280, "Dad si occupa di te qui")]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    srv.add_user("dad", PW, "member")
    srv.add_user("tim", PW, "children")
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("locale", "width", "line"), CASES, ids=[c[0] for c in CASES])
def test_an_admin_links_a_parent_to_a_child_and_the_childs_profile_says_so(
    server: ServerProcess, locale: str, width: int, line: str
) -> None:
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    users = {u["username"]: u for u in admin.get("/api/users").json()}
    assert admin.patch("/api/users/" + users["dad"]["id"], json={"display_name": "Dad"}).is_success
    for name in (ADMIN, "tim"):
        assert admin.patch("/api/users/" + users[name]["id"], json={"locale": locale}).is_success
    watch = SignedInWatch()
    with chromium() as browser:
        try:
            _admin_links(browser, server, watch, locale, width, users)
            _child_sees(browser, server, watch, locale, width, line)
        except Exception:
            report_failure(server, watch, f"people-{locale}")
            raise
    assert not watch.problems, watch.problems
    assert [
        (x["supervisor_id"], x["supervised_id"]) for x in admin.get("/api/people/links").json()
    ] == [(users["dad"]["id"], users["tim"]["id"])]


def _admin_links(
    browser: Browser,
    server: ServerProcess,
    watch: SignedInWatch,
    locale: str,
    width: int,
    users: dict[str, Any],
) -> None:
    context = open_context(browser, server, locale=locale, viewport={"width": width, "height": 800})
    page = watch.attach("admin", context.new_page())
    page.goto("/")
    login(page, ADMIN, ADMIN_PW)
    expect(page.get_by_test_id("chat-page")).to_be_visible()
    page.goto("/#/admin/users")
    row = page.locator('[data-testid="user-row"][data-username="tim"]')
    row.get_by_test_id("user-people").click()
    dialog = page.get_by_test_id("people-dialog")
    dialog.get_by_test_id("people-date-of-birth").fill("2016-05-01")
    dialog.get_by_test_id("people-sex").fill("boy")
    dialog.get_by_test_id("people-profile-save").click()
    expect(dialog.get_by_test_id("people-profile-saved")).to_be_visible()
    dialog.get_by_test_id("people-supervisor-select").select_option(users["dad"]["id"])
    dialog.get_by_test_id("people-supervisor-add").click()
    expect(dialog.get_by_test_id("people-supervisor")).to_have_attribute(
        "data-user-id", users["dad"]["id"]
    )
    assert page.evaluate(NO_OVERFLOW), "the People dialog is wider than the screen"
    dialog.get_by_test_id("people-dialog-done").click()
    expect(dialog).to_have_count(0)
    context.close()


def _child_sees(
    browser: Browser,
    server: ServerProcess,
    watch: SignedInWatch,
    locale: str,
    width: int,
    line: str,
) -> None:
    context = open_context(browser, server, locale=locale, viewport={"width": width, "height": 800})
    page = watch.attach("child", context.new_page())
    page.goto("/")
    login(page, "tim", PW)
    expect(page.get_by_test_id("chat-page")).to_be_visible()
    page.goto("/#/profile")
    expect(page.get_by_test_id("supervision-line")).to_contain_text(line)
    age = age_on(date(2016, 5, 1), date.today())
    assert page.evaluate(NO_OVERFLOW), "the profile is wider than the screen"
    expect(page.get_by_test_id("my-date-of-birth")).to_contain_text(str(age))
    context.close()
