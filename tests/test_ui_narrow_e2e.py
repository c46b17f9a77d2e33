"""Every page on a phone (375 px wide) in English, Italian and French: nothing wider
than the screen. One Chromium, one `skald serve`, the administrator (who sees every
page) walking the pages listed by `GET /api/pages` in each language, plus the login
page, the notification panel, the conversation search, the composer while an answer
runs and the language picker; in Italian and French, no English words on a page.

The rule: at 375 px `document.documentElement.scrollWidth <= innerWidth` on every
page, no box of the page cut off at the left edge, and an opened panel (notifications, conversation search) lies inside the
viewport. The trap: overflow shows only in the longer languages (a French button
row, an Italian label), so a check in English alone passes while the page scrolls
sideways in fr; and a panel positioned `absolute` does not widen the document when
its parent clips it, so panels are measured by their own box.
"""

from __future__ import annotations

import re
from contextlib import closing

import pytest
from fake_llm import FakeLLM, Hang
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import (
    PLAYWRIGHT_MISSING,
    SignedInWatch,
    api_as,
    server_fixture,
    sign_in,
    watched_scenario,
)

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Page, expect

WIDTH = 375
MODEL = "a-rather-long-local-model-name"
LANGS = ("en", "it", "fr")
LOADING = re.compile(r"^\S+…$")
# Where the page is wider than the screen, and the widest element that causes it.
OVERFLOW = """() => {
  const w = window.innerWidth;
  const doc = document.documentElement.scrollWidth;
  // A box pushed past the LEFT edge (a flex row wider than its parent with its items
  // aligned to the end) is cut off without widening the page: scrollWidth misses it.
  const cut = [...document.querySelectorAll('main *, header *')].filter((el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.right > 0 && r.left < -0.5 && getComputedStyle(el).visibility !== 'hidden';
  }).map((el) => el.tagName + '.' + el.className + ' ' + (el.dataset.testid || '') + ' left=' + Math.round(el.getBoundingClientRect().left));
  if (doc <= w && !cut.length) return null;
  let worst = null;
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.right > w + 0.5 && (!worst || r.right > worst.right)) {
      worst = { right: r.right, what: el.tagName + '.' + el.className + ' ' + (el.dataset.testid || '') };
    }
  }
  // Text wider than its box (a long unbroken word) widens the page without any box doing so.
  const spill = [...document.querySelectorAll('body *')].filter(
    (el) => el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 && getComputedStyle(el).overflowX === 'visible'
  ).map((el) => el.tagName + '.' + el.className).slice(-3);
  return { doc, w, worst, spill, cut: cut.slice(0, 3) };
}"""
# An element's box against the viewport (null when inside).
OUTSIDE = """(el) => {
  const r = el.getBoundingClientRect();
  const inside = r.left >= -0.5 && r.top >= -0.5 && r.right <= innerWidth + 0.5 && r.bottom <= innerHeight + 0.5;
  return inside ? null : { left: r.left, top: r.top, right: r.right, bottom: r.bottom, w: innerWidth, h: innerHeight };
}"""
# A <select> whose chosen text is cut: the widest option against the select's inner box.
CLIPPED_SELECT = """(el) => {
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = getComputedStyle(el).font;
  const text = el.options[el.selectedIndex].text;
  const cs = getComputedStyle(el);
  const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const need = ctx.measureText(text).width;
  return need > room + 0.5 ? { text, need, room } : null;
}"""


class NarrowWatch(SignedInWatch):
    """Also lets through Chromium's ERR_NETWORK_CHANGED: another test's Docker network
    appearing on the machine aborts a fetch in flight (not the page's doing)."""

    @staticmethod
    def expected(text: str, url: str) -> bool:
        return SignedInWatch.expected(text, url) or "ERR_NETWORK_CHANGED" in text


server = server_fixture()


def settle(page: Page, path: str) -> None:
    """The page at `path` shown and loaded: its navigation entry current, no request in
    flight and no "Loading…" left (every language's word for it ends with "…")."""
    nav = page.locator(f'#sidebar a[href="#{path}"]')
    expect(nav).to_have_attribute("aria-current", "page")
    # The page's module loaded and the page drawn (before that `main` holds only a
    # placeholder, so every measure passed on an empty page).
    expect(page.get_by_test_id("page-loading")).to_have_count(0)
    expect(page.locator("main h1, main h2").first).to_be_visible()
    page.wait_for_load_state("networkidle")
    expect(page.locator("main p.muted").filter(has_text=LOADING)).to_have_count(0)
    # The last render laid out: fonts in, two frames drawn (a measure taken between a
    # fetch's answer and its paint saw the Models page before its buttons were placed).
    page.evaluate(
        "document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))"
    )


def overflow(page: Page, where: str) -> list[str]:
    found = page.evaluate(OVERFLOW)
    return (
        [
            f"{where}: page {found['doc']} px wide (screen {found['w']}): {found['worst']} {found['spill']} cut at the left: {found['cut']}"
        ]
        if found
        else []
    )


# English words no Italian or French sentence uses: text left untranslated on a page.
ENGLISH = re.compile(r"\b(the|your|you|with|this|that|and|are|is|yet|will|can't|cannot)\b", re.I)
# The page's own words, without what people typed or named (code, addresses, names), and
# without what the page itself marks as English: words that exist only in English (the
# doctor's findings on the Overview) stand under a translated "Technical details" with
# `lang="en"` (docs/dev/web.md).
PAGE_TEXT = """() => {
  const main = document.querySelector('main').cloneNode(true);
  for (const el of main.querySelectorAll('code, pre, .mono, input, textarea, select, [data-user-text], [lang="en"]')) el.remove();
  return main.innerText;
}"""


def english(page: Page, where: str) -> list[str]:
    text = page.evaluate(PAGE_TEXT)
    found = [text[max(0, m.start() - 30) : m.end() + 30] for m in ENGLISH.finditer(text)]
    return [f"{where}: English on the page: {found[:4]}"] if found else []


def outside(page: Page, testid: str, where: str) -> list[str]:
    found = page.get_by_test_id(testid).evaluate(OUTSIDE)
    return [f"{where}: {testid} outside the screen: {found}"] if found else []


def clipped(page: Page, testid: str, where: str) -> list[str]:
    found = page.get_by_test_id(testid).evaluate(CLIPPED_SELECT)
    return [f"{where}: {testid} cuts its text: {found}"] if found else []


def check_panels(page: Page, lang: str) -> list[str]:
    """The chat page's panels: the notification panel and the conversation search."""
    problems = []
    page.goto("/#/")
    expect(page.get_by_test_id("chat-page")).to_be_visible()
    page.get_by_test_id("notif-bell").click()
    expect(page.get_by_test_id("notif-panel")).to_be_visible()
    problems += outside(page, "notif-panel", f"{lang} notifications")
    # ...and wide enough to read: across the screen, not squeezed under the bell.
    notif = page.get_by_test_id("notif-panel").bounding_box()
    if not notif or notif["width"] < WIDTH - 40:
        problems.append(f"{lang} notifications: a narrow panel ({notif})")
    page.keyboard.press("Escape")
    page.get_by_test_id("chat-history-toggle").click()
    expect(page.get_by_test_id("chat-history")).to_be_visible()
    problems += outside(page, "chat-history", f"{lang} conversation search")
    # It opens under the tabs, above the message box, never beneath it.
    panel = page.get_by_test_id("chat-history").bounding_box()
    box = page.locator(".composer__box").bounding_box()
    assert panel and box
    if panel["y"] >= box["y"]:
        problems.append(f"{lang} conversation search: opens below the composer ({panel}, {box})")
    page.keyboard.press("Escape")
    return problems


def check_composer(page: Page, fake: FakeLLM, lang: str) -> list[str]:
    """While an answer runs, Stop sits beside Send: the composer's buttons stay on one
    row (at 375 px Send used to drop to a line of its own under the others)."""
    fake.script(MODEL, [Hang("…")])
    page.get_by_test_id("chat-input").fill("ciao")
    page.get_by_test_id("chat-send").click()
    expect(page.get_by_test_id("chat-stop")).to_be_visible()
    middles = {}
    for testid in ("chat-attach", "chat-model-picker", "chat-stop", "chat-send"):
        box = page.get_by_test_id(testid).bounding_box()
        assert box, testid
        middles[testid] = round(box["y"] + box["height"] / 2)
    page.get_by_test_id("chat-stop").click()
    expect(page.get_by_test_id("chat-stop")).to_have_count(0)
    if max(middles.values()) - min(middles.values()) > 8:
        return [f"{lang} composer: its buttons wrap onto two rows {middles}"]
    return []


@pytest.mark.timeout(240)
def test_every_page_fits_a_phone_screen_in_every_language(
    server: ServerProcess, browser: Browser, fake: FakeLLM
) -> None:
    admin = api_as(server)
    # Pages with content: a model (its row of buttons) and a backup (its table).
    admin.add_model(fake.base_url_openai, MODEL)
    assert admin.post("/api/backups/run").status_code == 200
    paths = [p["path"] for p in admin.get("/api/pages").json()]
    assert "/admin/backups" in paths and "/admin/models" in paths, paths
    problems: list[str] = []
    with (
        closing(admin),
        watched_scenario(
            browser,
            server,
            NarrowWatch(),
            prefix="narrow",
            viewport={"width": WIDTH, "height": 740},
        ) as scenario,
    ):
        page = scenario.open("admin")
        for lang in LANGS:
            # The login page before a session, in the browser's language.
            page.goto("/")
            expect(page.get_by_test_id("login-username")).to_be_visible()
            page.evaluate(f"localStorage.setItem('skald.locale', '{lang}')")
            page.reload()
            expect(page.get_by_test_id("login-username")).to_be_visible()
            problems += overflow(page, f"{lang} login")
            problems += clipped(page, "locale-picker", f"{lang} login")
            assert admin.patch("/api/auth/me", json={"locale": lang}).status_code == 200
            sign_in(page, ADMIN, ADMIN_PW)
            assert page.evaluate("document.documentElement.lang") == lang
            for path in paths:
                page.goto(f"/#{path}")
                settle(page, path)
                if path == "/overview":
                    # Its health lines answer after the page is drawn (the doctor's checks
                    # run at view time): read them too, not only the frame around them.
                    expect(page.get_by_test_id("dash-health-line")).to_have_count(4)
                problems += overflow(page, f"{lang} {path}")
                if lang != "en":
                    problems += english(page, f"{lang} {path}")
            page.get_by_test_id("nav-toggle").click()
            problems += clipped(page, "locale-picker", f"{lang} sidebar")
            page.get_by_test_id("nav-toggle").click()
            problems += check_panels(page, lang)
            problems += check_composer(page, fake, lang)
            page.get_by_test_id("nav-toggle").click()
            page.get_by_test_id("nav-logout").click()
            expect(page.get_by_test_id("login-username")).to_be_visible()
        assert not problems, "\n".join(problems)
