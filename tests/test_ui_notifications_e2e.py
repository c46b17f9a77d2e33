"""The notification centre in a real browser: Debian's Chromium driven by Playwright
against a real `skald serve`, the fake provider (`fake_llm.FakeLLM`) as the model.

A member asks the assistant to tell her something; the model calls `notify`. The bell in
the header shows the unread badge live (no reload), the panel lists the notification,
and marking it read clears the badge. Launch flags, skip rule, console and CSP watching
are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import re
import time
from contextlib import closing

import pytest
from fake_llm import Call, FakeLLM, Text
from harness import Api, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    HeldRequests,
    Watch,
    api_as,
    server_fixture,
    shot,
    sign_in,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, WebSocketRoute, expect

USER, USER_PW = "bea", "bea's rather long password"
MODEL = "fake-notify"
EXPECTED_STATUS = re.compile(r"status of 401 \(")
# The settings test saves an unknown time zone on purpose once.
EXPECTED_400 = re.compile(r"status of 400 \(.*api/notifications/settings")


class NotifyWatch(Watch):
    @staticmethod
    def expected(text: str, url: str) -> bool:
        return bool(EXPECTED_STATUS.search(text) or EXPECTED_400.search(f"{text} {url}"))


server = server_fixture((USER, USER_PW))


@pytest.mark.timeout(120)
def test_a_notify_call_shows_in_the_centre_with_its_badge_and_mark_read_clears_it(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    started = time.monotonic()
    admin = api_as(server)
    admin.add_model(fake.base_url_openai, MODEL, api_key="sk-notify-test")
    admin.close()
    viewport = {"width": 1280, "height": 860}
    with watched_scenario(
        browser, server, NotifyWatch(), prefix="notifications", color_scheme="light"
    ) as scenario:
        page = scenario.open("bea", viewport=viewport)
        sign_in(page, USER, USER_PW)
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
    print(f"browser notification scenario took {time.monotonic() - started:.1f} s")


@pytest.mark.timeout(120)
def test_the_profile_keeps_quiet_hours_and_the_service_worker_shows_a_push(
    server: ServerProcess, browser: Browser
) -> None:
    """Settings round trip in the page; then a push message delivered to the real service
    worker (Chromium's DevTools protocol stands in for the push service) becomes a system
    notification with the batch's text and the link's page."""
    with watched_scenario(
        browser, server, NotifyWatch(), prefix="notifications-settings"
    ) as scenario:
        ctx = scenario.context(viewport={"width": 1280, "height": 860})
        ctx.grant_permissions(["notifications"], origin=server.url)
        page = scenario.watch.attach("bea", ctx.new_page())
        sign_in(page, USER, USER_PW)
        page.goto("/#/profile")
        card = page.get_by_test_id("notif-settings")
        expect(card).to_be_visible()
        expect(card.get_by_test_id("notif-channel-web")).to_be_checked()
        card.get_by_test_id("notif-quiet-on").check()
        card.get_by_test_id("notif-quiet-start").fill("21:30")
        card.get_by_test_id("notif-quiet-end").fill("06:15")
        card.get_by_test_id("notif-quiet-zone").fill("Mars/Olympus")
        card.get_by_test_id("notif-settings-save").click()
        expect(card.get_by_test_id("notif-settings-error")).to_contain_text("unknown timezone")
        card.get_by_test_id("notif-quiet-zone").fill("Europe/Rome")
        card.get_by_test_id("notif-settings-save").click()
        expect(card.get_by_test_id("notif-settings-saved")).to_be_visible()
        page.reload()
        card = page.get_by_test_id("notif-settings")
        expect(card.get_by_test_id("notif-quiet-start")).to_have_value("21:30")
        expect(card.get_by_test_id("notif-quiet-zone")).to_have_value("Europe/Rome")
        # The test button notifies the member herself: the bell counts it.
        card.get_by_test_id("notif-test").click()
        expect(page.get_by_test_id("notif-badge")).to_have_text("1")
        expect(card.get_by_test_id("notif-push-here")).to_have_attribute("data-state", "off")

        # The service worker's push handler, fed by DevTools as a push service would.
        page.evaluate("() => navigator.serviceWorker.ready.then(() => true)")
        cdp = ctx.new_cdp_session(page)
        registrations: list[str] = []
        cdp.on(
            "ServiceWorker.workerRegistrationUpdated",
            lambda e: registrations.extend(r["registrationId"] for r in e["registrations"]),
        )
        cdp.send("ServiceWorker.enable")
        deadline = time.monotonic() + 10
        while not registrations and time.monotonic() < deadline:
            page.wait_for_timeout(50)
        assert registrations, "no service worker registration"
        payload = (
            '{"count": 2, "unread": 2, "items": ['
            '{"id": "b", "title": "Train at 7:42", "body": "Platform 3", "link": "/inbox"},'
            '{"id": "a", "title": "Bins out", "body": "", "link": null}]}'
        )
        cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": server.url + "/", "registrationId": registrations[-1], "data": payload},
        )
        shown: list[dict[str, object]] = []
        deadline = time.monotonic() + 10
        while not shown and time.monotonic() < deadline:
            shown = page.evaluate(
                """() => navigator.serviceWorker.ready
                .then((r) => r.getNotifications())
                .then((ns) => ns.map((n) => ({title: n.title, body: n.body, data: n.data})))"""
            )
            if not shown:
                page.wait_for_timeout(50)
        assert shown == [
            {
                "title": "Skald (2)",
                "body": "• Train at 7:42\n• Bins out",
                "data": {"link": "/inbox"},
            }
        ], shown


@pytest.mark.timeout(120)
def test_the_bell_counts_what_came_before_the_server_counted_the_page_in_and_while_it_read(
    server: ServerProcess, browser: Browser
) -> None:
    """Two windows of the bell's count, held open. (1) The page's first read has answered
    and the server has not counted its socket in yet: a notification made then comes in no
    event, so the page reads again at the hello. (2) A read is on its way and a
    notification comes live: the read's older answer must not undo the live count."""
    sockets: list[WebSocketRoute] = []
    # bea: another device of hers, which makes the notifications.
    with (
        closing(api_as(server, USER, USER_PW)) as bea,
        watched_scenario(
            browser, server, NotifyWatch(), prefix="notifications-bell-race"
        ) as scenario,
    ):
        page = scenario.open("bea", viewport={"width": 1280, "height": 860})
        # Sockets reach the server only when the test says so.
        page.route_web_socket(re.compile(r"/api/ws$"), lambda ws: sockets.append(ws))
        with page.expect_response(lambda r: r.url.endswith("/api/notifications")) as first:
            sign_in(page, USER, USER_PW)
        assert first.value.json()["unread"] == 0
        badge = page.get_by_test_id("notif-badge")
        expect(badge).to_have_count(0)
        while not sockets:
            page.wait_for_timeout(50)
        _notify_and_deliver(bea)  # its events went to no socket of the page
        sockets[0].connect_to_server()  # counted in: the hello
        expect(badge).to_have_text("1")

        # (2) The read at the next hello is held; a notification comes live meanwhile.
        reads = HeldRequests(page, "**/api/notifications")
        sockets[0].close(code=1011, reason="dropped by the test")
        while len(sockets) < 2:
            page.wait_for_timeout(50)
        sockets[1].connect_to_server()
        held = reads.wait()[0]
        _notify_and_deliver(bea)
        expect(badge).to_have_text("2")  # live
        held.fulfill(json={"items": [], "unread": 1})  # the server's answer from before it
        page.wait_for_timeout(300)  # the answer is read
        expect(badge).to_have_text("2")


def _notify_and_deliver(api: Api) -> None:
    """A test notification, once its batch is delivered (its last event published)."""
    assert api.post("/api/notifications/test").status_code == 201
    deadline = time.monotonic() + 10
    while not all(n["delivered"] for n in api.get("/api/notifications").json()["items"]):
        assert time.monotonic() < deadline, "the notification was not delivered"
        time.sleep(0.05)
