"""The Telegram bridge against a Bot API double on 127.0.0.1 (tests/telegram_double.py):
pairing, chatting through the conversation service with approvals as buttons, groups,
files, and the settings routes. The server is the in-process runtime with its services
running (the bridge's poller among them); the model is the scripted fake."""

from __future__ import annotations

import asyncio
import re

import pytest
from conftest import Client, MakeClient, signed_in
from fake_llm import Call, FakeLLM, Text
from fake_llm import fake_llm_fixture as fake_llm_fixture
from telegram_double import TelegramDouble
from telegram_support import ADA_TG, GROUP, MUM_TG, STRANGER_TG, TIM_TG, code_in, pair, until
from telegram_support import bot as bot
from telegram_support import double as double

from skald.core.runtime import Runtime
from skald.features.telegram.bridge import Bridge
from skald.features.telegram.store import CODE_TTL_S
from skald.features.telegram.texts import TEXTS, UNAVAILABLE

pytestmark = pytest.mark.timeout(90)


async def test_an_unpaired_chat_gets_a_code_which_it_keeps_and_pairs_from_the_web_page(
    runtime: Runtime, bot: Client, make_client: MakeClient, double: TelegramDouble
) -> None:
    double.says(STRANGER_TG, "hello")
    first = await until(double, lambda: [s for s in double.to(STRANGER_TG) if "code:" in s.text])
    double.says(STRANGER_TG, "hello again")
    both = await until(
        double,
        lambda: len(x := [s for s in double.to(STRANGER_TG) if "code:" in s.text]) == 2 and x,
    )
    code = code_in(first[0].text)
    assert code_in(both[1].text) == code  # the same chat reuses its pending code
    ada = await signed_in(make_client, "ada")
    wrong = await ada.call("POST", "/api/telegram/pair", json={"code": "ZZZZZZZZ"})
    assert wrong.status_code == 400
    assert "not valid" in wrong.json()["error"]["message"]
    r = await ada.call("POST", "/api/telegram/pair", json={"code": code.lower()})
    assert r.status_code == 200, r.text
    assert len(r.json()["links"]) == 1
    again = await ada.call("POST", "/api/telegram/pair", json={"code": code})
    assert again.status_code == 400  # a code is used once
    tim = await signed_in(make_client, "tim")
    assert (await tim.call("GET", "/api/telegram/me")).status_code == 403


async def test_a_pairing_code_expires_after_a_day(
    runtime: Runtime, household: dict[str, str]
) -> None:
    store = runtime.server.state(Bridge).store
    code = await store.code_for_chat(77, now=1_000_000.0)
    assert await store.code_for_chat(77, now=1_000_000.0 + CODE_TTL_S - 1) == code
    assert (
        await store.redeem_chat_code(code, household["ada"], now=1_000_000.0 + CODE_TTL_S) is None
    )
    fresh = await store.code_for_chat(77, now=1_000_000.0 + CODE_TTL_S)
    assert fresh != code
    assert await store.redeem_chat_code(fresh, household["ada"], now=1_000_000.0 + CODE_TTL_S) == 77
    assert (await store.link(77)).user_id == household["ada"]  # type: ignore[union-attr]


async def test_a_code_from_the_web_page_typed_into_the_bot_pairs_the_chat(
    runtime: Runtime, bot: Client, make_client: MakeClient, double: TelegramDouble
) -> None:
    ada = await signed_in(make_client, "ada")
    code = (await ada.call("POST", "/api/telegram/code")).json()["code"]
    double.says(ADA_TG, "NOPE2345")
    await until(double, lambda: [s for s in double.to(ADA_TG) if "not valid" in s.text])
    double.says(ADA_TG, code)
    await until(double, lambda: [s for s in double.to(ADA_TG) if s.text.startswith("Paired")])
    me = (await ada.call("GET", "/api/telegram/me")).json()
    assert len(me["links"]) == 1 and me["available"] is True


async def test_a_pairing_store_that_fails_sends_no_code_and_tells_the_admin(
    runtime: Runtime, bot: Client, double: TelegramDouble
) -> None:
    await runtime.server.db.call(lambda c: c.execute("DROP TABLE telegram_codes"))
    double.says(STRANGER_TG, "hello")
    answer = await until(double, lambda: double.to(STRANGER_TG))
    assert [s.text for s in answer] == [UNAVAILABLE]
    settings = (await bot.call("GET", "/api/telegram/settings")).json()
    assert settings["problems"] == ["the pairing store cannot be read"]


async def test_unbinding_from_the_web_or_with_unpair_ends_the_link(
    runtime: Runtime, bot: Client, make_client: MakeClient, double: TelegramDouble
) -> None:
    ada = await signed_in(make_client, "ada")
    await pair(double, ada, ADA_TG)
    assert (await ada.call("DELETE", "/api/telegram/me")).status_code == 204
    assert (await ada.call("GET", "/api/telegram/me")).json()["links"] == []
    assert (await ada.call("DELETE", "/api/telegram/me")).status_code == 404
    await pair(double, ada, ADA_TG)
    double.says(ADA_TG, "/unpair")
    await until(double, lambda: [s for s in double.to(ADA_TG) if "no longer paired" in s.text])
    assert (await ada.call("GET", "/api/telegram/me")).json()["links"] == []


async def test_a_paired_member_chats_approves_with_a_button_and_sees_it_on_the_web(
    runtime: Runtime,
    bot: Client,
    make_client: MakeClient,
    double: TelegramDouble,
    llm: FakeLLM,
    household: dict[str, str],
) -> None:
    write = Call("write_file", {"path": "shared-memory/bread.md", "content": "# Bread"})
    llm.script("model-a", [[write], Text("Saved the **bread** note.")])
    ada = await signed_in(make_client, "ada")
    await pair(double, ada, ADA_TG)
    double.says(ADA_TG, "save a bread note")
    asked = await until(double, lambda: [s for s in double.to(ADA_TG) if s.reply_markup])
    buttons = asked[0].reply_markup["inline_keyboard"][0]
    assert [b["text"] for b in buttons] == ["Approve", "Reject"]
    (details,) = asked[0].reply_markup["inline_keyboard"][1]
    assert details == {"text": "See details", "url": "https://skald.home.example/#/inbox"}
    double.press(STRANGER_TG, asked[0], buttons[0]["callback_data"])  # not theirs to press
    await until(double, lambda: double.state.answers)
    assert "no longer waiting" in double.state.answers[0]["text"]
    # Unpaired meanwhile: the same Telegram user's press decides nothing.
    assert (await ada.call("DELETE", "/api/telegram/me")).status_code == 204
    double.press(ADA_TG, asked[0], buttons[0]["callback_data"])
    await until(double, lambda: len(double.state.answers) == 2)
    assert "no longer waiting" in double.state.answers[1]["text"]
    store = runtime.server.state(Bridge).store
    await store.redeem_chat_code(await store.code_for_chat(ADA_TG), household["ada"])
    double.press(ADA_TG, asked[0], buttons[0]["callback_data"])
    final = await until(double, lambda: [s for s in double.to(ADA_TG) if "bread</b>" in s.text])
    assert final[0].text == "Saved the <b>bread</b> note." and final[0].parse_mode == "HTML"
    convs = (await ada.call("GET", "/api/conversations")).json()
    assert [c["title"] for c in convs] == ["Telegram"]
    history = (await ada.call("GET", f"/api/conversations/{convs[0]['id']}/messages")).json()
    texts = [m["text"] for m in history if m["role"] in ("user", "assistant") and m["text"]]
    assert texts == ["save a bread note", "Saved the **bread** note."]
    # Another member's chat reaches only their own conversations.
    mum_tg_turn = Text("Hello mum.")
    llm.script("model-a", [mum_tg_turn])
    await pair(double, bot, MUM_TG)
    double.says(MUM_TG, "hi")
    await until(double, lambda: [s for s in double.to(MUM_TG) if s.text == "Hello mum."])
    assert len((await ada.call("GET", "/api/conversations")).json()) == 1
    assert len((await bot.call("GET", "/api/conversations")).json()) == 1


async def test_a_member_whose_role_lacks_telegram_use_is_refused(
    runtime: Runtime, bot: Client, double: TelegramDouble, household: dict[str, str]
) -> None:
    store = runtime.server.state(Bridge).store
    code = await store.code_for_chat(TIM_TG)
    assert await store.redeem_chat_code(code, household["tim"]) == TIM_TG
    double.says(TIM_TG, "hi")
    answer = await until(double, lambda: double.to(TIM_TG))
    assert "not available to your account" in answer[0].text


async def test_in_a_group_the_bot_answers_a_mention_a_reply_or_the_prefix_only(
    bot: Client,
    make_client: MakeClient,
    double: TelegramDouble,
    llm: FakeLLM,
) -> None:
    llm.script("model-a", [Text("one"), Text("two"), Text("three")])
    ada = await signed_in(make_client, "ada")
    await pair(double, ada, ADA_TG)
    double.says(ADA_TG, "just chatting among us", chat=GROUP)
    for _ in range(200):  # the group is listed once the bot has seen a message there
        groups = (await bot.call("GET", "/api/telegram/groups")).json()
        if groups:
            break
        await asyncio.sleep(0.05)
    assert groups == [{"chat_id": GROUP, "title": "Family 5001", "prefix": "", "media": False}]
    for bad in (-(2**63) - 1, -(2**70), 0, 5001):  # past SQLite's integers, or not a group
        r = await bot.call("PUT", f"/api/telegram/groups/{bad}", json={"prefix": "x"})
        assert r.status_code == 400 and "group chat id" in r.text, r.text
    r = await bot.call("PUT", f"/api/telegram/groups/{GROUP}", json={"prefix": "skald,"})
    assert r.status_code == 200, r.text
    assert (await bot.call("GET", "/api/telegram/groups")).json()[0]["prefix"] == "skald,"
    double.says(ADA_TG, "@skald_test_bot what time is it", chat=GROUP)
    await until(double, lambda: [s for s in double.to(GROUP) if s.text == "one"])
    double.says(ADA_TG, "and now?", chat=GROUP, reply_to_bot=True)
    await until(double, lambda: [s for s in double.to(GROUP) if s.text == "two"])
    double.says(ADA_TG, "skald, and tomorrow?", chat=GROUP)
    await until(double, lambda: [s for s in double.to(GROUP) if s.text == "three"])
    double.sends_file(
        ADA_TG, "photo", "p.jpg", b"\xff\xd8\xff" + b"0" * 100, "image/jpeg", chat=GROUP
    )
    llm.script("model-a", [Text("four")])
    double.says(ADA_TG, "@skald_test_bot last", chat=GROUP)
    await until(double, lambda: [s for s in double.to(GROUP) if s.text == "four"])
    said = b"".join(r.raw for r in llm.requests)
    assert b"just chatting" not in said
    assert b"photo-" not in said  # media in this group are not taken
    ada_files = await ada.call("GET", "/api/files/list", params={"path": "uploads"})
    assert "photo-" not in ada_files.text


def test_the_bots_texts_have_every_key_and_placeholder_in_every_language() -> None:
    english = TEXTS["en"]
    for lang, texts in TEXTS.items():
        assert texts.keys() == english.keys(), lang
        for key, text in texts.items():
            assert re.findall(r"\{(\w+)\}", text) == re.findall(r"\{(\w+)\}", english[key])


async def test_the_bot_speaks_the_members_language_and_before_pairing_the_users(
    runtime: Runtime, bot: Client, make_client: MakeClient, double: TelegramDouble
) -> None:
    italian = {"id": 2002, "is_bot": False, "first_name": "Lia", "language_code": "it-IT"}
    double.says(2002, "ciao", **{"from": italian})
    said = await until(double, lambda: double.to(2002))
    assert "inserisci questo codice: " in said[0].text
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("PATCH", "/api/auth/me", json={"locale": "fr"})).status_code == 200
    await pair(double, ada, ADA_TG)
    double.says(ADA_TG, "/sethome")
    await until(
        double,
        lambda: [
            s
            for s in double.to(ADA_TG)
            if s.text == "Les notifications arriveront dans cette discussion."
        ],
    )
