"""Connectors in a real browser (Debian's Chromium through Playwright, phone width)
against a real `skald serve` whose feed is a local directory: the administrator installs
a connector from the Marketplace page, switches it on in the Connectors page, and its
tools, listed by the running server process, appear there; on the People page a
member's grant is shown and revoked.

Launch flags, the skip rule, the console and CSP watching are those of `test_ui_e2e.py`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from connector_support import simple_feed
from harness import ServerProcess
from prerequisites import unavailable
from ui_support import (
    PLAYWRIGHT_MISSING,
    connector_admin_page,
    feed_household,
    install_connector,
    switch_on,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    feed = simple_feed(tmp_path / "feed")
    bea = ("bea", "bea's rather long password")
    with feed_household(tmp_path, feed, bea, settings="household_on_host = true\n") as srv:
        yield srv


@pytest.mark.timeout(180)
def test_an_admin_installs_from_the_feed_switches_the_connector_on_and_sees_its_tools(
    server: ServerProcess, browser: Browser
) -> None:
    with connector_admin_page(
        browser, server, "connectors", 375, 812, is_mobile=True, has_touch=True
    ) as page:
        page.goto("/#/admin/marketplace")
        expect(page.get_by_test_id("marketplace-page")).to_be_visible()
        item = page.get_by_test_id("market-item").filter(has_text="Clock")
        expect(item).to_be_visible()
        item.get_by_test_id("market-install").click()
        expect(item.get_by_test_id("market-installed")).to_be_visible(timeout=60_000)
        page.goto("/#/connectors")
        card = page.locator('[data-testid="connector"][data-name="clock"]')
        expect(card).to_be_visible()
        card.get_by_test_id("connector-toggle").click()
        expect(card.get_by_test_id("connector-state")).to_have_text("Running", timeout=60_000)
        card.get_by_test_id("connector-tools").locator("summary").click()
        expect(card.locator('[data-tool="mcp__clock__now"]')).to_be_visible()
        # Grants on the People page: bea (a member, auto_grant) has it; unticking revokes.
        page.goto("/#/admin/users")
        row = page.get_by_test_id("user-row").filter(has_text="@bea")
        row.get_by_test_id("user-edit").click()
        grant = page.locator('[data-testid="user-connector-grant"][data-connector="clock"]')
        expect(grant).to_be_checked()
        grant.click()  # the box follows the server: unticked once the revocation is done
        expect(grant).not_to_be_checked()
        page.get_by_test_id("user-edit-dialog").get_by_role("button", name="Cancel").click()
        row.get_by_test_id("user-edit").click()
        expect(grant).not_to_be_checked()


@pytest.mark.timeout(180)
def test_qr_sign_in_shows_the_code_in_a_dialog_until_the_connector_says_signed_in(
    tmp_path: Path, browser: Browser
) -> None:
    from test_connectors_device import PENDING, device_feed

    with (
        device_feed(tmp_path) as feed,
        feed_household(tmp_path, feed) as srv,
        connector_admin_page(browser, srv, "connectors-qr", 375, 812) as page,
    ):
        page.goto("/#/admin/marketplace")
        item = page.get_by_test_id("market-item").filter(has_text="Phone")
        item.get_by_test_id("market-install").click()
        expect(item.get_by_test_id("market-installed")).to_be_visible(timeout=60_000)
        card = switch_on(page, "phone")
        card.get_by_test_id("connector-device-start").click()
        dialog = page.get_by_test_id("connector-device-dialog")
        # The QR code is a real image the browser decoded, with the pairing code.
        qr = dialog.get_by_test_id("connector-device-qr")
        expect(qr).to_be_visible()
        assert qr.evaluate("img => img.complete && img.naturalWidth") == 2
        expect(dialog.get_by_test_id("connector-device-text")).to_contain_text("4242-ABCD")
        # The dialog asks again by itself until the connector reports signed in.
        status = dialog.get_by_test_id("connector-device-status")
        expect(status).to_have_attribute("data-signed-in", "true", timeout=10_000 * PENDING)
        expect(dialog.get_by_test_id("connector-device-text")).to_have_text("signed in as ada")
        expect(qr).to_have_count(0)
        dialog.get_by_test_id("connector-device-done").click()
        card.get_by_test_id("connector-device-sign-out").click()
        expect(card.get_by_test_id("connector-device-result")).to_have_text("signed out")


@pytest.mark.timeout(180)
def test_a_failed_connector_card_offers_retry_and_runs_again_once_its_server_is_back(
    tmp_path: Path, browser: Browser
) -> None:
    from test_connectors_recovery import ClockServer

    clock = ClockServer()  # not started yet: nobody listens on its port
    feed = simple_feed(tmp_path / "feed", ("clock",), clock={"transport": "http", "url": clock.url})
    try:
        with feed_household(tmp_path, feed, settings="max_restarts = 0\n") as srv:
            install_connector(srv, "clock")
            with connector_admin_page(browser, srv, "connectors-retry", 1280, 900) as page:
                card = switch_on(page, "clock", "Failed")
                clock.start()
                card.get_by_test_id("connector-retry").click()
                expect(card.get_by_test_id("connector-state")).to_have_text(
                    "Running", timeout=60_000
                )
                expect(card.get_by_test_id("connector-retry")).to_have_count(0)
    finally:
        clock.kill()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("width", [375, 1280])
def test_a_remote_server_with_mcp_oauth_is_signed_in_in_a_popup_from_its_card(
    tmp_path: Path, browser: Browser, width: int
) -> None:
    from oauth_double import OAuthDouble
    from test_connectors_oauth import oauth_mcp_server

    with OAuthDouble() as provider, oauth_mcp_server(provider.base) as url:
        feed = simple_feed(
            tmp_path / "feed",
            ("remote",),
            remote={
                "scope": "personal",
                "transport": "http",
                "url": url,
                "auth": {"type": "oauth2"},
            },
        )
        with feed_household(tmp_path, feed, settings="max_restarts = 0\n") as srv:
            install_connector(srv, "remote")
            with connector_admin_page(
                browser, srv, f"connectors-oauth-{width}", width, 900
            ) as page:
                # Not signed in: the start fails saying so (not a bare HTTP 401).
                card = switch_on(page, "remote", "Failed")
                with page.expect_popup() as opened:
                    card.get_by_test_id("connector-oauth-start").click()
                popup = opened.value
                # The service sends the popup back to Skald; the page closes it and reads
                # the card again: signed in, and the connector starts with the token.
                try:
                    popup.wait_for_event("close", timeout=15_000)
                except Exception:
                    raise AssertionError(f"{popup.url} {page.url} {card.inner_text()}") from None
                expect(card.get_by_test_id("connector-oauth")).to_contain_text("Signed in")
                expect(card.get_by_test_id("connector-state")).to_have_text(
                    "Running", timeout=60_000
                )
                assert page.url.endswith("#/connectors")  # the page kept its place
                assert provider.token_requests[-1]["grant_type"] == "authorization_code"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("width", [375, 1280])
def test_an_admin_adds_server_memory_by_package_name_tests_it_saves_it_and_switches_it_on(
    server: ServerProcess, browser: Browser, width: int
) -> None:
    """Issue 23 item 6: "Add a server" on the Marketplace page, by npm package name; the
    Test lists the server's own tools before anything is saved."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        unavailable("node and npm are required for server-memory")
    with connector_admin_page(browser, server, f"connectors-memory-{width}", width, 900) as page:
        page.goto("/#/admin/marketplace")
        page.get_by_test_id("connector-add").click()
        form = page.get_by_test_id("connector-add-form")
        form.get_by_test_id("connector-add-kind").select_option("npm")
        form.get_by_test_id("connector-add-name").fill("memory")
        form.get_by_test_id("connector-add-package").fill(
            "@modelcontextprotocol/server-memory@2026.8.31"
        )
        form.get_by_test_id("connector-add-scope").select_option("household")
        form.get_by_test_id("connector-add-test").click()
        expect(
            form.locator('[data-testid="connector-add-tool"][data-tool="read_graph"]')
        ).to_be_visible(timeout=180_000)
        form.get_by_test_id("connector-add-save").click()
        expect(page.get_by_test_id("connector-add-dialog")).to_have_count(0, timeout=180_000)
        item = page.locator('[data-testid="market-item"][data-folder="memory"]')
        expect(item.get_by_test_id("market-installed")).to_be_visible()
        expect(item.get_by_test_id("market-source")).to_have_attribute("data-source", "household")
        card = switch_on(page, "memory", timeout=120_000)
        card.get_by_test_id("connector-tools").locator("summary").click()
        expect(card.locator('[data-tool="mcp__memory__read_graph"]')).to_be_visible()
