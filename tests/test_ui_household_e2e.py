"""Household round 2 in a real browser (Debian's Chromium) at 375 px, against a real
`skald serve` and the fake provider: the wizard's last step after the model step was
skipped says the chat needs a model and leads to the Models page (en, it, fr); a model
without the `tools` capability gets the chat's one-line notice; and with no speech model
an answer has no read-aloud button; the Models page sets what a model is given. The
wizard's end is also checked at 1280 px in English (one more page, not a second run).

Launch flags and the skip rule are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_llm import FakeLLM, Text
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    CHROMIUM_ARGS,
    PLAYWRIGHT_MISSING,
    api_as,
    browser_or_skip,
    fits,
    go,
    login,
    server_fixture,
    sign_in,
    ui_text,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import expect, sync_playwright

PHONE: Any = {"width": 375, "height": 740}
DESK: Any = {"width": 1280, "height": 800}
# Where the wizard's end is checked: a phone in each language, a desk in English.
WIZARD_END = [("en", PHONE), ("it", PHONE), ("fr", PHONE), ("en", DESK)]

server = server_fixture()


@pytest.mark.timeout(180)
def test_a_skipped_model_step_a_tool_less_model_and_no_speech_model_are_said_plainly(
    server: ServerProcess,
) -> None:
    executable = browser_or_skip()
    admin = api_as(server)
    assert admin.patch("/api/instance", json={"setup_step": "done"}).status_code == 200
    with FakeLLM() as fake, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            # The wizard's end with no model: each language at 375 px, English at 1280.
            for locale, viewport in WIZARD_END:
                title = ui_text(locale, "setup.done_no_model_title")
                context = browser.new_context(base_url=server.url, locale=locale, viewport=viewport)
                context.set_default_timeout(20_000)
                page = context.new_page()
                page.goto("/")
                login(page, ADMIN, ADMIN_PW)
                expect(page.get_by_test_id("app-shell")).to_be_visible()
                assert admin.patch("/api/auth/me", json={"locale": locale}).status_code == 200
                page.reload()  # the new locale
                # The chat's own first redirect may land after the hash is set: `go`.
                go(page, "#/welcome", "welcome-done")
                done = page.get_by_test_id("welcome-done")
                expect(done).to_have_attribute("data-ready", "no-model")
                expect(done).to_contain_text(title)
                expect(page.get_by_test_id("welcome-start-chat")).to_have_count(0)
                fits(page, viewport["width"])
                page.get_by_test_id("welcome-add-model").click()
                expect(page.get_by_test_id("models-page")).to_be_visible()
                context.close()
            assert admin.patch("/api/auth/me", json={"locale": "en"}).status_code == 200

            # A chat model without tools: the notice, and an answer without read aloud.
            r = admin.post(
                "/api/llm/providers",
                json={
                    "name": "Fake",
                    "kind": "openai_compatible",
                    "base_url": fake.base_url_openai,
                },
            )
            assert r.status_code == 201, r.text
            r = admin.post(
                "/api/llm/models",
                json={
                    "provider_id": r.json()["id"],
                    "model": "fake-plain",
                    "name": "Plain",
                    "capabilities": [],
                },
            )
            assert r.status_code == 201, r.text
            fake.script("fake-plain", [Text("Hello there.")])
            context = browser.new_context(base_url=server.url, locale="en-US", viewport=PHONE)
            context.set_default_timeout(20_000)
            page = sign_in(context.new_page(), ADMIN, ADMIN_PW)
            notice = page.get_by_test_id("chat-no-tools")
            expect(notice).to_contain_text("This model cannot use tools")
            expect(notice.get_by_role("link")).to_have_attribute("href", "#/tasks")
            page.get_by_test_id("chat-input").fill("hello")
            page.get_by_test_id("chat-send").click()
            answer = page.locator('[data-testid="message"][data-role="assistant"]').first
            expect(answer).to_contain_text("Hello there.")
            expect(answer.get_by_test_id("message-copy")).to_be_visible()
            expect(answer.get_by_test_id("message-read-aloud")).to_have_count(0)

            # The Models page edits what the model is given.
            page.goto("/#/admin/models")
            page.get_by_test_id("model-edit").first.click()
            page.get_by_test_id("model-profile").select_option("compact")
            page.get_by_test_id("model-save").click()
            expect(page.get_by_test_id("model-dialog")).to_have_count(0)
            [row] = admin.get("/api/llm/models").json()
            assert row["prompt_profile"] == "compact", row
            context.close()
        finally:
            browser.close()
