"""The household's first run in a real browser (Debian's Chromium, Playwright) against a
real `skald serve` on a fresh data directory, with the fake provider as the model
service: the first administrator (with progress while the key is derived), the setup
wizard (household and time zone, a provider added with Test connection and a model
picked from the fake provider's `/v1/models`, a family member with the recovery-code
step), the Overview's "to finish setting up" list emptying step by step, and the first
chat answered. Then the chat basics at 1280 px and at 375 px: retry after a failure,
regenerate (the earlier answer kept: ‹1/2›), edit and resend, copy, and search.

Launch flags, the skip rule, the console and CSP watching and the screenshot folder are
those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, Text
from harness import ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    shot,
    sign_in,
    url_hash,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, BrowserContext, Page, expect

ADMIN, ADMIN_PW = "mum", "mum's long enough password"
MEMBER, MEMBER_PW = "bea", "bea's rather long password"
MODEL = "fake-onboard"

# Records every data-testid that ever appeared, so a short-lived element (the progress
# while the first account is created) can be checked after it is gone.
SEEN_RECORDER = """
window.__seen = new Set();
new MutationObserver(() => {
  document.querySelectorAll('[data-testid]').forEach((el) => window.__seen.add(el.dataset.testid));
}).observe(document, { childList: true, subtree: true });
"""


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        llm.listed = {"gpt-4o-mini": {}}
        yield llm


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path)  # fresh: no administrator yet
    srv.start()
    yield srv
    srv.close()


def _checklist(page: Page) -> list[str]:
    page.get_by_test_id("nav-admin-models").click()  # away first: the Overview reads it anew
    expect(page.get_by_test_id("models-page")).to_be_visible()
    page.get_by_test_id("nav-overview").click()
    expect(page.get_by_test_id("home-page")).to_have_attribute("data-checklist", "loaded")
    expect(page.get_by_test_id("home-health")).to_be_visible()
    items = page.get_by_test_id("setup-checklist-item")
    return [str(items.nth(i).get_attribute("data-name")) for i in range(items.count())]


def _shown_text(page: Page) -> str:
    """The messages' text as shown (what is folded away is not in innerText)."""
    return str(page.get_by_test_id("chat-messages").evaluate("e => e.innerText"))


def _answered(page: Page, text: str) -> None:
    expect(
        page.locator('[data-testid="message"][data-role="assistant"]').filter(has_text=text)
    ).to_be_visible()
    expect(page.get_by_test_id("chat-page")).to_have_attribute("data-status", "idle")


def _send(page: Page, text: str) -> None:
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("chat-send").click()


def _new_tab(page: Page) -> None:
    before = page.get_by_test_id("chat-tab").count()
    page.get_by_test_id("chat-new-tab").click()
    expect(page.get_by_test_id("chat-tab")).to_have_count(before + 1)
    expect(page.locator('[data-testid="chat-tab"][data-active="true"]')).to_have_attribute(
        "data-status", "idle"
    )
    expect(page.get_by_test_id("chat-empty")).to_be_visible()


def _chat_basics(page: Page, fake: FakeLLM, tag: str) -> None:
    """Retry, regenerate, edit, copy and search in one conversation of `page`."""
    _new_tab(page)
    fake.script(MODEL, [400, Text(f"Gnocchi need floury potatoes {tag}")])
    _send(page, f"how do I make gnocchi {tag}?")
    expect(page.get_by_test_id("chat-turn-error")).to_be_visible()
    page.get_by_test_id("chat-retry").click()
    _answered(page, f"Gnocchi need floury potatoes {tag}")
    expect(page.get_by_test_id("chat-turn-error")).to_have_count(0)

    fake.script(MODEL, [Text(f"Boil them first {tag}")])
    page.get_by_test_id("message-regenerate").click()
    _answered(page, f"Boil them first {tag}")
    assistant = page.locator('[data-testid="message"][data-role="assistant"]')
    expect(assistant).to_have_count(1)  # the first answer was replaced, and kept: ‹ 2/2 ›
    label = assistant.get_by_test_id("message-version-label")
    expect(label).to_have_text("2/2")
    assistant.get_by_test_id("message-version-prev").click()
    expect(label).to_have_text("1/2")
    expect(assistant).to_contain_text(f"Gnocchi need floury potatoes {tag}")
    expect(assistant).not_to_contain_text(f"Boil them first {tag}")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    assistant.get_by_test_id("message-version-next").click()
    expect(label).to_have_text("2/2")
    expect(assistant).to_contain_text(f"Boil them first {tag}")

    fake.script(MODEL, [Text(f"Ricotta gnocchi are lighter {tag}")])
    user = page.locator('[data-testid="message"][data-role="user"]')
    user.get_by_test_id("message-edit").click()
    page.get_by_test_id("message-edit-input").fill(f"how do I make ricotta gnocchi {tag}?")
    page.get_by_test_id("message-edit-send").click()
    _answered(page, f"Ricotta gnocchi are lighter {tag}")
    expect(user).to_have_count(1)
    expect(user).to_contain_text(f"ricotta gnocchi {tag}")
    expect(assistant.get_by_test_id("message-versions")).to_have_count(0)  # another question
    sent = [b for b in fake.bodies() if b and b.get("model") == MODEL][-1]
    assert sum("gnocchi" in str(m.get("content")) for m in sent["messages"]) == 1

    assistant.get_by_test_id("message-copy").click()
    expect(assistant.get_by_test_id("message-copy")).to_have_attribute("data-copied", "ok")
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied == f"Ricotta gnocchi are lighter {tag}"

    _new_tab(page)
    page.get_by_test_id("chat-history-toggle").click()
    page.get_by_test_id("chat-search").fill(f"lighter {tag}")
    hit = page.get_by_test_id("chat-search-hit")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text(tag)
    hit.click()
    _answered(page, f"Ricotta gnocchi are lighter {tag}")


@pytest.mark.timeout(240)
def test_first_run_wizard_to_a_first_answer_and_the_chat_basics(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    started = time.monotonic()
    with watched_scenario(
        browser,
        server,
        prefix="onboard",
        color_scheme="light",
        timezone_id="Europe/Rome",
        permissions=["clipboard-read", "clipboard-write"],
        timeout=15_000,
    ) as scenario:
        watch = scenario.watch

        def context(**options: Any) -> BrowserContext:
            ctx = scenario.context(**options)
            ctx.add_init_script(SEEN_RECORDER)
            return ctx

        admin = watch.attach("admin", context(viewport={"width": 1280, "height": 860}).new_page())
        admin.goto(f"/#/setup?token={server.setup_token()}")
        admin.get_by_test_id("setup-username").fill(ADMIN)
        admin.get_by_test_id("setup-password").fill(ADMIN_PW)
        admin.get_by_test_id("setup-password-confirm").fill(ADMIN_PW)
        admin.get_by_test_id("setup-submit").click()
        expect(admin.get_by_test_id("setup-recovery")).to_be_visible()
        assert admin.evaluate("() => window.__seen.has('setup-progress')")
        admin.get_by_test_id("recovery-saved").click()

        # -- the wizard: the household, proposed from the browser ----------------------
        expect(admin.get_by_test_id("welcome-page")).to_have_attribute("data-step", "household")
        expect(admin.get_by_test_id("household-timezone")).to_have_value("Europe/Rome")
        admin.get_by_test_id("household-name").fill("The Rossis")
        shot(admin, "onboard-01-household")
        admin.get_by_test_id("household-save").click()
        expect(admin.get_by_test_id("welcome-page")).to_have_attribute("data-step", "model")

        # Left for the Overview: its checklist asks for a model and a backup.
        assert _checklist(admin) == ["models", "backup"]
        expect(admin.get_by_test_id("home-health")).not_to_contain_text("Everything")
        shot(admin, "onboard-02-checklist")
        admin.get_by_test_id("setup-checklist-wizard").click()
        # ...and the wizard resumes where it was left.
        expect(admin.get_by_test_id("welcome-page")).to_have_attribute("data-step", "model")

        # -- a model: the address is required for "other", Test connection, the list ----
        admin.get_by_test_id("setup-provider-kind").select_option("openai_compatible")
        expect(admin.get_by_test_id("setup-provider-url")).to_have_value("")
        expect(admin.get_by_test_id("setup-test-connection")).to_be_disabled()
        admin.get_by_test_id("setup-provider-kind").select_option("ollama")
        expect(admin.get_by_test_id("setup-provider-url")).to_have_value(
            "http://127.0.0.1:11434/v1"
        )
        admin.get_by_test_id("setup-provider-kind").select_option("openai_compatible")
        admin.get_by_test_id("setup-provider-url").fill(fake.base_url_openai)
        fake.script(MODEL, [Text("Hello, I am ready.", reasoning="A greeting is wanted here.")])
        admin.get_by_test_id("setup-test-connection").click()
        expect(admin.get_by_test_id("setup-test-result")).to_have_attribute("data-ok", "true")
        admin.get_by_test_id("setup-model-pick").select_option("gpt-4o-mini")
        expect(admin.get_by_test_id("setup-cap-vision")).to_be_checked()  # guessed
        admin.get_by_test_id("setup-model-pick").select_option(MODEL)
        expect(admin.get_by_test_id("setup-cap-vision")).not_to_be_checked()
        shot(admin, "onboard-03-model")
        admin.get_by_test_id("setup-add-model").click()

        # -- the family: a member and her recovery code --------------------------------
        expect(admin.get_by_test_id("welcome-page")).to_have_attribute("data-step", "members")
        admin.get_by_test_id("user-create-username").fill(MEMBER)
        admin.get_by_test_id("user-create-display-name").fill("Bea")
        admin.get_by_test_id("user-create-password").fill(MEMBER_PW)
        admin.get_by_test_id("user-create-submit").click()
        expect(admin.get_by_test_id("welcome-recovery")).to_be_visible()
        admin.get_by_test_id("recovery-saved").click()
        expect(admin.get_by_test_id("welcome-member")).to_have_count(1)
        admin.get_by_test_id("welcome-members-next").click()
        expect(admin.get_by_test_id("welcome-done")).to_be_visible()
        shot(admin, "onboard-04-done")

        # The checklist lost its model item; a backup empties it.
        assert _checklist(admin) == ["backup"]
        # Its item leads to the Backups page (no command to type).
        item = admin.get_by_test_id("setup-checklist-item")
        expect(item.locator("code")).to_have_count(0)
        item.get_by_test_id("setup-checklist-open").click()
        expect(admin.get_by_test_id("backups-page")).to_be_visible()
        admin.get_by_test_id("backups-run").click()
        expect(admin.get_by_test_id("backups-last")).to_have_attribute("data-ok", "true")
        assert _checklist(admin) == []
        expect(admin.get_by_test_id("setup-checklist")).to_have_count(0)
        expect(admin.get_by_test_id("home-health")).to_contain_text("Everything")

        # -- the first chat --------------------------------------------------------------
        admin.get_by_test_id("nav-home").click()
        # A suggestion tapped is sent at once.
        suggestion = admin.get_by_test_id("chat-suggestion").first
        expect(suggestion).to_have_text("Help me plan dinners for this week")
        suggestion.click()
        _answered(admin, "Hello, I am ready.")
        asked = admin.locator('[data-testid="message"][data-role="user"]')
        expect(asked).to_contain_text("Help me plan dinners for this week")
        expect(admin.get_by_test_id("chat-input")).to_have_value("")
        # The model's streamed reasoning is there, folded.
        thought = admin.get_by_test_id("chat-reasoning")
        expect(thought).to_have_count(1)
        expect(thought).not_to_have_attribute("open", "")
        expect(thought.locator(".reasoning__text")).not_to_be_visible()
        assert "A greeting" not in _shown_text(admin)
        thought.locator("summary").click()
        expect(thought.locator(".reasoning__text")).to_have_text("A greeting is wanted here.")
        system = fake.bodies()[-1]["messages"][0]["content"]
        assert "Europe/Rome" in str(system) and "The Rossis" in str(system)

        # -- chat basics on a desktop and on a phone -------------------------------------
        _chat_basics(admin, fake, "desk")
        shot(admin, "onboard-05-chat-desk")

        # -- the chat docked beside the Files page, sharing what is on screen ----------
        admin.get_by_test_id("nav-files").click()
        admin.get_by_test_id("dock-toggle").click()
        docked = admin.get_by_test_id("docked-chat")
        expect(docked.get_by_test_id("chat-page")).to_be_visible()
        expect(admin.get_by_test_id("files-page")).to_be_visible()
        docked.get_by_test_id("chat-new-tab").click()
        share = docked.get_by_test_id("chat-share-view")
        if share.get_attribute("aria-pressed") != "true":
            share.click()
        fake.script(MODEL, [Text("It is your home folder.")])
        docked.get_by_test_id("chat-input").fill("what am I looking at?")
        docked.get_by_test_id("chat-send").click()
        expect(
            docked.get_by_test_id("message").filter(has_text="It is your home folder.")
        ).to_be_visible()
        assert "#/files" in url_hash(admin)  # the page stays; the chat is beside it
        chips = docked.get_by_test_id("message-view-chip")
        expect(chips.first).to_contain_text("Files")
        typed = docked.locator('[data-testid="message"][data-role="user"] .msg__text')
        expect(typed).to_have_text("what am I looking at?")  # the view is not in the text
        asked = str(fake.bodies()[-1]["messages"])
        assert "Viewing at the time of this message" in asked and "#/files" in asked
        shot(admin, "onboard-06-docked")
        admin.get_by_test_id("dock-toggle").click()
        expect(admin.get_by_test_id("docked-chat")).to_have_count(0)
        phone = watch.attach(
            "phone",
            context(
                viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True
            ).new_page(),
        )
        sign_in(phone, MEMBER, MEMBER_PW)
        # On a phone too, a suggestion tapped is sent at once.
        fake.script(MODEL, [Text("Monday: minestrone.")])
        phone.get_by_test_id("chat-suggestion").first.tap()
        _answered(phone, "Monday: minestrone.")
        expect(phone.locator('[data-testid="message"][data-role="user"]')).to_contain_text(
            "Help me plan dinners for this week"
        )
        _chat_basics(phone, fake, "phone")
        shot(phone, "onboard-07-chat-phone")
    print(f"onboarding walkthrough took {time.monotonic() - started:.1f} s")
