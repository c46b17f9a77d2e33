"""The profile's API tokens card in Chromium (issue 28): a member makes a token, copies
it (shown this once, gone after a reload), it works over HTTP, an administrator's People
page shows how many she holds (never which), and revoking it ends it; at 375 px in
Italian and 1280 px in English, nothing wider than the screen."""

from __future__ import annotations

import httpx
import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    Scenario,
    server_fixture,
    speaking,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

MEMBER, MEMBER_PW = "ada", "ada's long password"
WIDER = "() => document.documentElement.scrollWidth > innerWidth"
WORDS = {
    "it": {
        "title": "Token API",
        "create": "Crea token",
        "copied": "Copiato",
        "revoke": "Revoca",
        "count": "Token API: 1",
    },
    "en": {
        "title": "API tokens",
        "create": "Create token",
        "copied": "Copied",
        "revoke": "Revoke",
        "count": "API tokens: 1",
    },
}

server = server_fixture((MEMBER, MEMBER_PW))


def _me(server: ServerProcess, token: str) -> int:
    r = httpx.get(
        f"{server.url}/api/auth/me", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    return r.status_code


def _admin_sees_the_count(scenario: Scenario, lang: str, width: int, token: str) -> None:
    """The People page: the member's row says how many tokens she holds, no more."""
    speaking(scenario.server, ADMIN, ADMIN_PW, lang).close()
    page = scenario.page(ADMIN, ADMIN_PW, name=f"people-{lang}")
    page.goto("/#/admin/users")
    row = page.locator(f'[data-testid="user-row"][data-username="{MEMBER}"]')
    expect(row.get_by_test_id("user-api-tokens")).to_have_text(WORDS[lang]["count"])
    own = page.locator(f'[data-testid="user-row"][data-username="{ADMIN}"]')
    expect(own.get_by_test_id("user-active")).to_be_visible()
    expect(own.get_by_test_id("user-api-tokens")).to_have_count(0)  # none: nothing shown
    assert "Home Assistant" not in page.content() and token not in page.content()
    assert not page.evaluate(WIDER), f"the People page is wider than {width} px"
    page.context.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("width", "lang"), [(375, "it"), (1280, "en")])
def test_a_member_creates_copies_and_revokes_an_api_token_on_the_profile_page(
    server: ServerProcess, browser: Browser, width: int, lang: str
) -> None:
    words = WORDS[lang]
    speaking(server, MEMBER, MEMBER_PW, lang).close()
    with watched_scenario(
        browser,
        server,
        prefix=f"tokens-{lang}",
        viewport={"width": width, "height": 900},
        locale="it-IT" if lang == "it" else "en-US",
    ) as scenario:
        clipboard = ["clipboard-read", "clipboard-write"]
        page = scenario.page(MEMBER, MEMBER_PW, name=f"tokens-{lang}", permissions=clipboard)
        page.goto("/#/profile")
        card = page.get_by_test_id("tokens-card")
        expect(card.locator("h2")).to_have_text(words["title"])
        card.get_by_test_id("token-name").fill("Home Assistant")
        create = card.get_by_test_id("token-create")
        expect(create).to_have_text(words["create"])
        create.click()
        secret = card.get_by_test_id("token-secret")
        expect(secret).to_be_visible()
        token = secret.inner_text().strip()
        assert token.startswith("skald_"), token
        expect(card.get_by_test_id("token-item")).to_have_count(1)
        expect(card.get_by_test_id("token-item")).to_contain_text("Home Assistant")
        assert not page.evaluate(WIDER), f"the card is wider than {width} px"
        # Copy: the token is on the clipboard, exactly.
        card.get_by_test_id("token-copy").click()
        expect(card.get_by_test_id("token-copy")).to_have_text(words["copied"])
        assert page.evaluate("() => navigator.clipboard.readText()") == token
        assert _me(server, token) == 200
        _admin_sees_the_count(scenario, lang, width, token)
        # Shown once: after a reload the card lists the token, never its secret.
        page.reload()
        expect(card.get_by_test_id("token-item")).to_have_count(1)
        expect(card.get_by_test_id("token-secret")).to_have_count(0)
        assert token[len("skald_") + 13 :] not in page.content()
        # Revoke: gone from the list, and the next request with it is 401.
        revoke = card.get_by_test_id("token-revoke")
        expect(revoke).to_have_text(words["revoke"])
        revoke.click()
        expect(card.get_by_test_id("token-item")).to_have_count(0)
        assert _me(server, token) == 401
        assert not page.evaluate(WIDER)
