"""The microphone over plain http on the home network: browsers give the microphone
only to https pages and to localhost, so at `http://<box name>:9000` the button stays
in the composer, greyed, and a tap says why (in the member's language) instead of the
button vanishing. On `http://127.0.0.1` (a secure context) it is the usual button.
Run at 375 px in Italian and at 1280 px in English; the note fits the width.

The home-network address is simulated with Chromium's host resolver: `skald.lan`
resolves to 127.0.0.1, and Chromium treats it like any LAN name (not secure).
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    BOTH_WIDTHS,
    CHROMIUM_ARGS,
    CSP_RECORDER,
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    browser_or_skip,
    fits,
    report_failure,
    server_fixture,
    sign_in,
    speaking,
    ui_text,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import expect, sync_playwright

LAN_NAME = "skald.lan"


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


# One server for both widths: the runs change only the administrator's language.
server = server_fixture(scope="module")


@pytest.mark.timeout(120)
@BOTH_WIDTHS
def test_over_plain_http_on_the_home_network_the_microphone_says_it_needs_https(
    server: ServerProcess, width: int, lang: str
) -> None:
    executable = browser_or_skip()
    lan_url = server.url.replace("127.0.0.1", LAN_NAME)
    args = [*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {LAN_NAME} 127.0.0.1"]
    viewport: Any = {"width": width, "height": 740}
    admin = speaking(server, ADMIN, ADMIN_PW, lang)
    watch = LanWatch()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=args, headless=True)
        try:
            context = browser.new_context(base_url=lan_url, locale="en-US", viewport=viewport)
            context.set_default_timeout(10_000)
            context.add_init_script(CSP_RECORDER)
            page = watch.attach(f"lan-{lang}", context.new_page())
            sign_in(page, ADMIN, ADMIN_PW)
            assert page.evaluate("window.isSecureContext") is False
            mic = page.get_by_test_id("chat-mic")
            expect(mic).to_have_attribute("data-state", "unavailable")
            mic.click()
            note = page.get_by_test_id("chat-mic-why")
            expect(note).to_contain_text(ui_text(lang, "chat.mic_needs_https"))
            box = note.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, box
            fits(page, width)
            context.close()

            # The same app on the loopback address is a secure context: the usual button.
            context = browser.new_context(base_url=server.url, locale="en-US", viewport=viewport)
            page = watch.attach("loopback", context.new_page())
            sign_in(page, ADMIN, ADMIN_PW)
            expect(page.get_by_test_id("chat-mic")).to_have_attribute("data-state", "idle")
            expect(page.get_by_test_id("chat-mic-why")).to_have_count(0)
            context.close()
            assert not watch.problems, watch.problems
        except BaseException:
            report_failure(server, watch, f"mic-https-{width}")
            raise
        finally:
            browser.close()
            admin.close()
