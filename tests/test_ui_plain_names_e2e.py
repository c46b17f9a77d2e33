"""Names, not ids, in Chromium against a real `skald serve` (issue 24 item 13): the
Approvals page says every seeded rule in words (no `@paid`, no `schedule`) and shows the
Default group in the reader's language; the Roles page shows role names without their
ids; the household's time zone is a searchable field whose list has the old names too
("Asia/Calcutta") and which takes "rome" for "Europe/Rome"; the wizard's passed steps
lead back. At 375 and 1280 px, en/it/fr, never wider than the screen.

Launch flags, the skip rule and the CSP watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import re

import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from ui_support import PLAYWRIGHT_MISSING, SignedInWatch, api_as, case_page, server_fixture

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Page, expect

NO_OVERFLOW = "() => document.documentElement.scrollWidth <= window.innerWidth"
DEFAULT_GROUP = {
    "en": ("Default", "The rules every conversation starts with"),
    "it": ("Predefinito", "Le regole con cui inizia ogni conversazione"),
    "fr": ("Par défaut", "Les règles avec lesquelles commence chaque conversation"),
}
ADMIN_ROLE = {"en": "Administrator", "it": "Amministratore", "fr": "Administrateur"}
CASES = [(375, "it"), (375, "fr"), (1280, "en")]
# Ids of the engine that must never reach the page as such.
RAW = re.compile(r"@paid|@fs_|@exec|\bschedule\b|background_task|\bnotify\b|execute_cmd")


class NamesWatch(SignedInWatch):
    """The unknown time zone is refused on purpose (a 400 for the form to show)."""

    @staticmethod
    def expected(text: str, url: str) -> bool:
        return SignedInWatch.expected(text, url) or (
            "status of 400" in text and url.endswith("/api/instance")
        )


server = server_fixture()


def _text(page: Page) -> str:
    return str(page.locator("main").evaluate("e => e.innerText"))


def _approvals_and_roles(page: Page, lang: str) -> None:
    page.goto("/#/admin/approvals")
    rows = page.get_by_test_id("approval-group-row")
    expect(rows).to_have_count(1)
    name, description = DEFAULT_GROUP[lang]
    expect(rows.first).to_contain_text(name)
    expect(rows.first).to_contain_text(description)
    expect(rows.first.locator("code")).to_have_count(0)
    expect(page.get_by_test_id("approval-rules")).to_be_visible()
    page.wait_for_load_state("networkidle")
    shown = _text(page)
    assert not RAW.search(shown), RAW.search(shown)
    assert page.evaluate(NO_OVERFLOW), lang

    page.goto("/#/admin/roles")
    roles = page.get_by_test_id("role-row")
    expect(roles).to_have_count(3)
    expect(page.get_by_test_id("roles-list").locator("code")).to_have_count(0)
    admin = page.locator('[data-testid="role-row"][data-role-name="admin"]')
    expect(admin.locator(".role-card__title")).to_have_text(re.compile(rf"^\s*{ADMIN_ROLE[lang]}"))
    expect(admin).not_to_contain_text(re.compile(r"\badmin\b"))
    assert page.evaluate(NO_OVERFLOW), lang


def _time_zone(page: Page, api: Api, lang: str) -> None:
    page.goto("/#/admin/settings")
    field = page.get_by_test_id("household-timezone")
    expect(field).to_be_visible()
    options = page.get_by_test_id("household-timezones").locator("option")
    expect(options.and_(page.locator('[value="Asia/Calcutta"]'))).to_have_count(1)
    expect(options.and_(page.locator('[value="US/Eastern"]'))).to_have_count(1)
    field.fill("rome")
    page.get_by_test_id("household-save").click()
    expect(field).to_have_value("Europe/Rome")
    expect(page.get_by_test_id("household-error")).to_have_count(0)
    field.fill("Asia/Calcutta")  # an old name, as some browsers report it
    page.get_by_test_id("household-save").click()
    expect(page.get_by_test_id("household-save")).to_be_enabled()
    expect(page.get_by_test_id("household-error")).to_have_count(0)
    assert api.get("/api/instance").json()["timezone"] == "Asia/Calcutta"
    field.fill("Atlantis/Nowhere")
    page.get_by_test_id("household-save").click()
    expect(page.get_by_test_id("household-error")).to_contain_text("Atlantis/Nowhere")
    assert page.evaluate(NO_OVERFLOW), lang


def _wizard_back(page: Page, api: Api) -> None:
    assert api.patch("/api/instance", json={"setup_step": "members"}).status_code == 200
    page.goto("/#/welcome")
    expect(page.get_by_test_id("welcome-members-step")).to_be_visible()
    back = page.get_by_test_id("welcome-step-back")
    expect(back).to_have_count(2)  # household and model are behind
    back.and_(page.locator('[data-step="household"]')).click()
    expect(page.get_by_test_id("welcome-household")).to_be_visible()
    expect(page.get_by_test_id("welcome-step-back")).to_have_count(0)
    assert api.get("/api/instance").json()["setup_step"] == "household"
    assert api.patch("/api/instance", json={"setup_step": "done"}).status_code == 200


@pytest.mark.timeout(240)
def test_pages_show_names_not_ids_time_zones_are_searchable_and_the_wizard_goes_back(
    server: ServerProcess, browser: Browser
) -> None:
    watch = NamesWatch()
    api = api_as(server)
    for width, lang in CASES:
        assert api.patch("/api/auth/me", json={"locale": lang}).status_code == 200
        with case_page(browser, server, ADMIN, ADMIN_PW, "names", watch, lang, width, 800) as page:
            _approvals_and_roles(page, lang)
            _time_zone(page, api, lang)
            _wizard_back(page, api)
