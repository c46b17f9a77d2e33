"""The notification centre in a real browser: Debian's Chromium driven by Playwright
against a real `skald serve`, the fake provider (`fake_llm.FakeLLM`) as the model.

A member asks the assistant to tell her something; the model calls `notify`. The bell in
the header shows the unread badge live (no reload), the panel lists the notification,
and marking it read clears the badge. Launch flags, skip rule, console and CSP watching
are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from test_ui_e2e import CSP_RECORDER, PLAYWRIGHT_MISSING, SHOTS, Watch, _login, chromium, shot

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

USER, USER_PW = "bea", "bea's rather long password"
MODEL = "fake-notify"
EXPECTED_STATUS = re.compile(r"status of 401 \(")


class NotifyWatch(Watch):
    @staticmethod
    def expected(text: str, url: str) -> bool:
        return bool(EXPECTED_STATUS.search(text))


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    srv.add_user(USER, USER_PW)
    srv.start()
    yield srv
    srv.close()


@pytest.fixture
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.mark.timeout(120)
def test_a_notify_call_shows_in_the_centre_with_its_badge_and_mark_read_clears_it(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    started = time.monotonic()
    SHOTS.mkdir(parents=True, exist_ok=True)
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    admin.add_model(fake.base_url_openai, MODEL, api_key="sk-notify-test")
    admin.close()
    watch = NotifyWatch()
    ctx = browser.new_context(
        locale="en-US",
        color_scheme="light",
        base_url=server.url,
        viewport={"width": 1280, "height": 860},
    )
    ctx.set_default_timeout(10_000)
    ctx.add_init_script(CSP_RECORDER)
    page = watch.attach("bea", ctx.new_page())
    try:
        page.goto("/")
        _login(page, USER, USER_PW)
        expect(page.get_by_test_id("chat-page")).to_be_visible()
        expect(page.get_by_test_id("notif-bell")).to_be_visible()
        expect(page.get_by_test_id("notif-badge")).to_have_count(0)

        note = {"title": "Bins out tonight", "body": "It is Monday.", "link": "/profile"}
        fake.script(MODEL, [[Call("notify", note)], Text("I have sent you a reminder.")])
        page.get_by_test_id("chat-input").fill("Remind me about the bins")
        page.get_by_test_id("chat-input").press("Enter")

        badge = page.get_by_test_id("notif-badge")
        expect(badge).to_have_text("1")  # live, over the WebSocket
        page.get_by_test_id("notif-bell").click()
        panel = page.get_by_test_id("notif-panel")
        expect(panel).to_be_visible()
        item = panel.get_by_test_id("notif-item")
        expect(item).to_have_count(1)
        expect(item).to_have_attribute("data-read", "false")
        expect(item).to_contain_text("Bins out tonight")
        expect(item).to_contain_text("It is Monday.")
        shot(page, "notifications-01-centre")

        item.get_by_test_id("notif-mark-read").click()
        expect(item).to_have_attribute("data-read", "true")
        expect(badge).to_have_count(0)
        # The read mark is the server's, not only the page's: a reload keeps it.
        page.reload()
        expect(page.get_by_test_id("notif-bell")).to_be_visible()
        expect(page.get_by_test_id("notif-badge")).to_have_count(0)
        page.get_by_test_id("notif-bell").click()
        expect(page.get_by_test_id("notif-item")).to_have_attribute("data-read", "true")
        # Its link opens the page it names.
        page.get_by_test_id("notif-open").click()
        expect(page).to_have_url(re.compile(r"#/profile$"))
        shot(page, "notifications-02-read")

        problems = watch.problems + [f"CSP violation: {v}" for v in watch.csp_violations()]
        assert not problems, "\n".join(problems)
    except Exception:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(SHOTS / "failure-notifications.png"), full_page=True)
        print(server.log()[-4000:])
        print("\n".join(watch.problems))
        raise
    finally:
        ctx.close()
    print(f"browser notification scenario took {time.monotonic() - started:.1f} s")
