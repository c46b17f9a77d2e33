"""A background task's end wakes an idle conversation in an open browser tab: Debian's
Chromium driven by Playwright against a real `skald serve`, the fake provider as the
model. ada asks for a background task; the assistant says it started and the chat goes
idle; when the helper fails, its error text arrives in the open tab and the assistant
answers without anyone typing. A second task is cancelled from the Tasks page in
another tab, and the cancellation arrives the same way.

Launch flags, the skip rule (and its failure under `SKALD_CI`) and the console and CSP
watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import Call, Error, FakeLLM, Hang, ToolCalls
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household
from ui_support import (
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    browser_fixture,  # noqa: F401
    fake_fixture,  # noqa: F401
    open_context,
    report_failure,
    sign_in,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Page, expect

PW = "ada's long password"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path, ("ada", PW)) as srv:
        yield srv


def _assistant(page: Page, text: str):  # type: ignore[no-untyped-def]
    return page.locator('[data-testid="message"][data-role="assistant"][data-seq]').filter(
        has_text=text
    )


def _user(page: Page, text: str):  # type: ignore[no-untyped-def]
    return page.locator('[data-testid="message"][data-role="user"]').filter(has_text=text)


def _send(page: Page, text: str) -> None:
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("chat-send").click()


def _idle_after(page: Page, answer: str) -> None:
    expect(_assistant(page, answer)).to_have_count(1)
    expect(page.get_by_test_id("chat-page")).to_have_attribute("data-status", "idle")


@pytest.mark.timeout(120)
def test_a_background_task_wakes_the_idle_conversation_in_an_open_tab(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    admin.add_model(fake.base_url_openai, "fake-a")  # AUTO: the helpers
    admin.add_model(fake.base_url_openai, "fake-b")  # the chat, pinned below
    ada = Api(server.url)
    ada.login("ada", PW)
    r = ada.post("/api/chat", json={"text": "/model fake-b"})
    conversation = r.json()["conversation_id"]

    watch = SignedInWatch()
    context = open_context(browser, server, timeout=15_000)
    try:
        chat = watch.attach("chat", context.new_page())
        sign_in(chat, "ada", PW)
        chat.goto(f"/#/?c={conversation}")
        expect(chat.get_by_test_id("chat-page")).to_have_attribute(
            "data-conversation-id", conversation
        )

        # 1. The helper fails (after a first step, so the chat is idle by then).
        fail = {"mode": "start", "title": "tides", "task": "Find the tide tables for Genoa"}
        fake.script(
            "fake-b",
            [[Call("background_task", fail)], "Started the tide lookup.",
             "Sorry: the tide lookup failed, the tide service is closed."],
        )  # fmt: skip
        fake.script(
            "fake-a",
            [ToolCalls([Call("list_files", {"path": "~"})], delay=2.0),
             Error(400, "the tide service is closed")],
        )  # fmt: skip
        _send(chat, "look up the tides in the background")
        _idle_after(chat, "Started the tide lookup.")
        # Nobody types: the failure arrives in this tab and the assistant relays it.
        relay = _user(chat, 'The background task "tides" failed.')
        expect(relay).to_have_count(1)
        expect(relay).to_contain_text("the tide service is closed")
        _idle_after(chat, "Sorry: the tide lookup failed, the tide service is closed.")

        # 2. A helper that never finishes, cancelled from the Tasks page in another tab.
        long = {"mode": "start", "title": "long job", "task": "Count the stars"}
        fake.script(
            "fake-b",
            [[Call("background_task", long)], "Started the long job.",
             "The long job was cancelled, as you asked."],
        )  # fmt: skip
        fake.script("fake-a", [Hang()])
        _send(chat, "count the stars in the background")
        _idle_after(chat, "Started the long job.")
        tasks = watch.attach("tasks", context.new_page())
        tasks.goto("/#/tasks")
        item = tasks.locator('[data-testid="task-item"][data-state="running"]')
        expect(item).to_have_count(1)
        item.get_by_test_id("task-item-cancel").click()
        expect(tasks.locator('[data-testid="task-item"][data-state="cancelled"]')).to_have_count(1)
        chat.bring_to_front()
        expect(_user(chat, 'The background task "long job" was cancelled.')).to_have_count(1)
        _idle_after(chat, "The long job was cancelled, as you asked.")
        assert not watch.problems, watch.problems
    except Exception:
        report_failure(server, watch, "tasks")
        raise
    finally:
        context.close()
