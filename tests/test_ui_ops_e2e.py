"""Operator-facing pages and the page's own resilience, in Chromium against a real
`skald serve`: the Backups page backs up, tests a restore and restores a chosen backup
(the server restarts into it; the dialog fits a phone in it/fr); after a server restart an
open page says "Skald restarted" and reconnects (an encrypted member, whose key did not
survive, gets the sign-in page saying why); a page whose scripts fail to load says so
within seconds instead of spinning.

Launch flags, the skip rule and the CSP watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    Watch,
    api_as,
    login,
    open_context,
    server_fixture,
    shot,
    watched_page,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Page, Route, expect

CHILD, CHILD_PW = "tim", "tim's rather long password"


class OpsWatch(Watch):
    """A server going away and a script blocked on purpose make expected console noise."""

    @staticmethod
    def expected(text: str, url: str) -> bool:
        return (
            "WebSocket" in text
            or "ERR_CONNECTION_REFUSED" in text
            or "ERR_FAILED" in text
            or "status of 401" in text
            or "status of 503" in text
            or ("status of 400" in text and url.endswith("/api/backups/settings"))
        )


@contextlib.contextmanager
def _admin_on(
    browser: Browser, server: ServerProcess, prefix: str, nav: str, testid: str
) -> Iterator[Page]:
    """The administrator's watched page, on the page `testid` its menu item `nav` opens."""
    with watched_page(
        browser, server, ADMIN, ADMIN_PW, prefix=prefix, watch=OpsWatch(), timeout=15_000
    ) as page:
        page.get_by_test_id(nav).click()
        expect(page.get_by_test_id(testid)).to_be_visible()
        yield page


server = server_fixture((CHILD, CHILD_PW), role="children")


@pytest.mark.timeout(180)
def test_the_backups_page_backs_up_and_tests_a_restore(
    server: ServerProcess, browser: Browser
) -> None:
    with _admin_on(browser, server, "backups", "nav-admin-backups", "backups-page") as page:
        expect(page.get_by_test_id("backups-last")).to_have_text("No backup has been made yet.")
        page.get_by_test_id("backups-run").click()
        expect(page.get_by_test_id("backups-last")).to_have_attribute("data-ok", "true")
        expect(page.get_by_test_id("backups-archive")).to_have_count(1)
        page.get_by_test_id("backups-drill-run").click()
        drill = page.get_by_test_id("backups-drill")
        expect(drill).to_have_attribute("data-ok", "true")
        expect(drill).to_contain_text("Restore test passed")
        # The administrator is signed in: their encrypted data was opened with their key.
        rows = page.get_by_test_id("backups-drill-databases").locator("li")
        expect(rows).to_have_count(3)
        expect(rows.and_(page.locator('[data-status="ok"]'))).to_have_count(3)
        # A folder that is not there is refused with a sentence.
        page.get_by_test_id("backups-folder").fill("/nonexistent/disk")
        page.get_by_test_id("backups-save").click()
        expect(page.get_by_test_id("backups-settings-error")).to_contain_text("is not a folder")


RESTORE_TEXT = {
    "it": ("Creato il", "Ripristina e riavvia"),
    "fr": ("Faite le", "Restaurer et redémarrer"),
}
NO_OVERFLOW = "() => document.documentElement.scrollWidth <= window.innerWidth"


def _open_restore(page: Page) -> None:
    page.wait_for_load_state("networkidle")  # the language switch after sign-in is done
    page.goto("/#/admin/backups")
    expect(page.get_by_test_id("backups-page")).to_be_visible()
    page.get_by_test_id("backups-restore").first.click()
    expect(page.get_by_test_id("restore-contents")).to_be_visible()


@pytest.mark.timeout(300)
def test_the_backups_page_restores_a_chosen_backup_and_skald_restarts_into_it(
    server: ServerProcess, browser: Browser
) -> None:
    api = api_as(server)
    assert api.post("/api/backups/run").status_code == 200
    server.add_user("late", "late's rather long password")
    admin_page = functools.partial(
        watched_page, browser, server, ADMIN, ADMIN_PW, prefix="backups-restore", watch=OpsWatch()
    )
    # On a phone, in Italian and French: what the backup holds, fitting; Cancel changes nothing.
    for lang, (made, confirm) in RESTORE_TEXT.items():
        assert api.patch("/api/auth/me", json={"locale": lang}).status_code == 200
        phone = {"width": 375, "height": 740}
        with admin_page(name=f"phone-{lang}", viewport=phone, timeout=15_000) as page:
            _open_restore(page)
            expect(page.get_by_test_id("restore-contents")).to_contain_text(made)
            expect(page.get_by_test_id("restore-members")).to_contain_text(CHILD)
            expect(page.get_by_test_id("restore-confirm")).to_have_text(confirm)
            assert page.evaluate(NO_OVERFLOW), lang
            shot(page, f"backups-restore-375-{lang}")
            page.get_by_test_id("restore-cancel").click()
            expect(page.get_by_test_id("restore-dialog")).to_have_count(0)
            assert page.evaluate(NO_OVERFLOW), lang
    assert api.patch("/api/auth/me", json={"locale": "en"}).status_code == 200
    desktop = {"width": 1280, "height": 800}
    with admin_page(name="desktop", viewport=desktop, timeout=15_000) as page:
        _open_restore(page)
        expect(page.get_by_test_id("restore-members")).to_have_text(
            f"Household data and the private data of: {ADMIN}, {CHILD}."
        )
        shot(page, "backups-restore")
        page.get_by_test_id("restore-confirm").click()
        expect(page.get_by_test_id("restore-restarting")).to_be_visible()
        # The page follows the restart: sessions are not restored, so the sign-in page.
        expect(page.get_by_test_id("login-notice")).to_have_text(
            "Skald restarted, so you were signed out. Please sign in again.", timeout=60_000
        )
        login(page, ADMIN, ADMIN_PW)
        expect(page.get_by_test_id("chat-page")).to_be_visible()
        page.goto("/#/admin/backups")
        restored = page.get_by_test_id("backups-restored")
        expect(restored).to_have_attribute("data-ok", "true")
        expect(restored).to_contain_text(f"(asked by {ADMIN})")
        assert page.evaluate(NO_OVERFLOW)
        again = api_as(server)
        names = {u["username"] for u in again.get("/api/users").json()}
        assert names == {ADMIN, CHILD}  # "late" came after the backup


@pytest.mark.timeout(240)
def test_after_a_restart_an_open_page_says_so_and_reconnects(
    server: ServerProcess, browser: Browser
) -> None:
    with watched_scenario(browser, server, OpsWatch(), prefix="restart", timeout=15_000) as two:
        child = two.page(CHILD, CHILD_PW, name="child")
        admin = two.page(ADMIN, ADMIN_PW, name="admin")
        expect(child.get_by_test_id("restart-banner")).to_have_count(0)
        # Both pages know when this server started (their first look at /api/health, sent
        # without waiting at load): a page that never saw it cannot tell a restart later.
        for page in (child, admin):
            expect(page.locator("html")).to_have_attribute(
                "data-server-started", re.compile(r"^\d")
            )

        # The race a CI run met: the administrator's page asks /api/health just before the
        # new server is up (that check fails), then its /api/auth/me meets the new server
        # (401). Its first health check after the restart is dropped to make that order
        # certain; the page must still say why it signed them out.
        health = {"up": False, "dropped": 0}

        def drop_the_first_check_after_the_restart(route: Route) -> None:
            if health["up"] and health["dropped"]:
                route.continue_()
                return
            health["dropped"] += int(health["up"])
            route.abort()

        admin.route("**/api/health", drop_the_first_check_after_the_restart)
        code, _ = server.stop()
        assert code == 0
        expect(child.get_by_test_id("connection-lost")).to_be_visible()
        server.start()
        health["up"] = True
        # Children's data is not encrypted: the page reconnects and says what happened.
        # (The page records the restart on <html> too; the banner shows for 10 s.)
        expect(child.locator("html")).to_have_attribute(
            "data-restarted-at", re.compile(r"^\d+$"), timeout=60_000
        )
        expect(child.get_by_test_id("restart-banner")).to_have_text(
            "Skald restarted. This page is connected again."
        )
        expect(child.get_by_test_id("connection-lost")).to_have_count(0)
        expect(child.get_by_test_id("chat-page")).to_be_visible()
        # The administrator's key lived in memory: signed out, and told why.
        expect(admin.get_by_test_id("login-notice")).to_have_text(
            "Skald restarted, so you were signed out. Please sign in again.", timeout=30_000
        )
        assert health["dropped"] == 1


@pytest.mark.timeout(120)
def test_a_page_whose_scripts_fail_to_load_says_so_within_seconds(
    server: ServerProcess, browser: Browser
) -> None:
    ctx = open_context(browser, server, timeout=15_000)
    try:
        page = ctx.new_page()
        # One module of the app cannot be fetched (a half-finished update, a filter).
        page.route("**/js/chat.js", lambda route: route.abort())
        page.goto("/")
        failed = page.get_by_test_id("boot-failed")
        expect(failed).to_be_visible(timeout=5_000)
        expect(failed).to_have_attribute("data-reason", "script")
        expect(failed).to_contain_text("Skald could not load its page")
        expect(page.locator(".boot .spinner")).to_be_hidden()
        # With every script there, the message never shows.
        page.unroute("**/js/chat.js")
        page.goto("/")
        page.reload()
        expect(page.get_by_test_id("login-form")).to_be_visible()
        expect(page.locator("html")).to_have_attribute("data-started", "true")
        expect(page.get_by_test_id("boot-failed")).to_have_count(0)
        assert not page.evaluate("() => window.__cspViolations || []")
    finally:
        ctx.close()


@pytest.mark.timeout(120)
def test_the_agents_page_shows_who_a_member_talks_to_in_friendly_words(
    server: ServerProcess, browser: Browser
) -> None:
    with _admin_on(browser, server, "agents", "nav-agents", "agents-page") as page:
        mine = page.get_by_test_id("agents-chat").get_by_test_id("agent-card")
        expect(mine).to_have_count(1)
        expect(mine).to_have_attribute("data-agent", "assistant")
        expect(mine.locator("svg")).to_have_count(1)  # its icon
        expect(mine.get_by_test_id("agent-description")).to_contain_text(
            "The household's assistant"
        )
        helpers = page.get_by_test_id("agents-helpers").get_by_test_id("agent-card")
        expect(helpers.and_(page.locator('[data-agent="researcher"]'))).to_contain_text(
            "Looks things up"
        )
        page.get_by_test_id("locale-picker").select_option("it")
        expect(mine.get_by_test_id("agent-description")).to_contain_text("L'assistente della casa")
        page.get_by_test_id("locale-picker").select_option("en")
    # A child talks to Skald for kids, which calls on no helpers (the children's simple
    # interface has no Agents page; the list is the same data).
    child = api_as(server, CHILD, CHILD_PW)
    agents = child.get("/api/agents").json()
    child.close()
    assert [(a["id"], a["role"]) for a in agents] == [("kid", "chat")], agents
