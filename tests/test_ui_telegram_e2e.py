"""The Telegram pages in a real browser (Debian's Chromium through Playwright), in
Italian, against a real `skald serve` and the Bot API double on 127.0.0.1: the
administrator switches the bot on (the token never comes back), a chat gets a code from
the bot, the member types it on the Telegram page and the chat is paired; Unpair ends it."""

from __future__ import annotations

import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from telegram_double import TelegramDouble
from ui_support import (
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    browser_fixture,  # noqa: F401
    open_context,
    server_fixture,
    sign_in,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

TG = 8008


server = server_fixture()


@pytest.mark.timeout(120)
def test_the_admin_switches_telegram_on_and_a_member_pairs_in_italian(
    server: ServerProcess, browser: Browser
) -> None:
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    assert admin.patch("/api/auth/me", json={"locale": "it"}).status_code == 200
    watch = SignedInWatch()
    ctx = open_context(browser, server, locale="it-IT")
    try:
        with TelegramDouble() as double:
            page = watch.attach("admin", ctx.new_page())
            sign_in(page, ADMIN, ADMIN_PW)
            page.goto("/#/admin/telegram")
            expect(page.get_by_test_id("admin-telegram-status")).to_have_text("Non collegato.")
            page.get_by_test_id("admin-telegram-token").fill(double.token)
            page.get_by_test_id("admin-telegram-base").fill(double.url)
            page.get_by_test_id("admin-telegram-enabled").check()
            page.get_by_test_id("admin-telegram-save").click()
            expect(page.get_by_test_id("admin-telegram-flash")).to_be_visible()
            expect(page.get_by_test_id("admin-telegram-token")).to_have_value("")
            page.reload()
            expect(page.get_by_test_id("admin-telegram-status")).to_contain_text(
                "Collegato come @skald_test_bot"
            )
            double.says(TG, "ciao")
            said = double.wait_for(lambda: [s for s in double.to(TG) if "code:" in s.text])
            code = said[0].text.split("code: ", 1)[1].split()[0]
            page.get_by_test_id("nav-telegram").click()
            expect(page.get_by_test_id("telegram-page")).to_be_visible()
            page.get_by_test_id("telegram-code").fill(code)
            page.get_by_test_id("telegram-pair").click()
            expect(page.get_by_test_id("telegram-flash")).to_have_text(
                "Abbinato. Ora il tuo assistente ti risponde su Telegram."
            )
            expect(page.get_by_test_id("telegram-linked")).to_contain_text(
                "Chat Telegram abbinate: 1."
            )
            double.wait_for(lambda: [s for s in double.to(TG) if s.text.startswith("Abbinato")])
            page.get_by_test_id("telegram-unpair").click()
            expect(page.get_by_test_id("telegram-linked")).to_have_count(0)
            assert admin.get("/api/telegram/me").json()["links"] == []
            # A group the bot has seen is listed for the administrator, who sets its prefix.
            double.says(TG, "ciao a tutti", chat=-6001)
            page.goto("/#/admin/telegram")
            for _ in range(100):
                if admin.get("/api/telegram/groups").json():
                    break
                page.wait_for_timeout(100)
            page.reload()
            row = page.get_by_test_id("admin-telegram-group")
            expect(row).to_contain_text("Family 6001")
            row.get_by_test_id("admin-telegram-group-prefix").fill("skald,")
            row.get_by_role("button").click()
            expect(page.get_by_test_id("admin-telegram-flash")).to_be_visible()
            assert admin.get("/api/telegram/groups").json()[0]["prefix"] == "skald,"
        assert not watch.problems, watch.problems
        assert not watch.csp_violations()
    finally:
        ctx.close()
        admin.close()
