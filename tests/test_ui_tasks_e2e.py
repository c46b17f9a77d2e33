"""A background task's end wakes an idle conversation in an open browser tab: Debian's
Chromium driven by Playwright against a real `skald serve`, the fake provider as the
model. ada asks for a background task; the assistant says it started and the chat goes
idle; when the helper fails, its error text arrives in the open tab and the assistant
answers without anyone typing. A second task is cancelled from the Tasks page in
another tab, and the cancellation arrives the same way; a third, on a phone-sized
window, is cancelled from the chat's task strip above the composer. Both lists are
live through the `tasks_changed` event.

Launch flags, the skip rule (and its failure under `SKALD_CI`) and the console and CSP
watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

from contextlib import closing

import pytest
from fake_llm import Call, Error, FakeLLM, Hang, ToolCalls
from harness import ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    SHOTS,
    SignedInWatch,
    api_as,
    server_fixture,
    ui_text,
    watched_page,
)

from skald.features.schedule.words import phrase

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Page, expect

PW = "ada's long password"
# The Tasks form's 7 o'clock in the hour list, written the page's way (Intl, not i18n).
SEVEN = {"en": "7 AM", "it": "7"}
# A bad cron's refusal: the server's own words in English; in Italian the code's sentence
# and, below it, the server's words too (its explanation of the fields has no translation).
BAD_CRON = {"en": "not valid", "it": ui_text("it", "error.code.invalid_input")}
FIELDS_HELP = "use 5 fields 'minute hour day-of-month month day-of-week'"
server = server_fixture(("ada", PW))


def _assistant(page: Page, text: str):  # type: ignore[no-untyped-def]
    return page.locator('[data-testid="message"][data-role="assistant"][data-seq]').filter(
        has_text=text
    )


def _user(page: Page, text: str):  # type: ignore[no-untyped-def]
    return page.locator('[data-testid="message"][data-role="user"]').filter(has_text=text)


def _a_job_that_hangs(fake: FakeLLM, title: str, task: str, cancelled: str) -> None:
    """The chat model (fake-b) starts the background task `title`, whose helper (fake-a)
    never finishes, and says `cancelled` once it is cancelled."""
    start = {"mode": "start", "title": title, "task": task}
    fake.script("fake-b", [[Call("background_task", start)], f"Started the {title}.", cancelled])
    fake.script("fake-a", [Hang()])


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
    admin = api_as(server)
    admin.add_model(fake.base_url_openai, "fake-a")  # AUTO: the helpers
    admin.add_model(fake.base_url_openai, "fake-b")  # the chat, pinned below
    ada = api_as(server, "ada", PW)
    r = ada.post("/api/chat", json={"text": "/model fake-b"})
    conversation = r.json()["conversation_id"]

    watch = SignedInWatch()
    with watched_page(
        browser, server, "ada", PW, prefix="tasks", watch=watch, name="chat", timeout=15_000
    ) as chat:
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
        relay = _user(chat, 'The background task "tides" FAILED')
        expect(relay).to_have_count(1)
        expect(relay).to_contain_text("the tide service is closed")
        _idle_after(chat, "Sorry: the tide lookup failed, the tide service is closed.")
        # The chat's task strip says how it ended, with no Cancel left.
        failed = chat.locator('[data-testid="chat-task"][data-state="failed"]')
        expect(failed).to_contain_text("tides")
        expect(failed.get_by_test_id("chat-task-cancel")).to_have_count(0)

        # 2. A helper that never finishes, cancelled from the Tasks page in another tab.
        _a_job_that_hangs(
            fake, "long job", "Count the stars", "The long job was cancelled, as you asked."
        )
        # The Tasks page is open before the task exists: the `tasks_changed` event (not
        # its slow poll, 30 s, longer than the 15 s wait) brings the task in.
        tasks = watch.attach("tasks", chat.context.new_page())
        tasks.goto("/#/tasks")
        expect(tasks.get_by_test_id("tasks-page")).to_be_visible()
        chat.bring_to_front()
        _send(chat, "count the stars in the background")
        _idle_after(chat, "Started the long job.")
        running = chat.locator('[data-testid="chat-task"][data-state="running"]')
        expect(running).to_contain_text("long job")
        tasks.bring_to_front()
        item = tasks.locator('[data-testid="task-item"][data-state="running"]')
        expect(item).to_have_count(1)
        item.get_by_test_id("task-item-cancel").click()
        expect(tasks.locator('[data-testid="task-item"][data-state="cancelled"]')).to_have_count(1)
        chat.bring_to_front()
        expect(
            _user(chat, 'The background task "long job" was STOPPED before it finished')
        ).to_have_count(1)
        _idle_after(chat, "The long job was cancelled, as you asked.")
        # The other tab's cancel reached the chat's strip too.
        cancelled = chat.locator('[data-testid="chat-task"][data-state="cancelled"]')
        expect(cancelled).to_contain_text("long job")

        # 3. On a phone (375 px): cancelled from the strip above the composer.
        chat.set_viewport_size({"width": 375, "height": 740})
        _a_job_that_hangs(
            fake, "slow job", "Sort the library", "The slow job was cancelled from the chat."
        )
        _send(chat, "sort the library in the background")
        _idle_after(chat, "Started the slow job.")
        strip_item = chat.locator('[data-testid="chat-task"][data-state="running"]')
        expect(strip_item).to_contain_text("slow job")
        cancel = strip_item.get_by_test_id("chat-task-cancel")
        expect(cancel).to_be_in_viewport()
        assert chat.evaluate("document.documentElement.scrollWidth") <= 375
        cancel.click()
        expect(
            chat.locator('[data-testid="chat-task"][data-state="cancelled"]').filter(
                has_text="slow job"
            )
        ).to_have_count(1)
        expect(
            _user(chat, 'The background task "slow job" was STOPPED before it finished')
        ).to_have_count(1)
        _idle_after(chat, "The slow job was cancelled from the chat.")
        SHOTS.mkdir(parents=True, exist_ok=True)
        chat.screenshot(path=str(SHOTS / "chat-task-strip-375.png"))


class _PreviewRefusals(SignedInWatch):
    """Also the one 400 the scenario asks for: the preview refusing a bad cron."""

    @staticmethod
    def expected(text: str, url: str) -> bool:
        refused = "status of 400" in text and url.endswith("/api/schedule/preview")
        return refused or SignedInWatch.expected(text, url)


@pytest.mark.timeout(120)
def test_a_reminder_is_made_on_the_tasks_page_with_its_preview_at_phone_and_desk_widths(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """No model is set up at all: the Tasks page still makes a reminder. Each change of
    the time picker shows the server's preview (in words, the next runs); a bad cron
    shows its refusal before Save, with the server's explanation of the fields in
    Italian too; nothing overflows a phone's width. The phone's run
    is in Italian, the desk's in English: the texts come from the i18n files and the
    server's schedule words. Then `/remind` in
    the chat answers with a confirmation line and the reminder is on the Tasks page."""
    with (
        watched_page(
            browser,
            server,
            "ada",
            PW,
            prefix="tasks-form",
            watch=_PreviewRefusals(),
            name="tasks",
            timeout=15_000,
        ) as page,
        closing(api_as(server, "ada", PW)) as ada,
    ):
        for width, lang, text in ((375, "it", "check the oven"), (1280, "en", "call grandma")):
            assert ada.patch("/api/auth/me", json={"locale": lang}).status_code == 200
            page.set_viewport_size({"width": width, "height": 800})
            page.goto("/#/tasks")
            page.reload()
            expect(page.locator("html")).to_have_attribute("lang", lang)
            page.get_by_test_id("tasks-new").click()
            form = page.get_by_test_id("job-form")
            form.get_by_test_id("job-form-text").fill(text)
            # Every weekday at 7:30: the sentence and three next runs, from the server.
            form.get_by_test_id("job-form-mode").select_option("weekdays")
            form.get_by_test_id("job-form-hour").select_option("7")
            form.get_by_test_id("job-form-minute").select_option("30")
            expect(form.get_by_test_id("job-form-hour").locator("option:checked")).to_have_text(
                SEVEN[lang]
            )
            expect(form.get_by_test_id("job-form-preview-text")).to_contain_text(
                phrase(lang, "next", d=phrase(lang, "weekdays", t="7:30"), w="")
            )
            expect(form.get_by_test_id("job-form-preview-run")).to_have_count(3)
            # A bad expression: the server's refusal shows and Save waits.
            form.get_by_test_id("job-form-mode").select_option("cron")
            form.get_by_test_id("job-form-cron").fill("61 * * * *")
            refusal = form.get_by_test_id("job-form-preview-error")
            expect(refusal).to_contain_text(BAD_CRON[lang])
            expect(refusal).to_contain_text(FIELDS_HELP)  # in every language
            expect(refusal.get_by_test_id("error-detail")).to_have_count(1 if lang == "it" else 0)
            expect(form.get_by_test_id("job-form-save")).to_be_disabled()
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"tasks-bad-cron-{width}.png"), full_page=True)
            # In 45 minutes, once: saved, and listed as a plain reminder. Not sooner: a
            # reminder that fires while the test runs opens its own conversation, and the
            # chat step below would type into whichever one the page shows by then.
            form.get_by_test_id("job-form-mode").select_option("in")
            form.get_by_test_id("job-form-minutes").fill("45")
            expect(form.get_by_test_id("job-form-preview-text")).to_contain_text(
                phrase(lang, "once", w="")
            )
            expect(form.get_by_test_id("job-form-preview-run")).to_have_count(1)
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            page.screenshot(path=str(SHOTS / f"tasks-new-reminder-{width}.png"))
            form.get_by_test_id("job-form-save").click()
            job = page.get_by_test_id("task-job").filter(has_text=text)
            expect(job).to_have_count(1)
            expect(job.get_by_test_id("task-job-kind")).to_have_text(
                ui_text(lang, "tasks.kind_reminder")
            )
            expect(page.get_by_test_id("job-form")).to_have_count(0)
        # Edit: the form opens with the job's time (its preview too); made a prompt.
        grandma = page.get_by_test_id("task-job").filter(has_text="call grandma")
        grandma.get_by_test_id("task-job-edit").click()
        edit = grandma.get_by_test_id("job-form")
        expect(edit.get_by_test_id("job-form-mode")).to_have_value("at")
        expect(edit.get_by_test_id("job-form-preview-text")).to_contain_text("once, ")
        edit.get_by_test_id("job-form-kind").select_option("prompt")
        expect(edit.get_by_test_id("job-form-model")).to_have_value("")  # Automatic
        edit.get_by_test_id("job-form-save").click()
        expect(grandma.get_by_test_id("task-job-kind")).to_have_text("Ask the assistant")
        # The chat's /remind, with no model set up either: a confirmation line.
        # Typed once the chat has opened its latest conversation (a reminder's): text
        # typed while it was still opening was lost now and then (1 run in 3).
        with page.expect_response(lambda r: r.url.endswith("/messages")):
            page.goto("/#/")
        page.get_by_test_id("chat-input").fill("/remind in 5 minutes make the tea")
        page.get_by_test_id("chat-input").press("Enter")
        note = page.get_by_test_id("chat-note").filter(has_text="make the tea")
        expect(note).to_contain_text("Reminder set for ")
        page.goto("/#/tasks")
        expect(page.get_by_test_id("task-job").filter(has_text="make the tea")).to_have_count(1)
        # In Italian the hours read 0-23 whatever the device's language (the browser's
        # own time field followed the device and asked an Italian page for "07:30 PM").
        page.get_by_test_id("locale-picker").select_option("it")
        expect(page.locator("html")).to_have_attribute("lang", "it")
        page.get_by_test_id("tasks-new").click()
        page.get_by_test_id("job-form-mode").select_option("daily")
        page.get_by_test_id("job-form-hour").select_option("19")
        expect(page.get_by_test_id("job-form-hour").locator("option:checked")).to_have_text("19")
        assert fake.bodies() == []  # no model anywhere in this
