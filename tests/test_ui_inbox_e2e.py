"""The Inbox in a real browser: Debian's Chromium driven by Playwright against a real
`skald serve`, with the fake provider (`fake_llm.FakeLLM`) as the model.

A member asks, on her desktop, to keep a note in the household's shared memory. The
model's write waits for her approval: the chat's approval card shows what the write
would change as a diff (added lines marked as such) and offers the bypass choices. On
her phone (a 375 px wide viewport, the same account) the Inbox badge in the header
counts the waiting item; she opens the Inbox there, sees the same diff, approves, and the
turn completes in the desktop chat. The badge goes away on both screens.

Launch flags, the skip rule, the console and CSP watching and the screenshot folder are
those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import re
import time

import pytest
from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    HeldRequests,
    add_fake_model,
    add_provider_on_page,
    api_as,
    login,
    server_fixture,
    shot,
    sign_in,
    watched_page,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Locator, Page, WebSocketRoute, expect

USER, USER_PW = "bea", "bea's rather long password"
MODEL = "fake-inbox"
SHARED_NOTE = "shared-memory/garden.md"
NOTE_TEXT = "# Garden\nWater the tomatoes every second evening."
ASK = "Remember for everybody how often the tomatoes need water"
REPLY = "Done, the watering rhythm is in the household notes now"

server = server_fixture((USER, USER_PW))


def _front(page: Page) -> Page:
    """Background tabs get few animation frames; Playwright's actions wait for them."""
    page.bring_to_front()
    return page


def _write_card(page: Page) -> Locator:
    return page.locator('[data-testid="tool-card"][data-tool="write_file"]')


def _connect_model(admin: Page, fake: FakeLLM) -> None:
    admin.get_by_test_id("nav-admin-models").click()
    expect(admin.get_by_test_id("models-page")).to_be_visible()
    add_provider_on_page(admin, "Fake provider", fake.base_url_openai, "sk-inbox-test")
    admin.get_by_test_id("model-add").click()
    box = admin.get_by_test_id("model-dialog")
    box.get_by_test_id("model-wire-id").fill(MODEL)
    box.get_by_test_id("model-name").fill("Fake inbox model")
    box.get_by_test_id("model-save").click()
    expect(box).to_have_count(0)
    expect(admin.get_by_test_id("model-row")).to_have_count(1)


@pytest.mark.timeout(120)
def test_a_write_waits_in_the_inbox_and_is_approved_from_the_phone(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    started = time.monotonic()
    with watched_scenario(browser, server, prefix="inbox", color_scheme="light") as scenario:
        watch, context = scenario.watch, scenario.context
        admin = _front(
            watch.attach("admin", context(viewport={"width": 1280, "height": 860}).new_page())
        )
        sign_in(admin, ADMIN, ADMIN_PW)
        _connect_model(admin, fake)

        # The desktop chat and the phone, both signed in as the member.
        desk = _front(
            watch.attach("desk", context(viewport={"width": 1280, "height": 860}).new_page())
        )
        sign_in(desk, USER, USER_PW)
        phone_ctx = context(viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True)
        phone = _front(watch.attach("phone", phone_ctx.new_page()))
        sign_in(phone, USER, USER_PW)
        expect(phone.get_by_test_id("header-inbox")).to_be_visible()
        expect(phone.get_by_test_id("header-inbox-badge")).to_have_count(0)  # nothing waits yet

        fake.script(
            MODEL,
            [[Call("write_file", {"path": SHARED_NOTE, "content": NOTE_TEXT})], Text(REPLY)],
        )
        _front(desk).get_by_test_id("chat-input").fill(ASK)
        desk.get_by_test_id("chat-input").press("Enter")

        # -- the approval card in the chat shows the diff and the bypass choices ------
        chat = desk.get_by_test_id("chat-page")
        expect(chat).to_have_attribute("data-status", "awaiting_approval")
        cid = str(chat.get_attribute("data-conversation-id"))
        card = _write_card(desk)
        expect(card.get_by_test_id("approval-card")).to_be_visible()
        diff = card.get_by_test_id("approval-diff")
        expect(diff).to_be_visible()
        added = diff.locator('[data-testid="diff-line"][data-kind="add"]')
        expect(added.filter(has_text="Water the tomatoes")).to_have_count(1)
        expect(diff.locator('[data-testid="diff-line"][data-kind="del"]')).to_have_count(
            0
        )  # a new file
        for choice in ("approve", "approve-15m", "approve-conversation", "reject"):
            expect(card.get_by_test_id(f"approval-{choice}")).to_be_enabled()
        expect(desk.get_by_test_id("nav-inbox-badge")).to_have_text("1")
        shot(desk, "inbox-01-chat-diff")

        # -- the phone's header badge counts it; the Inbox shows it -------------------
        _front(phone)
        badge = phone.get_by_test_id("header-inbox-badge")
        expect(badge).to_have_text("1")
        expect(badge).to_be_in_viewport()
        phone.get_by_test_id("header-inbox").click()
        expect(phone.get_by_test_id("inbox-page")).to_be_visible()
        item = phone.locator('[data-testid="inbox-item"][data-kind="approval"]')
        expect(item).to_have_count(1)
        expect(item).to_have_attribute("data-conversation-id", cid)
        expect(item.get_by_test_id("inbox-item-tool")).to_have_text("write_file")
        item_diff = item.get_by_test_id("inbox-item-diff")
        expect(
            item_diff.locator('[data-kind="add"]').filter(has_text="Water the tomatoes")
        ).to_have_count(1)
        args = item.get_by_test_id("inbox-item-details")
        expect(args).not_to_have_attribute("open", "")  # folded away on a small screen
        expect(item.get_by_test_id("inbox-open-chat")).to_have_attribute("href", f"#/?c={cid}")
        approve = item.get_by_test_id("inbox-approve")
        expect(approve).to_be_in_viewport()
        box = approve.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
        width = phone.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 375, f"the Inbox scrolls sideways on a phone: {width}px"
        shot(phone, "inbox-02-phone")

        approve.click()
        expect(phone.get_by_test_id("inbox-empty")).to_be_visible()
        expect(badge).to_have_count(0)

        # -- the desktop chat completes the turn ---------------------------------------
        _front(desk)
        expect(_write_card(desk)).to_have_attribute("data-status", "done")
        expect(desk.get_by_test_id("approval-card")).to_have_count(0)
        stored = desk.locator('[data-testid="message"][data-role="assistant"][data-seq]').filter(
            has_text=REPLY
        )
        expect(stored).to_have_count(1)
        expect(chat).to_have_attribute("data-status", "idle")
        expect(desk.get_by_test_id("nav-inbox-badge")).to_have_count(0)
        shot(desk, "inbox-03-chat-done")
    print(f"browser inbox scenario took {time.monotonic() - started:.1f} s")


HELPER_REPLY = "The helper has put the watering rhythm in the household notes"


@pytest.mark.timeout(120)
def test_a_helpers_write_waits_in_the_chat_also_in_a_tab_opened_later(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """A sub-agent's request shows under the card of the call that started it, in the
    tab that sent the message and in one opened after the request was made."""

    def helper_card(page: Page) -> Locator:
        return page.locator('[data-testid="tool-card"][data-tool="execute_task"]')

    with watched_scenario(
        browser,
        server,
        prefix="helper",
        color_scheme="light",
        viewport={"width": 1280, "height": 860},
    ) as scenario:

        def page_for(name: str) -> Page:
            return _front(scenario.open(name))

        admin = page_for("admin")
        sign_in(admin, ADMIN, ADMIN_PW)
        _connect_model(admin, fake)

        first = page_for("first")
        sign_in(first, USER, USER_PW)
        fake.script(
            MODEL,
            [
                [Call("execute_task", {"task": "note the watering rhythm", "agent": "worker"})],
                [Call("write_file", {"path": SHARED_NOTE, "content": NOTE_TEXT})],
                Text("Noted."),
                Text(HELPER_REPLY),
            ],
        )
        first.get_by_test_id("chat-input").fill(ASK)
        first.get_by_test_id("chat-input").press("Enter")
        card = helper_card(first).get_by_test_id("approval-card")
        expect(card).to_be_visible()
        expect(card).to_contain_text("helper")
        expect(card).to_contain_text("write_file")
        expect(card.get_by_test_id("approval-diff")).to_contain_text("Water the tomatoes")
        cid = str(first.get_by_test_id("chat-page").get_attribute("data-conversation-id"))

        later = page_for("later")
        later.goto(f"/#/?c={cid}")
        login(later, USER, USER_PW)
        card = helper_card(later).get_by_test_id("approval-card")
        expect(card).to_be_visible()
        expect(card.get_by_test_id("approval-diff")).to_contain_text("Water the tomatoes")
        shot(later, "inbox-04-helper-approval")
        card.get_by_test_id("approval-approve").click()

        for page in (later, first):
            _front(page)
            expect(helper_card(page)).to_have_attribute("data-status", "done")
            expect(page.get_by_test_id("approval-card")).to_have_count(0)
            reply = page.locator('[data-testid="message"][data-role="assistant"][data-seq]')
            expect(reply.filter(has_text=HELPER_REPLY)).to_have_count(1)


@pytest.mark.timeout(120)
def test_moving_a_provider_asks_for_its_key_again(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """The Models dialog does not let a stored key follow a new address."""
    with watched_page(
        browser,
        server,
        ADMIN,
        ADMIN_PW,
        prefix="inbox-provider",
        name="admin",
        color_scheme="light",
        viewport={"width": 1280, "height": 860},
    ) as admin:
        _connect_model(admin, fake)
        row = admin.get_by_test_id("provider-row")
        expect(row.get_by_test_id("provider-key-status")).to_have_attribute("data-has-key", "true")
        row.get_by_test_id("provider-edit").click()
        box = admin.get_by_test_id("provider-dialog")
        box.get_by_test_id("provider-base-url").fill("http://127.0.0.1:9/v1")
        box.get_by_test_id("provider-save").click()
        # Said in the page's language before anything is sent (the server refuses too).
        expect(box.get_by_test_id("provider-error")).to_contain_text("enter the API key again")
        box.get_by_test_id("provider-clear-key").check()
        box.get_by_test_id("provider-save").click()
        expect(box).to_have_count(0)
        expect(row.get_by_test_id("provider-key-status")).to_have_attribute("data-has-key", "false")


@pytest.mark.timeout(120)
def test_a_scheduled_jobs_write_waits_in_the_inbox_labelled_with_the_job(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """A job's run needs an approval: the Inbox says which job it comes from and until
    when it waits, the Tasks page shows the run waiting, approving there ends the run."""
    add_fake_model(server, fake, MODEL)
    bea = api_as(server, USER, USER_PW)
    fake.script(
        MODEL, [[Call("write_file", {"path": SHARED_NOTE, "content": NOTE_TEXT})], Text(REPLY)]
    )
    job_in = {"kind": "prompt", "title": "Garden note", "prompt": ASK, "cron": "0 8 * * *"}
    r = bea.post("/api/schedule/jobs", json=job_in)
    assert r.status_code == 201, r.text
    job = r.json()
    r = bea.post(f"/api/schedule/jobs/{job['id']}/run")
    assert r.status_code in (200, 201, 202), r.text
    with watched_scenario(
        browser, server, prefix="inbox", viewport={"width": 1280, "height": 860}
    ) as scenario:
        page = _front(scenario.open("bea"))
        sign_in(page, USER, USER_PW)
        page.goto("/#/inbox")
        item = page.locator('[data-testid="inbox-item"][data-kind="approval"]')
        expect(item).to_have_count(1, timeout=60_000)
        origin = item.get_by_test_id("inbox-item-origin")
        expect(origin).to_have_attribute("data-origin", "scheduled")
        expect(origin).to_contain_text("Scheduled: Garden note")
        expect(item.get_by_test_id("inbox-item-expires")).to_be_visible()
        shot(page, "inbox-04-scheduled")
        page.goto("/#/tasks")
        expect(page.get_by_test_id("task-job-waiting")).to_have_text("waiting for your approval")
        page.get_by_test_id("task-job-waiting").click()
        expect(page.get_by_test_id("inbox-page")).to_be_visible()
        item.get_by_test_id("inbox-approve").click()
        expect(page.get_by_test_id("inbox-empty")).to_be_visible()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            runs = bea.get(f"/api/schedule/jobs/{job['id']}/runs").json()
            if runs and runs[0]["outcome"] != "running":
                break
            time.sleep(0.2)
        assert [(r["outcome"], r["waiting_call"]) for r in runs] == [("succeeded", None)], runs


@pytest.mark.timeout(120)
def test_a_count_that_comes_while_the_inbox_is_read_is_not_undone_by_the_older_answer(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """The badge's read at a hello is held; meanwhile a write starts waiting and its count
    comes live. The read then answers as the server saw things before (nothing waits):
    the badge keeps the live count."""
    add_fake_model(server, fake, MODEL)
    bea = api_as(server, USER, USER_PW)  # her other device, where the write is asked for
    fake.script(
        MODEL, [[Call("write_file", {"path": SHARED_NOTE, "content": NOTE_TEXT})], Text(REPLY)]
    )
    sockets: list[WebSocketRoute] = []

    def through(ws: WebSocketRoute) -> None:
        sockets.append(ws)
        ws.connect_to_server()

    cid = ""
    try:
        with watched_scenario(
            browser, server, prefix="inbox-count-race", viewport={"width": 1280, "height": 860}
        ) as scenario:
            page = scenario.open("bea")
            page.route_web_socket(re.compile(r"/api/ws$"), through)
            sign_in(page, USER, USER_PW)
            page.goto("/#/profile")  # no view of the list: the count alone is kept live
            expect(page.get_by_test_id("profile-page")).to_be_visible()
            badge = page.get_by_test_id("nav-inbox-badge")
            expect(badge).to_have_count(0)
            reads = HeldRequests(page, "**/api/inbox")
            sockets[0].close(code=1011, reason="dropped by the test")
            held = reads.wait()[0]  # the read at the next hello
            r = bea.post("/api/conversations", json={})
            assert r.status_code == 201, r.text
            cid = r.json()["id"]
            r = bea.post(f"/api/conversations/{cid}/messages", json={"text": ASK})
            assert r.status_code == 202, r.text
            deadline = time.monotonic() + 30
            while not bea.get("/api/inbox").json():
                assert time.monotonic() < deadline, "the write did not wait for an approval"
                time.sleep(0.1)
            expect(badge).to_have_text("1")  # live
            held.fulfill(json=[])  # the server's answer from before the write
            page.wait_for_timeout(300)  # the answer is read
            expect(badge).to_have_text("1")
    finally:
        if cid:
            bea.post(f"/api/conversations/{cid}/stop")
        bea.close()
