"""The Sign-in providers page in a real browser (issue 29 item 5): an administrator
enters the household's own OAuth client at phone and desktop widths; the secret is a
masked field, never shown again (the page says it is set), and a member's navigation
has no such page and its address says so.
"""

from __future__ import annotations

from contextlib import closing

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import PLAYWRIGHT_MISSING, api_as, server_fixture, watched_scenario

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

MEMBER, MEMBER_PW = "bea", "bea's rather long password"
SECRET = "hh-ui-secret-4b7e19d02c5a"

server = server_fixture((MEMBER, MEMBER_PW))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("width", [375, 1280])
def test_an_admin_enters_a_sign_in_provider_whose_secret_is_never_shown_again(
    server: ServerProcess, browser: Browser, width: int
) -> None:
    viewport = {"width": width, "height": 900}
    with (
        closing(api_as(server)) as admin,
        watched_scenario(
            browser, server, prefix=f"providers-{width}", viewport=viewport
        ) as scenario,
    ):
        page = scenario.page(ADMIN, ADMIN_PW, name="admin")
        page.goto("/#/admin/sign-in-providers")
        expect(page.get_by_test_id("providers-empty")).to_be_visible()
        page.get_by_test_id("provider-add").locator("summary").click()
        form = page.get_by_test_id("provider-add")
        form.get_by_test_id("provider-slug").fill("google")
        form.get_by_test_id("provider-display_name").fill("Google (ours)")
        form.get_by_test_id("provider-authorize_url").fill("https://accounts.example/o/auth")
        form.get_by_test_id("provider-token_url").fill("https://accounts.example/token")
        form.get_by_test_id("provider-client_id").fill("ours.apps.example")
        secret = form.get_by_test_id("provider-client_secret")
        assert secret.get_attribute("type") == "password"
        secret.fill(SECRET)
        form.get_by_test_id("provider-extra").fill("access_type=offline\nprompt=consent")
        form.get_by_test_id("provider-save").click()

        saved = page.locator('[data-testid="provider"][data-slug="google"]').first
        expect(saved).to_contain_text("google")
        expect(saved.get_by_test_id("provider-client_secret")).to_have_value("")
        expect(saved).to_contain_text("(set)")
        listed = admin.get("/api/sign-in-providers").json()
        assert listed[0]["extra_params"] == {"access_type": "offline", "prompt": "consent"}
        assert listed[0]["has_secret"] is True
        page.reload()
        expect(page.locator('[data-testid="provider"][data-slug="google"]').first).to_be_visible()
        assert SECRET not in page.content()

        member = scenario.page(MEMBER, MEMBER_PW, name="member")
        expect(member.get_by_test_id("nav-connectors")).to_have_count(1)
        expect(member.get_by_test_id("nav-admin-sign-in-providers")).to_have_count(0)
        member.context.close()
