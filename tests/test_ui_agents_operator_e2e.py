"""An agent the operator put in the data directory's `agents/` shows on the Agents page
with its own icon and its friendly description in the member's language (a real
`skald serve`, Chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess, household
from test_agents_operator import add_agent
from ui_support import PLAYWRIGHT_MISSING, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    add_agent(tmp_path / "data" / "agents", "recipes")
    with household(tmp_path) as srv:
        yield srv


@pytest.mark.timeout(120)
def test_an_operator_agent_appears_on_the_agents_page_in_italian(
    server: ServerProcess, browser: Browser
) -> None:
    with watched_page(browser, server, ADMIN, ADMIN_PW, prefix="agents-operator") as page:
        page.get_by_test_id("nav-agents").click()
        card = page.locator('[data-testid="agent-card"][data-agent="recipes"]')
        expect(card).to_have_attribute("data-role", "helper")
        expect(card).to_have_attribute("data-added", "true")
        expect(card.get_by_test_id("agent-icon")).to_have_text("🍲")
        expect(card.get_by_test_id("agent-description")).to_have_text("Finds a recipe for you")
        page.get_by_test_id("locale-picker").select_option("it")
        expect(card.get_by_test_id("agent-description")).to_have_text("Ti trova una ricetta")
        expect(card.locator(".card__title")).to_have_text("Recipe finder")
