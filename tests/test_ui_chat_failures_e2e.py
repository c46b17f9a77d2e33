"""Failures in the chat as a member sees them, in a real browser (Debian's Chromium via
Playwright) against a real `skald serve` and the fake provider: an answer that breaks
off keeps its text with "cut off" under it, and a failure reads as a plain sentence in
the member's language, also after a reload (issue 16 faults 1 and 6).

Launch flags, the skip rule and the console watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import re

import pytest
from fake_llm import Drop, Error, FakeLLM
from harness import ServerProcess
from ui_support import PLAYWRIGHT_MISSING, server_fixture, speaking, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

MEMBER, MEMBER_PW = "ada", "ada's long password"
# The Italian sentences the page must show (web/i18n/it.json, chat.error.<code>).
IT_INTERRUPTED = "Il servizio del modello si è fermato a metà della risposta. Riprova."
IT_NOT_FOUND = "Il servizio del modello non conosce questo modello."

server = server_fixture((MEMBER, MEMBER_PW), model="fake-main")


@pytest.mark.timeout(90)
def test_a_broken_answer_keeps_its_text_and_failures_read_as_plain_words(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    speaking(server, MEMBER, MEMBER_PW, "it").close()
    fake.script("fake-main", [Drop("Il gatto dorme sul"), Error(404)])
    with watched_page(
        browser, server, MEMBER, MEMBER_PW, prefix="chat-failures", locale="it-IT"
    ) as page:
        page.get_by_test_id("chat-input").fill("Dove dorme il gatto?")
        page.get_by_test_id("chat-send").click()
        note = page.get_by_test_id("chat-turn-error")
        expect(note).to_have_count(1)
        expect(note).to_have_attribute("data-code", "interrupted")
        expect(note).to_contain_text(IT_INTERRUPTED)
        expect(note).not_to_contain_text("RemoteProtocolError")
        expect(page.get_by_test_id("chat-error-detail")).to_have_count(0)  # not an admin
        kept = page.locator('[data-testid="message"][data-role="assistant"][data-seq]')
        expect(kept).to_contain_text("Il gatto dorme sul")
        expect(page.get_by_test_id("message-interrupted")).to_have_count(1)

        page.get_by_test_id("chat-input").fill("Riprova")
        page.get_by_test_id("chat-send").click()
        expect(note).to_have_count(2)
        expect(note.nth(1)).to_have_attribute("data-code", "not_found")
        expect(note.nth(1)).to_contain_text(IT_NOT_FOUND)

        # After a reload the history says the same: the kept text, its mark, the failure.
        page.reload()
        expect(page.get_by_test_id("chat-page")).to_have_attribute(
            "data-conversation-id", re.compile(r"\S")
        )
        expect(kept).to_contain_text("Il gatto dorme sul")
        expect(page.get_by_test_id("message-interrupted")).to_have_count(1)
        recorded = page.get_by_test_id("chat-turn-error")
        expect(recorded).to_have_count(1)  # the 404 turn: a failure record with no text
        expect(recorded).to_have_attribute("data-code", "not_found")
        expect(recorded).to_contain_text(IT_NOT_FOUND)
