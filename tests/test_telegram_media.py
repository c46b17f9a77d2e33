"""Telegram files and answers: a photo and a voice note land in the member's uploads (the
voice note transcribed by the real recogniser of tests/voice_engines.py), the
`send_attachment` tool's limits, long answers split at Telegram's limit, the plain-text
fallback, 429 flood waits, notifications to the home chat, and the offset kept."""

from __future__ import annotations

import asyncio
import io
import os
import socket
from datetime import UTC, datetime, timedelta

import pytest
from conftest import Client, MakeClient, member_quota, signed_in
from fake_llm import Call, FakeLLM, Hang, Text
from fake_llm import fake_llm_fixture as fake_llm_fixture
from telegram_double import TelegramDouble
from telegram_support import ADA_TG, until
from telegram_support import bot as bot
from telegram_support import double as double
from telegram_support import paired_ada as paired_ada
from voice_engines import Engines, synthesise

from skald.core.runtime import Runtime
from skald.features.telegram.botapi import BotApi
from skald.features.telegram.bridge import Bridge
from skald.features.telegram.render import LIMIT
from skald.features.telegram.turns import Replier, Stream

pytestmark = pytest.mark.timeout(120)

DIGITS = {"one", "two", "three", "four", "five"}


async def test_a_photo_and_a_voice_note_land_in_uploads_and_the_voice_is_transcribed(
    bot: Client, paired_ada: Client, double: TelegramDouble, llm: FakeLLM
) -> None:
    engines = Engines().start()
    try:
        r = await bot.call(
            "POST",
            "/api/llm/providers",
            json={"name": "engines", "kind": "openai_compatible", "base_url": engines.base_url},
        )
        body = {
            "provider_id": r.json()["id"],
            "model": "sphinx-en",
            "name": "sphinx",
            "priority": 1,
            "capabilities": [],
            "kind": "transcription",
        }
        assert (await bot.call("POST", "/api/llm/models", json=body)).status_code == 201
        llm.script("model-a", [Text("Nice photo."), Text("Heard you.")])
        double.sends_file(ADA_TG, "photo", "x.jpg", b"\xff\xd8\xff\xe0" + b"1" * 500, "image/jpeg")
        await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "Nice photo."])
        clip = synthesise("one two three four five")
        double.sends_file(ADA_TG, "voice", "v.wav", clip, "audio/wav")
        shown = await until(double, lambda: [s for s in double.to(ADA_TG) if "🎤" in s.text])
        assert len(set(shown[0].text.split()) & DIGITS) >= 3, shown[0].text
        await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "Heard you."])
    finally:
        engines.stop()
    (conv,) = (await paired_ada.call("GET", "/api/conversations")).json()
    history = (await paired_ada.call("GET", f"/api/conversations/{conv['id']}/messages")).json()
    users = [m for m in history if m["role"] == "user"]
    names = [a["name"] for m in users for a in m["attachments"]]
    assert any(n.startswith("photo-") and n.endswith(".jpg") for n in names), names
    assert any(n.startswith("voice-") for n in names), names
    assert len(set(users[1]["text"].split()) & DIGITS) >= 3  # the transcript reached the model


async def test_a_file_past_the_members_quota_is_not_kept_and_she_is_told(
    runtime: Runtime, bot: Client, paired_ada: Client, double: TelegramDouble, llm: FakeLLM
) -> None:
    await member_quota(bot, 1)
    llm.script("model-a", [Text("Got your words.")])
    big = os.urandom(2 * 1024 * 1024)
    double.sends_file(ADA_TG, "document", "big.bin", big, "application/octet-stream", "here")
    await until(double, lambda: [s for s in double.to(ADA_TG) if "storage is full" in s.text])
    # The turn goes on with her words, without the file.
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "Got your words."])
    ada = (await paired_ada.call("GET", "/api/auth/me")).json()["id"]
    home = runtime.core.layout.home(ada)
    assert [p.name for p in home.rglob("big*")] == []
    (conv,) = (await paired_ada.call("GET", "/api/conversations")).json()
    history = (await paired_ada.call("GET", f"/api/conversations/{conv['id']}/messages")).json()
    (said,) = [m for m in history if m["role"] == "user"]
    assert said["text"] == "here" and said["attachments"] == []


async def test_send_attachment_refuses_60_mb_and_sends_a_12_mb_photo_as_a_document(
    runtime: Runtime,
    paired_ada: Client,
    double: TelegramDouble,
    llm: FakeLLM,
    household: dict[str, str],
) -> None:
    member = runtime.server.member(household["ada"])
    assert member is not None
    home = member.router.resolve("~").path  # type: ignore[union-attr]
    with (home / "big.bin").open("wb") as f:
        f.truncate(60 * 1024 * 1024)  # sparse: the tool must refuse before reading
    (home / "holiday.jpg").write_bytes(b"\xff\xd8\xff\xe0" + os.urandom(12 * 1024 * 1024))
    (home / "small.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 100)
    llm.script(
        "model-a",
        [
            [Call("send_attachment", {"path": "big.bin"})],
            [Call("send_attachment", {"path": "holiday.jpg", "caption": "Beach"})],
            [Call("send_attachment", {"path": "small.png"})],
            [Call("send_attachment", {"path": "user-memory/x.md"})],
            Text("Sent what I could."),
        ],
    )
    double.says(ADA_TG, "send me the files")
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "Sent what I could."])
    files = [(s.kind, s.file_name, s.caption) for s in double.to(ADA_TG) if s.kind != "text"]
    assert files == [("document", "holiday.jpg", "Beach"), ("photo", "small.png", "")]
    (conv,) = (await paired_ada.call("GET", "/api/conversations")).json()
    history = (await paired_ada.call("GET", f"/api/conversations/{conv['id']}/messages")).json()
    results = [m["text"] for m in history if m["role"] == "tool"]
    assert "at most 50 MB" in results[0]
    assert "Notes cannot be sent" in results[3]


async def test_a_long_answer_is_split_and_refused_html_falls_back_to_plain_text(
    paired_ada: Client,
    double: TelegramDouble,
    llm: FakeLLM,
) -> None:
    long = " ".join(f"word{i}" for i in range(1500))  # ~11,000 characters
    llm.script("model-a", [Text(long), Text("**bold** and <tags>")])
    double.says(ADA_TG, "tell me a lot")
    pieces = await until(
        double,
        lambda: (
            (x := [s.text for s in double.to(ADA_TG) if s.text.startswith("word")])
            and x[-1].endswith("word1499")
            and x
        ),
    )
    assert " ".join(pieces) == long
    assert all(len(p) <= LIMIT for p in pieces)
    double.refuse_html = True
    double.says(ADA_TG, "again")
    plain = await until(double, lambda: [s for s in double.to(ADA_TG) if "bold" in s.text])
    assert (plain[-1].text, plain[-1].parse_mode) == ("**bold** and <tags>", None)


async def test_a_flood_wait_is_honoured_and_the_offset_survives_a_reload(
    runtime: Runtime, bot: Client, make_client: MakeClient, double: TelegramDouble
) -> None:
    double.flood("sendMessage", 1)
    double.says(4242, "hello")
    await until(double, lambda: [s for s in double.to(4242) if "code:" in s.text])
    assert double.state.calls.count("sendMessage") == 2  # refused once, then sent
    bridge = runtime.server.state(Bridge)
    offset = (await bridge.store.settings()).update_offset
    assert offset == double.state.next_update  # past the one update
    bridge.reload()  # reconnects from the stored offset: nothing is seen twice
    double.says(4242, "hello again")
    await until(double, lambda: len([s for s in double.to(4242) if "code:" in s.text]) == 2)
    assert len([s for s in double.to(4242) if "code:" in s.text]) == 2


async def test_notifications_reach_the_home_chat_set_with_sethome(
    runtime: Runtime,
    bot: Client,
    paired_ada: Client,
    double: TelegramDouble,
    household: dict[str, str],
) -> None:
    r = await paired_ada.call(
        "PUT", "/api/notifications/settings", json={"channels": ["telegram"], "quiet": None}
    )
    assert r.status_code == 200, r.text
    double.says(ADA_TG, "/sethome", chat=-777)
    # In a group, /sethome must be aimed at the bot.
    double.says(ADA_TG, "/sethome@skald_test_bot", chat=-777)
    await until(double, lambda: [s for s in double.to(-777) if "Notifications" in s.text])
    await runtime.notifications.notify(household["ada"], title="Bins out", body="It is Monday")
    await runtime.notifications.flush()
    got = await until(double, lambda: [s for s in double.to(-777) if "Bins out" in s.text])
    assert got[0].text == "Bins out\nIt is Monday"


async def test_a_streamed_answer_is_edited_at_most_once_a_second_and_ends_exact(
    runtime: Runtime, double: TelegramDouble
) -> None:
    now = [100.0]  # the bridge's clock, moved by hand: no timing in the test
    bridge = Bridge(runtime.server, clock=lambda: now[0])
    api = BotApi(double.url, double.token)
    try:
        stream = Stream(Replier(api, 42, None, bridge))
        for piece in ("Hel", "lo ", "wor", "ld"):  # 0.3 s apart: one send, no edit
            await stream.add(piece)
            now[0] += 0.3
        assert [(s.text, s.edits) for s in double.to(42)] == [("Hel", 0)]
        now[0] += 0.2  # a second after the send
        await stream.add(", **all**")
        assert [(s.text, s.edits) for s in double.to(42)] == [("Hello world, **all**", 1)]
        now[0] += 0.9  # the final edit waits out the rest of the second (0.1 s)
        await stream.finish("Hello world, **all**!")
    finally:
        await api.aclose()
    (shown,) = double.to(42)
    assert (shown.text, shown.parse_mode, shown.edits) == ("Hello world, <b>all</b>!", "HTML", 2)


async def test_new_starts_another_conversation_and_compact_answers_at_once(
    paired_ada: Client,
    double: TelegramDouble,
    llm: FakeLLM,
) -> None:
    llm.script("model-a", [Text("first"), Text("second")])
    double.says(ADA_TG, "one")
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "first"])
    double.says(ADA_TG, "/new")
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "new conversation"])
    double.says(ADA_TG, "two")
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "second"])
    convs = (await paired_ada.call("GET", "/api/conversations")).json()
    assert len(convs) == 2
    double.says(ADA_TG, "/compact")
    await until(double, lambda: [s for s in double.to(ADA_TG) if "compact" in s.text])


async def test_an_unreachable_bot_api_is_retried_and_shown_without_the_token_in_logs(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    double: TelegramDouble,
    logged: io.StringIO,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    mum = await signed_in(make_client, "mum")
    body = {"enabled": True, "base_url": closed, "token": double.token}
    assert (await mum.call("PUT", "/api/telegram/settings", json=body)).status_code == 200
    for _ in range(400):  # the first failed getMe is logged at once (then it backs off)
        if "telegram unreachable" in logged.getvalue():
            break
        await asyncio.sleep(0.05)
    shown = (await mum.call("GET", "/api/telegram/settings")).json()
    assert shown["problems"] == ["Telegram cannot be reached (Telegram getMe: ConnectError)"]
    assert shown["has_token"] is True and double.token not in str(shown)
    # The address is fixed: the bridge connects without a restart.
    body = {"enabled": True, "base_url": double.url}
    assert (await mum.call("PUT", "/api/telegram/settings", json=body)).status_code == 200
    await asyncio.wait_for(runtime.server.state(Bridge).connected.wait(), 10)
    assert (await mum.call("GET", "/api/telegram/settings")).json()["problems"] == []
    secret = double.token.split(":", 1)[1]
    assert secret not in logged.getvalue()
    sealed = await runtime.server.db.call(
        lambda c: c.execute("SELECT token_sealed FROM telegram_settings").fetchall()
    )
    assert secret not in str(sealed)


async def test_stop_from_telegram_stops_the_running_answer(
    paired_ada: Client,
    double: TelegramDouble,
    llm: FakeLLM,
) -> None:
    llm.script("model-a", [Hang(text_before="Thinking hard")])
    double.says(ADA_TG, "think forever")
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text.startswith("Thin")])
    double.says(ADA_TG, "/stop")  # not queued behind the running turn
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text == "Stopped."])
    (conv,) = (await paired_ada.call("GET", "/api/conversations")).json()
    for _ in range(200):
        if (await paired_ada.call("GET", "/api/conversations")).json()[0]["status"] == "idle":
            break
        await asyncio.sleep(0.05)
    assert (await paired_ada.call("GET", "/api/conversations")).json()[0]["status"] == "idle"
    assert conv["title"] == "Telegram"


async def test_quiet_hours_hold_telegram_notifications_except_urgent_ones(
    runtime: Runtime,
    paired_ada: Client,
    double: TelegramDouble,
    household: dict[str, str],
) -> None:
    now = datetime.now(UTC)
    quiet = {
        "start": (now - timedelta(hours=2)).strftime("%H:%M"),
        "end": (now + timedelta(hours=2)).strftime("%H:%M"),
        "timezone": "UTC",
    }
    body = {"channels": ["telegram"], "quiet": quiet}
    assert (
        await paired_ada.call("PUT", "/api/notifications/settings", json=body)
    ).status_code == 200
    await runtime.notifications.notify(household["ada"], title="Bins out")
    await runtime.notifications.notify(household["ada"], title="Smoke alarm", urgency="high")
    await runtime.notifications.flush()
    got = await until(double, lambda: [s for s in double.to(ADA_TG) if "Smoke" in s.text])
    assert got[0].text == "Smoke alarm"
    assert not [s for s in double.to(ADA_TG) if "Bins" in s.text]
