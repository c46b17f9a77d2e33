"""The chat and the Models page in a real browser: Debian's Chromium driven by Playwright
against a real `skald serve`, with the fake provider (`fake_llm.FakeLLM`) as the model.

The administrator adds the provider and a model on the Models page. A member has the chat
open in two tabs of one browser: she asks in the first tab, the model answers with a
write to the household's shared memory, which waits for her approval in both tabs; she
approves in the second tab, and the answer streams into both. The conversation survives
a reload and a switch to a new tab and back, a second turn reads the note back, and the
chat is photographed on a phone. Last, the administrator adds a second model, moves it
to the top, the order survives a reload, and the chat's AUTO really uses it first.

Launch flags, the skip rule (and its failure under `SKALD_CI`), the console and CSP
watching and the screenshot folder are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_llm import Call, FakeLLM, Hang, Reply, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    HeldRequests,
    SignedInWatch,
    add_fake_model,
    add_provider_on_page,
    api_as,
    clear_failure_shots,
    login,
    open_context,
    server_fixture,
    shot,
    sign_in,
    url_hash,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import (
        Browser,
        BrowserContext,
        Locator,
        Page,
        Route,
        WebSocketRoute,
        expect,
    )

MEMBER, MEMBER_PW = "ada", "ada's long password"
MAIN_MODEL, SECOND_MODEL = "fake-main", "fake-second"

NOTE_PATH = "shared-memory/recipes.md"
NOTE = "# Recipes\nPancakes: 2 eggs, 250 g flour and 500 ml milk."
QUESTION = "Please keep our pancake recipe for the whole household"
# Plain words only: the Markdown of any prefix of it is that prefix, so what the page
# shows while it streams can be compared with the text itself.
ANSWER = (
    "Saved! The pancake recipe is now in the household notes, where everybody can find "
    "it. You need two eggs, flour and milk; whisk them well, let the batter rest for a "
    "while and fry thin pancakes in a hot pan with a little butter. Enjoy your breakfast"
)
ANSWER_STREAM = Text(ANSWER, chunk_size=6, chunk_delay=0.05)  # about 2.5 s on the wire
ANSWER_HEAD = ANSWER[:6]  # the first streamed piece


server = server_fixture((MEMBER, MEMBER_PW))


@pytest.mark.timeout(180)
def test_chat_in_two_tabs_and_models_in_the_browser(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    started = time.monotonic()
    clear_failure_shots("chat-")
    with watched_scenario(browser, server, prefix="chat", color_scheme="light") as scenario:
        _scenario(server, fake, scenario.context, scenario.watch)
    print(f"browser chat scenario took {time.monotonic() - started:.1f} s")


@pytest.mark.timeout(90)
def test_a_tab_opening_a_conversation_after_the_echo_still_shows_the_member_s_message(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """The echo of a queued message comes once, to every tab. A tab that opens the
    conversation after it, and reads a history from before the message was stored, keeps
    the echo: the message shows while the turn is still at work (no later event brings
    it). Under load this window is real; here the first history read is held to it."""
    ada = _member_with_a_model(server, fake, [Hang()])
    context = open_context(browser, server, color_scheme="light")
    at_work: list[str] = []
    try:
        page = context.new_page()
        # The chat has its (empty) list before the conversation exists: it opens none by
        # itself, so the click below is the first read of its history.
        _sign_in_to_an_empty_chat(page)
        cid = _new_conversation(ada)
        at_work.append(cid)
        expect(_tab(page, cid)).to_be_visible()
        early_reads: list[str] = []

        def read_before_the_store(route: Route) -> None:
            if early_reads:
                route.continue_()
            else:
                early_reads.append(route.request.url)
                route.fulfill(json=[])  # what the server answers before the message is stored

        page.route(f"**/api/conversations/{cid}/messages", read_before_the_store)
        r = ada.post(f"/api/conversations/{cid}/messages", json={"text": QUESTION})
        assert r.status_code == 202, r.text
        # The turn is at work: the echo, sent before the turn began, has come already.
        expect(_tab(page, cid).get_by_test_id("chat-tab-busy")).to_be_visible()
        _tab(page, cid).get_by_test_id("chat-tab-select").click()
        expect(page.get_by_test_id("chat-page")).to_have_attribute("data-conversation-id", cid)
        expect(page.get_by_test_id("message").filter(has_text=QUESTION)).to_have_count(1)
        assert len(early_reads) == 1
    finally:
        for cid in at_work:
            ada.post(f"/api/conversations/{cid}/stop")  # the model's hang ends with it
        context.close()


@pytest.mark.timeout(90)
def test_a_page_opened_while_the_chat_settles_is_not_pulled_back_to_the_chat(
    server: ServerProcess, browser: Browser
) -> None:
    """The chat picks its conversation once the list arrives and puts it in the address.
    A member who went to another page in the meantime stays there: the address changes a
    moment before the page does, so the chat must not write it back over theirs."""
    ada = api_as(server, MEMBER, MEMBER_PW)
    cid = _new_conversation(ada)
    with contextlib.closing(
        open_context(browser, server, viewport={"width": 375, "height": 800})
    ) as context:
        page = context.new_page()
        lists = HeldRequests(page, "**/api/conversations")
        sign_in(page, MEMBER, MEMBER_PW)
        first = lists.wait()[0]
        # The address is the Usage page's; the page has not been drawn for it yet.
        page.evaluate("() => history.replaceState(null, '', '#/usage')")
        first.continue_()
        expect(_tab(page, cid)).to_have_class(re.compile(r"\bis-active\b"))
        for _ in range(3):  # the chat's effects run after the next paint
            page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))")
        assert url_hash(page) == "#/usage"


@pytest.mark.timeout(90)
def test_a_call_that_comes_while_the_history_is_read_shows_once(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """Events that come while a tab reads a conversation's history build a live turn; the
    history read after them holds the same call: one card, not two."""
    ada = _member_with_a_model(
        server, fake, [[Call("write_file", {"path": NOTE_PATH, "content": NOTE})]]
    )
    context = open_context(browser, server, color_scheme="light")
    cid = ""
    try:
        page = context.new_page()
        _sign_in_to_an_empty_chat(page)
        cid = _new_conversation(ada)
        expect(_tab(page, cid)).to_be_visible()
        history = HeldRequests(page, f"**/api/conversations/{cid}/messages")
        _tab(page, cid).get_by_test_id("chat-tab-select").click()
        held = history.wait()
        r = ada.post(f"/api/conversations/{cid}/messages", json={"text": QUESTION})
        assert r.status_code == 202, r.text
        # The call waits for the member (stored by now); its events reach the page first
        # (the tab's status comes after them on the same socket).
        expect(_tab(page, cid).locator(".tab__dot--awaiting_approval")).to_be_visible()
        held[0].continue_()
        expect(page.get_by_test_id("message").filter(has_text=QUESTION)).to_have_count(1)
        expect(_answered_call(page, "write_file")).to_have_count(1)
        expect(_tool_card(page, "write_file")).to_have_count(1)
        expect(_tool_card(page, "write_file").get_by_test_id("approval-card")).to_be_visible()
    finally:
        if cid:
            ada.post(f"/api/conversations/{cid}/stop")
        context.close()


@pytest.mark.timeout(90)
def test_a_list_read_older_than_a_new_conversation_does_not_take_its_tab_away(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """A turn's end reads the list again. A conversation made on another device while that
    read is on its way comes by its event; the read's answer, from before it was made,
    must not take the tab away again (the socket's news is newer than the answer)."""
    with _in_a_conversation(server, fake, browser, [Text("Done")]) as (ada, first, page):
        lists = HeldRequests(page, "**/api/conversations", count=0)
        lists.hold()
        r = ada.post(f"/api/conversations/{first}/messages", json={"text": QUESTION})
        assert r.status_code == 202, r.text
        read = lists.wait()[0]  # the turn is done: the page reads the list again
        r = ada.get("/api/conversations")
        assert r.status_code == 200, r.text
        before = r.json()  # what the server answered the page's read
        second = _new_conversation(ada)
        expect(_tab(page, second)).to_be_visible()
        with page.expect_response(_the_conversation_list):
            read.fulfill(json=before)
        for _ in range(3):  # the answer is read and drawn after the next paint
            page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))")
        expect(_tab(page, second)).to_have_count(1)
        expect(_tab(page, first)).to_have_count(1)


@pytest.mark.timeout(120)
def test_what_is_typed_while_a_new_tab_is_made_goes_to_the_new_conversation(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """The "+" empties the input at the click; the old tab keeps what it held as its draft.
    Text typed before the new conversation has come back belongs to the new one: it stays
    in the input and is sent there (it used to be filed away as the old tab's draft)."""
    with _in_a_conversation(server, fake, browser, [Text("Noted")]) as (ada, first, page):
        box = page.get_by_test_id("chat-input")
        box.fill("a draft for the first")
        made = HeldRequests(page, "**/api/conversations", method="POST")
        page.get_by_test_id("chat-new-tab").click()
        held = made.wait()[0]
        expect(box).to_have_value("")
        box.fill("for the new one")
        with page.expect_response(lambda r: r.request.method == "POST") as answer:
            held.continue_()
        second = answer.value.json()["id"]
        expect(_tab(page, second)).to_have_class(re.compile(r"\bis-active\b"))
        expect(box).to_have_value("for the new one")
        page.get_by_test_id("chat-send").click()
        expect(page.get_by_test_id("message").filter(has_text="Noted")).to_have_count(1)
        r = ada.get(f"/api/conversations/{second}/messages")
        assert r.status_code == 200, r.text
        assert "for the new one" in r.text
        _tab(page, first).get_by_test_id("chat-tab-select").click()
        expect(box).to_have_value("a draft for the first")


@pytest.mark.timeout(90)
def test_after_a_drop_the_chat_reads_again_once_the_server_counts_the_socket_in(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """A dropped socket comes back; the server counts it in (and sends its hello) a moment
    after it opens. A turn that ends in between reaches the page in no event, so the page
    reads the history again at the hello, not at the open: the answer shows."""
    ada, cid = _a_conversation(server, fake, [Text("Done")])
    sockets: list[WebSocketRoute] = []

    hellos: list[str | bytes] = []

    def through_us(ws: WebSocketRoute) -> None:
        sockets.append(ws)
        if len(sockets) == 1:
            to_server = ws.connect_to_server()

            def to_page(message: str | bytes) -> None:
                ws.send(message)
                if '"hello"' in str(message):
                    hellos.append(message)

            to_server.on_message(to_page)
        # The second one is open for the page; the server has not counted it in yet.

    with contextlib.closing(open_context(browser, server, color_scheme="light")) as context:
        page = context.new_page()
        page.route_web_socket(re.compile(r"/api/ws$"), through_us)
        sign_in(page, MEMBER, MEMBER_PW)
        expect(_tab(page, cid)).to_have_class(re.compile(r"\bis-active\b"))
        expect(page.get_by_test_id("chat-greeting")).to_be_visible()
        # The first socket has said hello (the page counts it as open): a drop before
        # that would make the next one the page's first, with nothing to read again.
        while not hellos:
            page.wait_for_timeout(50)
        sockets[0].close(code=1011, reason="dropped by the test")
        expect(page.get_by_test_id("chat-reconnecting")).to_be_visible()
        while len(sockets) < 2:
            page.wait_for_timeout(50)
        r = ada.post(f"/api/conversations/{cid}/messages", json={"text": QUESTION})
        assert r.status_code == 202, r.text
        _until_answered(ada, cid, "Done")
        sockets[1].connect_to_server()
        expect(page.get_by_test_id("chat-reconnecting")).to_have_count(0)
        expect(page.get_by_test_id("message").filter(has_text="Done")).to_have_count(1)
        expect(page.get_by_test_id("message").filter(has_text=QUESTION)).to_have_count(1)


@pytest.mark.timeout(90)
def test_the_open_conversation_is_read_again_once_the_server_counts_the_first_socket_in(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """At sign-in the chat opens a conversation and reads its history before the server has
    counted the page's socket in; a turn that ends in between reaches the page in no
    event. The page reads the open conversation again at that first hello: the answer
    shows."""
    ada, cid = _a_conversation(server, fake, [Text("Done")])
    sockets: list[WebSocketRoute] = []
    with contextlib.closing(open_context(browser, server, color_scheme="light")) as context:
        page = context.new_page()
        # The socket reaches the server only when the test says so.
        page.route_web_socket(re.compile(r"/api/ws$"), lambda ws: sockets.append(ws))
        with page.expect_response(lambda r: r.url.endswith(f"/api/conversations/{cid}/messages")):
            sign_in(page, MEMBER, MEMBER_PW)
        expect(_tab(page, cid)).to_have_class(re.compile(r"\bis-active\b"))
        expect(page.get_by_test_id("chat-greeting")).to_be_visible()  # the history: empty
        r = ada.post(f"/api/conversations/{cid}/messages", json={"text": QUESTION})
        assert r.status_code == 202, r.text
        _until_answered(ada, cid, "Done")
        while not sockets:
            page.wait_for_timeout(50)
        sockets[0].connect_to_server()  # counted in: the first hello
        expect(page.get_by_test_id("message").filter(has_text="Done")).to_have_count(1)
        expect(page.get_by_test_id("message").filter(has_text=QUESTION)).to_have_count(1)


# -- helpers ------------------------------------------------------------------------------


def _use(page: Page) -> Page:
    """The person turns to this page. Chromium throttles the animation frames of a tab
    that is not in front, and Playwright's clicks and screenshots wait for frames."""
    page.bring_to_front()
    return page


def _messages(page: Page) -> list[tuple[str, str, str]]:
    """(role, seq, text) of every message on screen, read in one go (without the labels
    of its Copy/Edit/Answer again buttons, nor the chips of what the eye carried)."""
    rows = page.get_by_test_id("chat-messages").get_by_test_id("message")
    found = rows.evaluate_all(
        "els => els.map(e => { let text = e.innerText; "
        "for (const sel of ['.msg__actions', '[data-testid=message-view]']) { "
        "const a = e.querySelector(sel); if (a) text = text.replace(a.innerText, ''); } "
        "return [e.dataset.role || '', e.dataset.seq || '', text]; })"
    )
    return [(role, seq, " ".join(text.split())) for role, seq, text in found]


def _member_with_a_model(server: ServerProcess, fake: FakeLLM, replies: list[Reply]) -> Api:
    """The administrator adds the fake model, scripted with `replies`; the member's API
    client, signed in."""
    add_fake_model(server, fake, MAIN_MODEL)
    fake.script(MAIN_MODEL, replies)
    return api_as(server, MEMBER, MEMBER_PW)


def _new_conversation(api: Api) -> str:
    """The id of a new conversation made through `api`."""
    r = api.post("/api/conversations", json={})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _a_conversation(server: ServerProcess, fake: FakeLLM, replies: list[Reply]) -> tuple[Api, str]:
    """The member (the fake model scripted with `replies`) and a new conversation of hers:
    her API client and its id."""
    ada = _member_with_a_model(server, fake, replies)
    return ada, _new_conversation(ada)


@contextlib.contextmanager
def _in_a_conversation(
    server: ServerProcess, fake: FakeLLM, browser: Browser, replies: list[Reply]
) -> Iterator[tuple[Api, str, Page]]:
    """The member (the fake model scripted with `replies`) with one conversation, signed in
    in a browser of her own with its tab active: her API client, its id, the page."""
    ada, first = _a_conversation(server, fake, replies)
    with contextlib.closing(open_context(browser, server, color_scheme="light")) as context:
        page = context.new_page()
        sign_in(page, MEMBER, MEMBER_PW)
        expect(_tab(page, first)).to_have_class(re.compile(r"\bis-active\b"))
        yield ada, first, page


def _sign_in_to_an_empty_chat(page: Page) -> None:
    """Signs in and waits until the chat has taken its first list (it has none open):
    a conversation made after this is one it opens only when told to."""
    with page.expect_response(_the_conversation_list):
        sign_in(page, MEMBER, MEMBER_PW)
    expect(page.get_by_test_id("chat-tabs")).to_be_attached()
    expect(page.get_by_test_id("chat-greeting")).to_be_visible()


def _the_conversation_list(response: Any) -> bool:
    return bool(response.url.endswith("/api/conversations") and response.request.method == "GET")


def _answered_call(page: Page, tool: str) -> Locator:
    """The stored (history) copy of a call's card: its message has a seq."""
    return page.locator(
        f'[data-testid="message"][data-seq] [data-testid="tool-card"][data-tool="{tool}"]'
    )


def _tab(page: Page, conversation_id: str) -> Locator:
    return page.locator(f'[data-testid="chat-tab"][data-conversation-id="{conversation_id}"]')


def _tool_card(page: Page, tool: str) -> Locator:
    return page.locator(f'[data-testid="tool-card"][data-tool="{tool}"]')


def _answered(page: Page, text: str) -> Locator:
    """The stored (history) assistant message holding `text`: the turn is over."""
    return page.locator('[data-testid="message"][data-role="assistant"][data-seq]').filter(
        has_text=text
    )


def _wait_idle(page: Page, answer: str) -> None:
    """README: done = the page says idle and the stored answer is shown (the live turn,
    whose messages have no seq, has been replaced by the history)."""
    expect(_answered(page, answer)).to_have_count(1)
    expect(page.get_by_test_id("chat-page")).to_have_attribute("data-status", "idle")
    expect(page.get_by_test_id("chat-turn")).to_have_count(0)
    expect(page.locator('[data-testid="message"]:not([data-seq])')).to_have_count(0)


def _result_text(card: Locator) -> str:
    result = card.get_by_test_id("tool-result")
    summary = result.locator("summary")
    expect(result).not_to_have_attribute("open", "")  # closed unless the tool failed
    summary.click()
    expect(result).to_have_attribute("open", "")
    text = str(result.locator("pre").inner_text())
    summary.click()  # closed again, as a reload would show it
    expect(result).not_to_have_attribute("open", "")
    return text


def _watch_stream(
    pages: dict[str, Page], final: str, head: str, timeout: float = 45.0
) -> dict[str, tuple[list[str], float]]:
    """Sample the streaming answer (the message starting with `head`) in every page until
    each shows all of it.

    Returns, per page, the distinct partial texts in the order seen and the seconds
    between the first partial and the complete text."""
    seen: dict[str, list[str]] = {name: [] for name in pages}
    first: dict[str, float] = {}
    complete: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(complete) < len(pages):
        assert time.monotonic() < deadline, f"the answer did not complete: {seen}"
        for name, page in pages.items():
            if name in complete:
                continue
            shown = page.locator('[data-testid="message"][data-role="assistant"]').filter(
                has_text=head
            )
            if shown.count() == 0:
                continue
            with contextlib.suppress(Exception):  # replaced by the history mid-read
                text = " ".join(shown.last.inner_text(timeout=1000).split())
                now = time.monotonic()
                if text == final:
                    complete[name] = now
                elif text not in seen[name]:
                    seen[name].append(text)
                    first.setdefault(name, now)
        time.sleep(0.03)
    return {name: (seen[name], complete[name] - first.get(name, complete[name])) for name in pages}


# -- the scenario -------------------------------------------------------------------------


def _scenario(
    server: ServerProcess,
    fake: FakeLLM,
    new_context: Callable[..., BrowserContext],
    watch: SignedInWatch,
) -> None:
    desktop = {"viewport": {"width": 1280, "height": 860}}

    # -- the admin connects the fake provider and a model on the Models page ----------
    admin = _use(watch.attach("admin", new_context(**desktop).new_page()))
    admin.goto("/")
    expect(admin.get_by_test_id("login-form")).to_be_visible()
    login(admin, ADMIN, ADMIN_PW)
    expect(admin.get_by_test_id("chat-page")).to_be_visible()
    admin.get_by_test_id("nav-admin-models").click()
    expect(admin.get_by_test_id("models-page")).to_be_visible()
    expect(admin.get_by_test_id("providers-empty")).to_be_visible()
    expect(admin.get_by_test_id("model-add")).to_be_disabled()  # no provider yet

    add_provider_on_page(admin, "Fake OpenAI", fake.base_url_openai, "sk-test-secret-123")
    provider = admin.locator('[data-testid="provider-row"][data-provider-name="Fake OpenAI"]')
    expect(provider.get_by_test_id("provider-kind-badge")).to_have_text(
        "Other OpenAI-compatible server"
    )  # the friendly name
    expect(provider.get_by_test_id("provider-key-status")).to_have_attribute("data-has-key", "true")
    assert "sk-test-secret-123" not in admin.content()  # sealed, never shown again

    _add_model(admin, MAIN_MODEL, "Fake main")
    rows = admin.get_by_test_id("model-row")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-model-name", "Fake main")
    expect(rows.first).to_have_attribute("data-enabled", "true")

    # -- the member: the chat in two tabs of one browser ------------------------------
    member = new_context(**desktop)
    tab1 = _use(watch.attach("tab1", member.new_page()))
    tab1.goto("/")
    expect(tab1.get_by_test_id("login-form")).to_be_visible()
    login(tab1, MEMBER, MEMBER_PW)
    expect(tab1.get_by_test_id("chat-page")).to_be_visible()
    expect(tab1.get_by_test_id("chat-greeting")).to_contain_text(re.compile("ada", re.I))
    tab2 = _use(watch.attach("tab2", member.new_page()))
    tab2.goto("/")  # the same session: no login page
    expect(tab2.get_by_test_id("chat-empty")).to_be_visible()
    expect(tab2.get_by_test_id("chat-tab")).to_have_count(0)

    fake.script(
        MAIN_MODEL,
        [[Call("write_file", {"path": NOTE_PATH, "content": NOTE})], ANSWER_STREAM],
    )
    # Typed into the greeting page: the conversation is created on the way.
    _use(tab1).get_by_test_id("chat-input").fill(QUESTION)
    tab1.get_by_test_id("chat-input").press("Enter")
    page1 = tab1.get_by_test_id("chat-page")
    expect(page1).to_have_attribute("data-conversation-id", re.compile(r"\S"))
    cid = str(page1.get_attribute("data-conversation-id"))
    expect(tab1.get_by_test_id("message").filter(has_text=QUESTION)).to_have_count(1)
    assert url_hash(tab1) == f"#/?c={cid}"

    # The other tab learns of the new conversation over its WebSocket and shows it.
    expect(_tab(tab2, cid)).to_be_visible()
    expect(_tab(tab2, cid)).to_contain_text(QUESTION[:20])
    _use(tab2)
    _tab(tab2, cid).get_by_test_id("chat-tab-select").click()
    expect(tab2.get_by_test_id("chat-page")).to_have_attribute("data-conversation-id", cid)
    assert url_hash(tab2) == f"#/?c={cid}"

    # The write to the shared notes waits for the member, in both tabs.
    for tab in (tab1, tab2):
        expect(tab.get_by_test_id("chat-page")).to_have_attribute(
            "data-status", "awaiting_approval"
        )
        card = _tool_card(tab, "write_file")
        expect(card).to_have_count(1)
        expect(card).to_have_attribute("data-status", "awaiting_approval")
        expect(card.get_by_test_id("approval-card")).to_be_visible()
        expect(card.get_by_test_id("approval-approve")).to_be_enabled()
        expect(tab.get_by_test_id("message").filter(has_text=QUESTION)).to_have_count(1)
    # Why it asks comes with the live event only: the history's calls carry no reason, so
    # the tab that loaded the conversation afterwards shows the card without one.
    expect(tab1.get_by_test_id("approval-reason")).to_contain_text("shared memory")
    expect(_tab(tab1, cid).get_by_test_id("chat-tab-busy")).to_be_visible()
    shot(_use(tab1), "chat-01-approval-desktop")

    # Approved in the second tab; the answer streams into both.
    _use(tab2).get_by_test_id("approval-approve").click()
    stream = _watch_stream({"tab1": tab1, "tab2": tab2}, ANSWER, ANSWER_HEAD)
    for name, (partials, seconds) in stream.items():
        print(f"{name}: {len(partials)} partial answers over {seconds:.2f} s before the whole")
        assert partials, f"{name}: the answer appeared all at once, it did not stream"
        for partial in partials:
            assert ANSWER.startswith(partial), (name, partial)
        lengths = [len(p) for p in partials]
        assert lengths == sorted(lengths), f"{name}: the text shrank: {partials}"
    partials, seconds = stream["tab1"]
    assert len(partials) >= 3 and seconds >= 0.5, (
        f"tab1 saw {len(partials)} partial texts over {seconds:.2f} s: {partials}"
    )

    for tab in (tab2, tab1):
        _use(tab)
        _wait_idle(tab, ANSWER)
        card = _tool_card(tab, "write_file")
        expect(card).to_have_attribute("data-status", "done")
        expect(card.get_by_test_id("tool-status")).to_have_attribute("data-status", "done")
        expect(tab.get_by_test_id("approval-card")).to_have_count(0)
        assert f"Created {NOTE_PATH}" in _result_text(card)
        expect(_tab(tab, cid).get_by_test_id("chat-tab-busy")).to_have_count(0)
    shot(tab1, "chat-02-answer-desktop")

    before = _messages(tab1)
    assert [role for role, _, _ in before] == ["user", "assistant", "assistant"], before
    assert all(seq for _, seq, _ in before), before  # all from the history
    assert before[0][2] == QUESTION and before[2][2] == ANSWER
    assert _messages(tab2) == before  # both tabs show the very same conversation

    # -- a reload shows the same conversation -----------------------------------------
    tab1.reload()
    expect(tab1.get_by_test_id("chat-page")).to_have_attribute("data-conversation-id", cid)
    _wait_idle(tab1, ANSWER)
    expect(_tool_card(tab1, "write_file")).to_have_attribute("data-status", "done")
    assert _messages(tab1) == before
    assert url_hash(tab1) == f"#/?c={cid}"

    # -- a new tab, then back: the first conversation is intact -----------------------
    tab1.get_by_test_id("chat-new-tab").click()
    expect(tab1.get_by_test_id("chat-empty")).to_be_visible()
    expect(tab1.get_by_test_id("chat-tab")).to_have_count(2)
    expect(page1).to_have_attribute("data-conversation-id", re.compile(rf"^(?!{cid}$)\S+$"))
    other = str(page1.get_attribute("data-conversation-id"))
    expect(_tab(tab1, other)).to_have_attribute("data-active", "true")
    expect(_tab(tab2, other)).to_be_visible()  # the other tab follows the tab list
    expect(tab2.get_by_test_id("chat-page")).to_have_attribute("data-conversation-id", cid)
    _tab(tab1, cid).get_by_test_id("chat-tab-select").click()
    expect(page1).to_have_attribute("data-conversation-id", cid)
    expect(_tab(tab1, cid)).to_have_attribute("data-active", "true")
    _wait_idle(tab1, ANSWER)
    assert _messages(tab1) == before

    # -- the note really is in the shared memory: the model reads it back -------------
    reply = "Your recipe needs two eggs."
    fake.script(MAIN_MODEL, [[Call("read_file", {"path": NOTE_PATH})], reply])
    tab1.get_by_test_id("chat-input").fill("What is in our recipes note?")
    tab1.get_by_test_id("chat-send").click()
    _wait_idle(tab1, reply)
    card = _tool_card(tab1, "read_file")
    expect(card).to_have_attribute("data-status", "done")
    expect(card.get_by_test_id("approval-card")).to_have_count(0)  # reads need no approval
    shown = _result_text(card)
    assert "# Recipes" in shown and "Pancakes: 2 eggs" in shown, shown
    last = fake.bodies("openai")[-1]
    tool_results = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert any("Pancakes: 2 eggs" in json.dumps(r) for r in tool_results), tool_results
    _wait_idle(tab2, reply)  # the second tab followed
    assert _messages(tab2) == _messages(tab1)
    assert fake.remaining(MAIN_MODEL) == 0

    # -- the same conversation on a phone ---------------------------------------------
    handheld = new_context(viewport={"width": 375, "height": 812}, is_mobile=True, has_touch=True)
    phone = _use(watch.attach("phone", handheld.new_page()))
    phone.goto(f"/#/?c={cid}")
    expect(phone.get_by_test_id("login-form")).to_be_visible()
    login(phone, MEMBER, MEMBER_PW)
    expect(phone.get_by_test_id("chat-page")).to_have_attribute("data-conversation-id", cid)
    _wait_idle(phone, reply)
    assert _messages(phone) == _messages(tab1)
    assert phone.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    expect(phone.get_by_test_id("chat-input")).to_be_visible()
    expect(phone.get_by_test_id("chat-send")).to_be_visible()
    shot(phone, "chat-03-phone-375")

    # -- the admin adds a second model and moves it to the top ------------------------
    _add_model(_use(admin), SECOND_MODEL, "Fake second")
    expect(rows).to_have_count(2)
    _expect_order(admin, [("Fake main", "10"), ("Fake second", "20")])
    second = admin.locator('[data-testid="model-row"][data-model-name="Fake second"]')
    expect(second.get_by_test_id("model-down")).to_be_disabled()  # already last
    second.get_by_test_id("model-up").click()
    _expect_order(admin, [("Fake second", "10"), ("Fake main", "20")])
    # Enabled again only once both changes are saved (and now that it is not last).
    expect(second.get_by_test_id("model-down")).to_be_enabled()
    expect(second.get_by_test_id("model-up")).to_be_disabled()
    expect(admin.get_by_test_id("models-action-error")).to_have_count(0)
    admin.reload()
    expect(admin.get_by_test_id("models-page")).to_be_visible()
    _expect_order(admin, [("Fake second", "10"), ("Fake main", "20")])
    assert url_hash(admin) == "#/admin/models"
    shot(admin, "chat-04-models-page")

    # ... and AUTO now asks the second model first.
    fake.script(SECOND_MODEL, ["The second model answers now."])
    fake.script(MAIN_MODEL, ["The main model must not be asked."])
    _use(tab1).get_by_test_id("chat-input").fill("Who answers now?")
    tab1.get_by_test_id("chat-input").press("Enter")
    _wait_idle(tab1, "The second model answers now.")
    assert fake.remaining(SECOND_MODEL) == 0 and fake.remaining(MAIN_MODEL) == 1

    # A slash command (the page knows it from GET /api/chat/commands) is answered as a
    # note and never shown or stored as a message.
    before = len(_messages(tab1))
    tab1.get_by_test_id("chat-input").fill("/co")
    hints = tab1.get_by_test_id("chat-slash-hint")
    expect(hints).to_have_count(2)
    assert hints.evaluate_all("els => els.map(e => e.dataset.command)") == ["/compact", "/cost"]
    tab1.get_by_test_id("chat-input").fill("/cost")
    tab1.get_by_test_id("chat-input").press("Enter")
    expect(tab1.get_by_test_id("chat-note").filter(has_text="tokens in")).to_have_count(1)
    assert len(_messages(tab1)) == before
    assert not any(text == "/cost" for _, _, text in _messages(tab1))


def _add_model(admin: Page, wire_id: str, name: str) -> None:
    admin.get_by_test_id("model-add").click()
    dialog = admin.get_by_test_id("model-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_test_id("model-provider")).to_contain_text("Fake OpenAI")
    dialog.get_by_test_id("model-wire-id").fill(wire_id)
    dialog.get_by_test_id("model-name").fill(name)
    tools = dialog.locator('[data-testid="model-cap"][data-capability="tools"]')
    expect(tools).to_be_checked()  # the chat's tools need it; the default
    dialog.get_by_test_id("model-save").click()
    expect(dialog).to_have_count(0)
    expect(admin.get_by_test_id("models-flash")).to_contain_text(name)
    expect(admin.locator(f'[data-testid="model-row"][data-model-name="{name}"]')).to_be_visible()


def _expect_order(admin: Page, order: list[tuple[str, str]]) -> None:
    rows = admin.get_by_test_id("models-list").get_by_test_id("model-row")
    expect(rows).to_have_count(len(order))
    for i, (name, priority) in enumerate(order):
        expect(rows.nth(i)).to_have_attribute("data-model-name", name)
        expect(rows.nth(i)).to_have_attribute("data-priority", priority)


def _until_answered(api: Api, cid: str, answer: str) -> None:
    """Until the stored history of `cid` holds `answer` and the turn is over."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        items = api.get(f"/api/conversations/{cid}/messages").json()
        convs = {c["id"]: c for c in api.get("/api/conversations").json()}
        if convs[cid]["status"] == "idle" and any(answer in str(it) for it in items):
            return
        time.sleep(0.05)
    raise AssertionError(f"no answer {answer!r} in {cid} within 20 s")
