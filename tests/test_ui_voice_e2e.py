"""Voice in a real browser on a phone-sized screen: Debian's Chromium, whose fake
microphone plays a phrase synthesised by espeak-ng, records it through the chat's
microphone button; Skald sends the clip to pocketsphinx (tests/voice_engines.py), the
transcript shows in the input and goes out as the message; the answer is then read
aloud by espeak-ng through Skald and the audio element loads it.

Launch flags and the skip rule are those of `test_ui_e2e.py`, plus Chromium's fake
media devices (`--use-fake-device-for-media-stream`, `--use-file-for-fake-audio-capture`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM, Text
from harness import ServerProcess
from ui_support import (
    CHROMIUM_ARGS,
    PLAYWRIGHT_MISSING,
    api_as,
    browser_or_skip,
    server_fixture,
    sign_in,
)
from voice_engines import Engines, synthesise

if not PLAYWRIGHT_MISSING:
    from playwright.sync_api import expect, sync_playwright

MEMBER, MEMBER_PW = "ada", "ada's long password"
DIGITS = {"one", "two", "three", "four", "five"}
ANSWER = "Noted, five numbers."


@pytest.fixture
def engines() -> Iterator[Engines]:
    running = Engines().start()
    yield running
    running.stop()


server = server_fixture((MEMBER, MEMBER_PW))


def _catalogue(server: ServerProcess, fake: FakeLLM, engines: Engines) -> None:
    admin = api_as(server)
    for name, base, wire, kind in (
        ("Chat", fake.base_url_openai, "fake-main", "chat"),
        ("Voice", engines.base_url, "sphinx-en", "transcription"),
        ("Voice", engines.base_url, "espeak", "speech"),
    ):
        providers = {p["name"]: p["id"] for p in admin.get("/api/llm/providers").json()}
        if name not in providers:
            r = admin.post(
                "/api/llm/providers",
                json={"name": name, "kind": "openai_compatible", "base_url": base},
            )
            assert r.status_code == 201, r.text
            providers[name] = r.json()["id"]
        r = admin.post(
            "/api/llm/models",
            json={"provider_id": providers[name], "model": wire, "name": wire, "kind": kind},
        )
        assert r.status_code == 201, r.text


@pytest.mark.timeout(120)
def test_a_spoken_message_is_transcribed_sent_and_its_answer_read_aloud_on_a_phone(
    server: ServerProcess, engines: Engines, tmp_path: Path
) -> None:
    executable = browser_or_skip()
    clip = tmp_path / "phrase.wav"
    clip.write_bytes(synthesise("one two three four five"))
    with FakeLLM() as fake:
        fake.script("fake-main", [Text(ANSWER)])
        _catalogue(server, fake, engines)
        args = [
            *CHROMIUM_ARGS,
            "--use-fake-device-for-media-stream",
            "--use-fake-ui-for-media-stream",
            f"--use-file-for-fake-audio-capture={clip}",
        ]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=executable, args=args, headless=True)
            try:
                context = browser.new_context(
                    base_url=server.url,
                    locale="en-US",
                    viewport={"width": 375, "height": 740},
                    permissions=["microphone"],
                )
                context.set_default_timeout(20_000)
                page = sign_in(context.new_page(), MEMBER, MEMBER_PW)
                mic = page.get_by_test_id("chat-mic")
                expect(mic).to_be_visible()
                box = mic.bounding_box()
                assert box is not None and box["x"] + box["width"] <= 375  # on the screen
                mic.click()
                expect(mic).to_have_attribute("data-state", "recording")
                time.sleep(3.0)  # the fake microphone plays the phrase (about 2 s), looping
                mic.click()
                sent = page.locator('[data-testid="message"][data-role="user"]').first
                # Recognition on a shared CPU may take a few seconds.
                expect(sent).to_be_visible(timeout=60_000)
                heard = set(sent.inner_text().lower().split())
                assert len(heard & DIGITS) >= 3, heard
                (asked,) = [r for r in engines.requests if r["path"].endswith("transcriptions")]
                assert asked["content_type"] == "audio/wav"
                answer = page.locator('[data-testid="message"][data-role="assistant"]').first
                expect(answer).to_contain_text(ANSWER, timeout=30_000)
                answer.get_by_test_id("message-read-aloud").click()
                audio = answer.get_by_test_id("message-audio")
                expect(audio).to_have_count(1)
                page.wait_for_function(
                    "() => { const a = document.querySelector('[data-testid=message-audio]');"
                    " return a && a.readyState >= 1 && a.duration > 0.5; }"
                )
                spoken = [r for r in engines.requests if r["path"].endswith("speech")]
                assert [r["input"] for r in spoken] == [ANSWER]
            finally:
                browser.close()
