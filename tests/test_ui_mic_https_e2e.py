"""The microphone over plain http on the home network: browsers give the microphone
only to https pages and to localhost, so at `http://<box name>:9000` the button stays
in the composer, greyed, and a tap says why (in the member's language) instead of the
button vanishing. On `http://127.0.0.1` (a secure context) it is the usual button.

The home-network address is simulated with Chromium's host resolver: `skald.lan`
resolves to 127.0.0.1, and Chromium treats it like any LAN name (not secure).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household
from ui_support import (
    CHROMIUM_ARGS,
    CSP_RECORDER,
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    browser_or_skip,
    report_failure,
    sign_in,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import expect, sync_playwright

LAN_NAME = "skald.lan"
WHY = {"en": "only when Skald is opened over https", "it": "solo se Skald è aperto in https"}


class LanWatch(SignedInWatch):
    """Also lets through Chromium's note that it ignores the server's
    Cross-Origin-Opener-Policy on an http origin that is not localhost (true, and the
    very situation under test)."""

    @staticmethod
    def expected(text: str, url: str) -> bool:
        return (
            SignedInWatch.expected(text, url)
            or "Cross-Origin-Opener-Policy header has been ignored" in text
        )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path) as srv:
        yield srv


@pytest.mark.timeout(120)
def test_over_plain_http_on_the_home_network_the_microphone_says_it_needs_https(
    server: ServerProcess,
) -> None:
    executable = browser_or_skip()
    lan_url = server.url.replace("127.0.0.1", LAN_NAME)
    args = [*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {LAN_NAME} 127.0.0.1"]
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    watch = LanWatch()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=args, headless=True)
        try:
            for lang, why in WHY.items():
                assert admin.patch("/api/auth/me", json={"locale": lang}).status_code == 200
                context = browser.new_context(
                    base_url=lan_url, locale="en-US", viewport={"width": 375, "height": 740}
                )
                context.set_default_timeout(10_000)
                context.add_init_script(CSP_RECORDER)
                page = watch.attach(f"lan-{lang}", context.new_page())
                sign_in(page, ADMIN, ADMIN_PW)
                assert page.evaluate("window.isSecureContext") is False
                mic = page.get_by_test_id("chat-mic")
                expect(mic).to_have_attribute("data-state", "unavailable")
                mic.click()
                note = page.get_by_test_id("chat-mic-why")
                expect(note).to_contain_text(why)
                box = note.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
                context.close()

            # The same app on the loopback address is a secure context: the usual button.
            context = browser.new_context(base_url=server.url, locale="en-US")
            page = watch.attach("loopback", context.new_page())
            sign_in(page, ADMIN, ADMIN_PW)
            expect(page.get_by_test_id("chat-mic")).to_have_attribute("data-state", "idle")
            expect(page.get_by_test_id("chat-mic-why")).to_have_count(0)
            context.close()
            assert not watch.problems, watch.problems
        except BaseException:
            report_failure(server, watch, "mic-https")
            raise
        finally:
            browser.close()
            admin.close()
