"""Approval cards a family member understands, in a real browser (Debian's Chromium,
Playwright) against a real `skald serve` and the fake provider: a command to run, a file
edit and a household-note write each show, in English and in Italian, what would happen
in plain words with the substance in view (the command in monospace, the readable change
with added and removed lines and no `@@` markers, the note's text) while the tool's name
and raw arguments stay folded under "technical details". Every call is rejected, so
nothing runs: the sandbox is enabled (the command tool exists) but points at a Docker
socket that is not there, and no container is ever made.

Launch flags, the skip rule, the console and CSP watching and the screenshot folder are
those of `test_ui_e2e.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import Call, FakeLLM, Text
from harness import ServerProcess, household
from ui_support import PLAYWRIGHT_MISSING, api_as, shot, sign_in, watched_scenario

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Locator, Page, expect

MODEL = "fake-approvals"
PEOPLE = {"en": ("bea", "bea's rather long password"), "it": ("ugo", "ugo's rather long password")}
LIST = "Shopping\nmilk\nbread\n"
WORDS = {
    "en": {
        "command": "Run this command in your sandbox",
        "edit": "Change the file Documents/list.txt",
        "note": "Write to the household notes",
        "details": "Technical details",
        "why_command": "Running a command in your sandbox",
        "why_note": "Writing to the household's shared memory",
    },
    "it": {
        "command": "Eseguire questo comando nella tua sandbox",
        "edit": "Modificare il file Documents/list.txt",
        "note": "Scrivere nelle note della famiglia",
        "details": "Dettagli tecnici",
        "why_command": "Eseguire un comando nella tua sandbox",
        "why_note": "Scrivere nella memoria condivisa della famiglia",
    },
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(
        tmp_path,
        *PEOPLE.values(),
        SKALD_SANDBOX_ENABLED="true",
        SKALD_SANDBOX_DOCKER_HOST=f"unix://{tmp_path}/no-docker.sock",
    ) as srv:
        yield srv


def _waiting_card(page: Page, tool: str) -> Locator:
    card = page.locator(
        f'[data-testid="tool-card"][data-tool="{tool}"][data-status="awaiting_approval"]'
    )
    expect(card).to_have_count(1)
    return card.get_by_test_id("approval-card")


def _folded(card: Locator, words: dict[str, str], tool: str) -> None:
    details = card.get_by_test_id("approval-details")
    expect(details).to_contain_text(words["details"])
    expect(details).not_to_have_attribute("open", "")
    expect(card.get_by_test_id("approval-tool")).not_to_be_visible()  # the name is folded
    expect(card.get_by_test_id("approval-tool")).to_have_text(tool)


def _cards_in(page: Page, lang: str, fake: FakeLLM, server: ServerProcess) -> None:
    words = WORDS[lang]
    name, password = PEOPLE[lang]
    fake.script(
        MODEL,
        [
            [Call("execute_cmd", {"command": "ls -la ~/Documents | sort"})],
            [
                Call(
                    "edit_file",
                    {"path": "Documents/list.txt", "old_text": "milk", "new_text": "oat milk"},
                )
            ],
            [
                Call(
                    "write_file",
                    {"path": "shared-memory/garden.md", "content": "# Garden\nWater the tomatoes."},
                )
            ],
            Text(f"Nothing was done ({lang})."),
        ],
    )
    sign_in(page, name, password)
    page.get_by_test_id("chat-input").fill("Tidy up, please")
    page.get_by_test_id("chat-send").click()

    card = _waiting_card(page, "execute_cmd")
    expect(card.get_by_test_id("approval-what")).to_contain_text(words["command"])
    command = card.get_by_test_id("approval-command")
    expect(command).to_be_visible()
    expect(command).to_have_text("ls -la ~/Documents | sort")
    assert "monospace" in command.evaluate("e => getComputedStyle(e).fontFamily") or "mono" in (
        command.evaluate("e => getComputedStyle(e).fontFamily").lower()
    )
    _folded(card, words, "execute_cmd")
    # Why it asks: a seeded rule's reason in the reader's language.
    expect(card.get_by_test_id("approval-reason")).to_have_text(words["why_command"])
    shot(page, f"approval-{lang}-command")
    card.get_by_test_id("approval-reject").click()

    card = _waiting_card(page, "edit_file")
    expect(card.get_by_test_id("approval-what")).to_contain_text(words["edit"])
    diff = card.get_by_test_id("approval-diff")
    expect(diff).to_be_visible()
    removed = diff.locator('[data-testid="diff-line"][data-kind="del"]')
    added = diff.locator('[data-testid="diff-line"][data-kind="add"]')
    expect(removed).to_have_count(1)
    expect(removed).to_contain_text("milk")
    expect(removed).not_to_contain_text("oat")
    expect(added).to_have_count(1)
    expect(added).to_contain_text("oat milk")
    expect(diff).not_to_contain_text("@@")
    expect(diff).not_to_contain_text("+++")
    _folded(card, words, "edit_file")
    # A rule the household wrote keeps its own words.
    expect(card.get_by_test_id("approval-reason")).to_have_text("Changing documents")
    shot(page, f"approval-{lang}-edit")
    card.get_by_test_id("approval-reject").click()

    card = _waiting_card(page, "write_file")
    expect(card.get_by_test_id("approval-what")).to_contain_text(words["note"])
    expect(card.get_by_test_id("approval-what")).to_contain_text("garden.md")
    note = card.get_by_test_id("approval-diff")
    expect(note).to_be_visible()
    expect(note.locator('[data-kind="add"]')).to_contain_text(["# Garden", "Water the tomatoes."])
    _folded(card, words, "write_file")
    expect(card.get_by_test_id("approval-reason")).to_have_text(words["why_note"])
    shot(page, f"approval-{lang}-note")
    card.get_by_test_id("approval-reject").click()

    expect(
        page.locator('[data-testid="message"][data-role="assistant"]').filter(
            has_text=f"Nothing was done ({lang})."
        )
    ).to_be_visible()
    # Rejected: the list is as it was.
    assert _home_file(server, name).read_text() == LIST


def _home_file(server: ServerProcess, username: str) -> Path:
    api = api_as(server)
    users = {u["username"]: u["id"] for u in api.get("/api/users").json()}
    api.close()
    return server.data / "homes" / users[username] / "Documents" / "list.txt"


@pytest.mark.timeout(180)
def test_approval_cards_show_the_command_and_the_readable_change_in_english_and_italian(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    admin = api_as(server)
    admin.add_model(fake.base_url_openai, MODEL)
    # Edits under Documents/ ask first (the seeded rules let a member's own home pass).
    r = admin.post(
        "/api/approvals/rules",
        json={
            "group": "default",
            "tool_pattern": "edit_file",
            "path_pattern": "Documents/**",
            "action": "require",
            "priority": 5,
            "description": "changing documents",
        },
    )
    assert r.status_code == 201, r.text
    admin.close()
    for name, password in PEOPLE.values():
        member = api_as(server, name, password)
        if name == PEOPLE["it"][0]:
            assert member.patch("/api/auth/me", json={"locale": "it"}).status_code == 200
        member.close()
        path = _home_file(server, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(LIST)

    with watched_scenario(
        browser,
        server,
        prefix="approvals",
        color_scheme="light",
        viewport={"width": 1280, "height": 900},
        timeout=15_000,
    ) as scenario:
        for lang in ("en", "it"):
            page = scenario.open(lang, locale="en-US" if lang == "en" else "it-IT")
            _cards_in(page, lang, fake, server)
