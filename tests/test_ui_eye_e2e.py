"""The eye and the dock (issue 31), in Chromium: the eye is on by default; a passage
highlighted in a file on the Files page reaches the model with its line numbers when
the docked chat asks "rewrite this", once; the sent message's chips show what it
carried; the chat docks beside the Files, Tasks and Settings pages, resizable, and
keeps its draft, width and place in the conversation from one to the next; beside a
request's detail page the eye names that request (a real `skald serve`, the fake provider)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM
from harness import ADMIN, ADMIN_PW, ServerProcess, household
from ui_support import PLAYWRIGHT_MISSING, SignedInWatch, api_as, watched_page

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import Browser, expect

STORY = "Once upon a time\nthere was a fox\nwho ran fast\nand jumped high\nthe end\n"

# Select lines 2-4 of the code view's text, as a member's mouse would.
SELECT = """() => {
  const code = document.querySelector('.code-view__code code');
  const at = (offset) => {
    const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walk.nextNode())) {
      if (offset <= node.length) return [node, offset];
      offset -= node.length;
    }
    throw new Error('offset past the text');
  };
  const all = code.textContent;
  const range = document.createRange();
  range.setStart(...at(all.indexOf('there was')));
  range.setEnd(...at(all.indexOf('the end')));
  const sel = document.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}"""


@pytest.fixture
def server(tmp_path: Path, fake: FakeLLM) -> Iterator[ServerProcess]:
    with household(tmp_path) as srv:
        admin = api_as(srv)
        admin.add_model(fake.base_url_openai, "fake-main")
        story = {"path": "story.txt", "content": STORY}
        assert admin.post("/api/file", json=story).status_code < 300
        long = {"path": "long.txt", "content": "z" * 20_000 + "\n"}
        assert admin.post("/api/file", json=long).status_code < 300
        admin.close()
        yield srv


@pytest.mark.timeout(120)
def test_a_highlighted_passage_of_a_file_reaches_the_model_with_line_numbers(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    fake.script("fake-main", ["Rewritten.", "Plain answer."])
    with watched_page(browser, server, ADMIN, ADMIN_PW, prefix="eye") as page:
        page.get_by_test_id("nav-files").click()
        page.get_by_test_id("dock-toggle").click()
        docked = page.get_by_test_id("docked-chat")
        expect(docked.get_by_test_id("chat-page")).to_be_visible()
        page.goto(f"{server.url}/#/files?path=~&file=~/story.txt")
        expect(page.get_by_test_id("files-viewer-code")).to_contain_text("there was a fox")
        expect(docked.get_by_test_id("chat-share-view")).to_have_attribute("aria-pressed", "true")
        page.evaluate(SELECT)
        docked.get_by_test_id("chat-input").fill("rewrite this")
        docked.get_by_test_id("chat-send").click()
        expect(docked.get_by_test_id("message").filter(has_text="Rewritten.")).to_be_visible()
        asked = str(fake.bodies()[-1]["messages"])
        assert "selection (lines 2-4):" in asked, asked
        assert "     2\\tthere was a fox" in asked and "     4\\tand jumped high" in asked
        chips = docked.get_by_test_id("message-view-chip")
        passage = chips.filter(has_text="lines 2-4")
        expect(passage).to_have_count(1)
        # A hover shows the whole passage it carried.
        expect(passage).to_have_attribute(
            "title", "     2\tthere was a fox\n     3\twho ran fast\n     4\tand jumped high"
        )
        # Sent once, and the same view is not sent again: the next message carries none.
        docked.get_by_test_id("chat-input").fill("and now?")
        docked.get_by_test_id("chat-send").click()
        expect(docked.get_by_test_id("message").filter(has_text="Plain answer.")).to_be_visible()
        last = str(fake.bodies()[-1]["messages"][-1])
        assert "selection" not in last and "Viewing at the time" not in last, last


@pytest.mark.timeout(120)
def test_the_docked_chat_keeps_its_draft_and_scroll_across_files_tasks_and_settings(
    server: ServerProcess, browser: Browser, fake: FakeLLM
) -> None:
    with watched_page(browser, server, ADMIN, ADMIN_PW, prefix="dock") as page:
        page.get_by_test_id("nav-files").click()
        page.get_by_test_id("dock-toggle").click()
        docked = page.get_by_test_id("docked-chat")
        # Resizable: its left edge dragged 120 pixels to the left widens it, and stays.
        before = docked.bounding_box()
        handle = page.get_by_test_id("dock-handle").bounding_box()
        assert before is not None and handle is not None
        page.mouse.move(handle["x"] + 3, handle["y"] + 100)
        page.mouse.down()
        page.mouse.move(handle["x"] - 117, handle["y"] + 100, steps=5)
        page.mouse.up()
        wider = docked.bounding_box()
        assert wider is not None and wider["width"] > before["width"] + 100, (before, wider)
        # A long answer, read from its top: the place is kept from page to page.
        fake.script("fake-main", ["".join(f"line {n} of a long answer\n\n" for n in range(120))])
        docked.get_by_test_id("chat-input").fill("tell me a long story")
        docked.get_by_test_id("chat-send").click()
        expect(docked.get_by_test_id("message").filter(has_text="line 119 of")).to_be_visible()
        expect(docked.get_by_test_id("chat-stop")).to_have_count(0)
        scroll = docked.get_by_test_id("chat-scroll")
        scroll.evaluate("el => { el.scrollTop = 200; el.dispatchEvent(new Event('scroll')); }")
        docked.get_by_test_id("chat-input").fill("half a thought")
        for route, testid in (
            ("#/tasks", "tasks-page"),
            ("#/admin/settings", None),
            ("#/files", "files-page"),
        ):
            page.goto(f"{server.url}/{route}")
            if testid:
                expect(page.get_by_test_id(testid)).to_be_visible()
            expect(docked).to_be_visible()
            expect(docked.get_by_test_id("chat-input")).to_have_value("half a thought")
            expect(docked.get_by_test_id("message").filter(has_text="line 119 of")).to_be_attached()
            top = scroll.evaluate("el => el.scrollTop")
            assert abs(top - 200) < 30, f"{route}: the docked chat scrolled to {top}, not 200"
            kept = docked.bounding_box()
            assert kept is not None and abs(kept["width"] - wider["width"]) < 2
        # The chat page itself never docks beside itself.
        page.goto(f"{server.url}/#/")
        expect(page.get_by_test_id("chat-page")).to_be_visible()
        expect(page.get_by_test_id("docked-chat")).to_have_count(0)


SELECT_ALL = """() => {
  const code = document.querySelector('.code-view__code code');
  const range = document.createRange();
  range.selectNodeContents(code);
  const sel = document.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}"""


@pytest.mark.timeout(120)
def test_a_20000_character_passage_is_trimmed_with_a_note_not_refused(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    fake.script("fake-main", ["Trimmed."])
    with watched_page(browser, server, ADMIN, ADMIN_PW, prefix="eye-trim") as page:
        page.get_by_test_id("nav-files").click()
        page.get_by_test_id("dock-toggle").click()
        docked = page.get_by_test_id("docked-chat")
        page.goto(f"{server.url}/#/files?path=~&file=~/long.txt")
        expect(page.get_by_test_id("files-viewer-code")).to_contain_text("zzzz")
        page.evaluate(SELECT_ALL)
        docked.get_by_test_id("chat-input").fill("shorten this")
        docked.get_by_test_id("chat-send").click()
        expect(docked.get_by_test_id("message").filter(has_text="Trimmed.")).to_be_visible()
        asked = str(fake.bodies()[-1]["messages"][-1])
        assert "selection (lines 1-1):" in asked and "characters left out]" in asked, asked[-300:]
        assert asked.count("z") < 5000
        passage = docked.get_by_test_id("message-view-chip").filter(has_text="lines 1-1")
        expect(passage).to_have_attribute("title", re.compile(r"characters left out\]$"))


@pytest.mark.timeout(120)
def test_the_eye_names_the_open_request_detail_page_by_its_metadata_only(
    server: ServerProcess, fake: FakeLLM, browser: Browser
) -> None:
    """Issue 30 item 3: with a request's detail page open beside the docked chat, the
    message carries that request's id, time, model and outcome (never what was said)."""
    secret = "the plum tree SECRET-7 story"
    fake.script("fake-main", ["First answer.", "It is a finished request."])
    admin = api_as(server)
    assert admin.post("/api/chat", json={"text": secret}).status_code == 200
    item = admin.get("/api/requests").json()[0]
    admin.close()
    watch = SignedInWatch()
    with watched_page(browser, server, ADMIN, ADMIN_PW, prefix="eye-request", watch=watch) as page:
        page.goto(f"{server.url}/#/requests/{item['id']}")
        expect(page.get_by_test_id("request-outcome")).to_be_visible()
        page.get_by_test_id("dock-toggle").click()
        docked = page.get_by_test_id("docked-chat")
        expect(docked.get_by_test_id("chat-page")).to_be_visible()
        docked.get_by_test_id("chat-input").fill("what is this?")
        docked.get_by_test_id("chat-send").click()
        expect(
            docked.get_by_test_id("message").filter(has_text="It is a finished request.")
        ).to_be_visible()
        last = str(fake.bodies()[-1]["messages"][-1])
        assert f"request: {item['id']}" in last, last
        assert "request model: fake-main" in last, last
        assert f"request outcome: {item['outcome']}" in last, last
        assert "request time: 20" in last, last
        assert f"#/requests/{item['id']}" in last, last
        assert "SECRET-7" not in last, last
        # The page asks for the kept payload, which is not kept (off): a 404, and no other.
        kept = f"/api/requests/{item['id']}/payload'"
        watch.problems[:] = [p for p in watch.problems if not ("status of 404" in p and kept in p)]
