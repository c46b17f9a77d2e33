"""The usage charts in Chromium: real usage rows (scripted model turns through a real
`skald serve` and the fake provider) drawn by the vendored uPlot on the Usage page and
the Overview, at 1280 and 375 px, with nothing wider than a phone's screen and no CSP
violation (the library and its stylesheet come from our own origin)."""

from __future__ import annotations

import pytest
from fake_llm import FakeLLM, Text
from harness import ADMIN, ADMIN_PW, ServerProcess
from ui_support import PLAYWRIGHT_MISSING, SignedInWatch, api_as, server_fixture, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, Page, expect

MEMBER, MEMBER_PW = "ada", "ada's long password"
# None when the page fits the screen's width, else the element reaching furthest right.
FITS = """() => {
  if (document.documentElement.scrollWidth <= innerWidth) return null;
  let worst = null;
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.right > innerWidth + 0.5 && (!worst || r.right > worst.right)) {
      worst = { right: r.right, what: el.tagName + '.' + el.className + ' ' + (el.dataset.testid || '') };
    }
  }
  const spill = [...document.querySelectorAll('body *')].filter(
    (el) => el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0
  ).map((el) => el.tagName + '.' + el.className + ' ' + el.scrollWidth + '/' + el.clientWidth).slice(-4);
  return { doc: document.documentElement.scrollWidth, w: innerWidth, worst, spill };
}"""
MODEL = "fake-main"
server = server_fixture((MEMBER, MEMBER_PW))


def _turns(server: ServerProcess, fake: FakeLLM) -> None:
    admin = api_as(server)
    admin.add_model(fake.base_url_openai, MODEL)
    fake.script(MODEL, [Text(f"answer {i}", input_tokens=100, output_tokens=20) for i in range(5)])
    for who, password, n in ((ADMIN, ADMIN_PW, 2), (MEMBER, MEMBER_PW, 3)):
        api = admin if who == ADMIN else api_as(server, who, password)
        for i in range(n):
            r = api.post("/api/chat", json={"text": f"question {i}"})
            assert r.status_code == 200 and r.json()["status"] == "done", r.text
    admin.close()


def _chart_drawn(page: Page, testid: str, series: int, step: str = "day") -> None:
    """The chart drawn with `series` lines for figures of `step` (a day's hours after the
    period switch: until its figures arrive the month's drawing is still up, then it is
    replaced, so waiting for the count alone races the redraw)."""
    chart = page.get_by_test_id(testid)
    expect(chart).to_have_attribute("data-step", step)
    expect(chart).to_have_attribute("data-drawn", str(series))
    canvas = chart.locator("canvas")
    expect(canvas).to_have_count(1)
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 100, box
    assert page.evaluate(FITS) is None, page.evaluate(FITS)


@pytest.mark.timeout(120)
def test_usage_charts_render_from_real_turns_at_1280_and_375_px(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    _turns(server, fake)
    watch = SignedInWatch()
    for width in (1280, 375):
        with watched_page(
            browser,
            server,
            ADMIN,
            ADMIN_PW,
            prefix=f"usage-{width}",
            watch=watch,
            name=f"admin-{width}",
            viewport={"width": width, "height": 900},
        ) as page:
            page.goto("/#/usage")
            totals = page.get_by_test_id("usage-totals")
            # Admins see everyone's: 5 turns, 600 tokens, two people, one model.
            expect(totals.locator("[data-measure=turns] strong")).to_have_text("5")
            expect(totals.locator("[data-measure=tokens] strong")).to_have_text("600")
            _chart_drawn(page, "usage-chart-members", 2)
            _chart_drawn(page, "usage-chart-models", 1)
            page.get_by_test_id("usage-period").locator("[data-value=day]").click()
            expect(page.get_by_test_id("usage-charts")).to_have_attribute("data-period", "day")
            _chart_drawn(page, "usage-chart-members", 2, step="hour")
            # The Overview's dashboard draws the same from the same rows.
            page.goto("/#/overview")
            expect(page.get_by_test_id("dashboard")).to_be_visible()
            _chart_drawn(page, "usage-chart-members", 2)
            expect(page.get_by_test_id("dash-health-line")).to_have_count(4)
    # A member sees their own figures only.
    with watched_page(
        browser,
        server,
        MEMBER,
        MEMBER_PW,
        prefix="usage-member",
        watch=watch,
        name="member",
        viewport={"width": 375, "height": 800},
    ) as page:
        page.goto("/#/usage")
        expect(
            page.get_by_test_id("usage-totals").locator("[data-measure=turns] strong")
        ).to_have_text("3")
        _chart_drawn(page, "usage-chart-members", 1)
        expect(page.get_by_test_id("usage-everyone")).to_have_count(0)
