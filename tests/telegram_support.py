"""Shared by the Telegram tests: the Bot API double as a fixture, the bridge switched on
by the admin through the API, waiting on the double, pairing a chat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from conftest import PASSWORD, Client, MakeClient, signed_in
from telegram_double import TelegramDouble

from skald.core.runtime import Runtime
from skald.features.telegram.bridge import Bridge

ADA_TG, MUM_TG, TIM_TG, STRANGER_TG = 1001, 1002, 1003, 1009
GROUP = -5001


@pytest.fixture
def double() -> Iterator[TelegramDouble]:
    with TelegramDouble() as server:
        yield server


async def until(double: TelegramDouble, check: Any, seconds: float = 20.0) -> Any:
    return await asyncio.to_thread(double.wait_for, check, seconds)


@pytest.fixture
async def bot(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, double: TelegramDouble
) -> AsyncIterator[Client]:
    """The admin switched Telegram on against the double; her client. ada and mum unlocked."""
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    mum = await signed_in(make_client, "mum")
    r = await mum.call(
        "PUT",
        "/api/telegram/settings",
        json={
            "enabled": True,
            "base_url": double.url,
            "token": double.token,
            "web_url": "https://skald.home.example/",
        },
    )
    assert r.status_code == 200, r.text
    assert double.token not in r.text
    bridge = runtime.server.state(Bridge)
    async with asyncio.timeout(10):
        await bridge.connected.wait()
    yield mum


@pytest.fixture
async def paired_ada(bot: Client, make_client: MakeClient, double: TelegramDouble) -> Client:
    """ada signed in, with her chat (`ADA_TG`) paired (Telegram switched on: `bot`); her
    client."""
    ada = await signed_in(make_client, "ada")
    await pair(double, ada, ADA_TG)
    return ada


def code_in(text: str) -> str:
    return text.split("enter this code: ", 1)[1].split()[0]


async def pair(double: TelegramDouble, client: Client, tg: int) -> None:
    before = len(double.to(tg))
    double.says(tg, "hello")
    first = await until(double, lambda: [s for s in double.to(tg)[before:] if "code:" in s.text])
    r = await client.call("POST", "/api/telegram/pair", json={"code": code_in(first[0].text)})
    assert r.status_code == 200, r.text
