"""Tool cards in a real browser speak to the person, in their language: a plain title
per tool (a connector's tool titled from its server's and tool's names), and for a step
that failed or did not run a sentence about what happened, with the raw tool id and the
text the model was given behind "Details" / "Technical details" (closed).

A real `skald serve` and the fake provider: the model first writes a `write_file` call
cut at the output limit (the server answers it "Not run: your answer reached the output
limit..."), then calls a connector tool that does not exist (an error), then answers.
The same conversation is read in English, Italian and French after a reload, at 375 px
(Italian first) and at 1280 px (English first); the cards fit the width.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fake_llm import Call, FakeLLM, ToolCalls
from harness import ADMIN_PW, ServerProcess, household
from ui_support import (
    BOTH_WIDTHS,
    PLAYWRIGHT_MISSING,
    add_fake_model,
    fits,
    speaking,
    watched_page,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Locator, Page, expect

CONNECTOR_TOOL = "mcp__weather_station__get_forecast"
# (language, title of write_file, the cut call's sentence, the failure's sentence)
EXPECTED = {
    "en": ("Write a file", "answer was cut off", "This step did not work."),
    "it": ("Scrivere un file", "si è interrotta", "Questo passo non ha funzionato."),
    "fr": ("Écrire un fichier", "a été coupée", "Cette étape n'a pas fonctionné."),
}
TECHNICAL = {"en": "Technical details", "it": "Dettagli tecnici", "fr": "Détails techniques"}


# One server and one fake provider for both widths; each width's run is its own
# administrator (`who`): the chat opens a person's latest conversation, so a shared
# account would show the other run's cards as well.
@pytest.fixture(scope="module")
def shared_fake() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, shared_fake: FakeLLM
) -> Iterator[ServerProcess]:
    admins = [(who(width), ADMIN_PW) for width in (375, 1280)]
    with household(tmp_path_factory.mktemp("toolcards"), *admins, role="admin") as srv:
        add_fake_model(srv, shared_fake)
        yield srv


def who(width: int) -> str:
    return f"admin{width}"


def card(page: Page, tool: str) -> Locator:
    return page.locator(f'[data-testid="tool-card"][data-tool="{tool}"]')


def check_cards(page: Page, lang: str) -> None:
    title, cut, failed = EXPECTED[lang]
    cut_card = card(page, "write_file")
    expect(cut_card.get_by_test_id("tool-name")).to_have_text(title)
    expect(cut_card.get_by_test_id("tool-said")).to_contain_text(cut)
    tech = cut_card.get_by_test_id("tool-result")
    expect(tech.locator("summary")).to_have_text(TECHNICAL[lang])
    expect(tech).not_to_have_attribute("open", "")  # the model's words stay folded away
    expect(tech.locator("pre")).to_contain_text(
        "Not run: your answer reached the output limit", use_inner_text=False
    )
    expect(cut_card.get_by_test_id("tool-id")).to_have_text("write_file", use_inner_text=False)

    conn = card(page, CONNECTOR_TOOL)
    expect(conn.get_by_test_id("tool-name")).to_have_text("Get forecast · Weather station")
    expect(conn.get_by_test_id("tool-said")).to_have_text(re.compile(re.escape(failed)))
    expect(conn.get_by_test_id("tool-id")).to_have_text(CONNECTOR_TOOL, use_inner_text=False)
    for name in page.get_by_test_id("tool-name").all_inner_texts():
        assert "_" not in name, name  # no raw id as a title


@pytest.mark.timeout(120)
@BOTH_WIDTHS
def test_tool_cards_show_plain_titles_and_sentences_with_the_model_text_behind_details(
    server: ServerProcess, shared_fake: FakeLLM, browser: Browser, width: int, lang: str
) -> None:
    shared_fake.script(
        "fake-main",
        [
            ToolCalls(
                [Call("write_file", {"path": "notes/list.md", "content": "milk, eggs " * 20})],
                cut_at=25,
            ),
            ToolCalls([Call(CONNECTOR_TOOL, {"city": "Oslo"})]),
            "All done.",
        ],
    )
    admin = speaking(server, who(width), ADMIN_PW, lang)
    viewport = {"width": width, "height": 800}
    try:
        with watched_page(
            browser, server, who(width), ADMIN_PW, prefix=f"toolcards-{width}", viewport=viewport
        ) as page:
            page.get_by_test_id("chat-input").fill("Save my shopping list")
            page.get_by_test_id("chat-send").click()
            expect(
                page.locator('[data-testid="message"][data-seq]').filter(has_text="All done.")
            ).to_have_count(1)
            for each in sorted(EXPECTED, key=lambda x: x != lang):  # the width's language first
                assert admin.patch("/api/auth/me", json={"locale": each}).status_code == 200
                page.reload()
                expect(card(page, CONNECTOR_TOOL)).to_have_count(1)
                check_cards(page, each)
                fits(page, width)
    finally:
        admin.close()
