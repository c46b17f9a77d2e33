"""Supervision in a real browser (Debian's Chromium) against a real `skald serve`: on the
People page an administrator sets a child's date of birth and links a parent to them;
the child's profile then says, in their language, who looks after them and that they get
reports, not every message. At 375 px in English and at 1280 px in Italian.

Launch flags and the skip rule are those of tests/ui_support.py.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    Scenario,
    api_as,
    chromium,
    server_fixture,
    watched_scenario,
)

from skald.store.people import age_on

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import expect

PW = "a long family password"
NO_OVERFLOW = "() => document.documentElement.scrollWidth <= window.innerWidth"
CASES = [("en", 375, "Dad looks after you here"), ("it", 1280, "Dad si occupa di te qui")]

server = server_fixture(("dad", PW), others=(("tim", PW, "children"),))


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("locale", "width", "line"), CASES, ids=[c[0] for c in CASES])
def test_an_admin_links_a_parent_to_a_child_and_the_childs_profile_says_so(
    server: ServerProcess, locale: str, width: int, line: str
) -> None:
    admin = api_as(server)
    users = {u["username"]: u for u in admin.get("/api/users").json()}
    assert admin.patch("/api/users/" + users["dad"]["id"], json={"display_name": "Dad"}).is_success
    for name in (ADMIN, "tim"):
        assert admin.patch("/api/users/" + users[name]["id"], json={"locale": locale}).is_success
    viewport = {"width": width, "height": 800}
    with (
        chromium() as browser,
        watched_scenario(
            browser, server, prefix=f"people-{locale}", locale=locale, viewport=viewport
        ) as scenario,
    ):
        _admin_links(scenario, users)
        _child_sees(scenario, line)
    assert [
        (x["supervisor_id"], x["supervised_id"]) for x in admin.get("/api/people/links").json()
    ] == [(users["dad"]["id"], users["tim"]["id"])]


def _admin_links(scenario: Scenario, users: dict[str, Any]) -> None:
    page = scenario.page(ADMIN, ADMIN_PW, name="admin")
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
    page.context.close()


def _child_sees(scenario: Scenario, line: str) -> None:
    page = scenario.page("tim", PW, name="child")
    page.goto("/#/profile")
    expect(page.get_by_test_id("supervision-line")).to_contain_text(line)
    age = age_on(date(2016, 5, 1), date.today())
    assert page.evaluate(NO_OVERFLOW), "the profile is wider than the screen"
    expect(page.get_by_test_id("my-date-of-birth")).to_contain_text(str(age))
    page.context.close()
