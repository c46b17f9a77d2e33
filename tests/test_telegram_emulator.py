"""Pairing against the npm Bot API emulator `telegram-test-api` (a server that is not
ours, installed by ci/test.sh from tests/telegram_npm/ into a cache folder named by
SKALD_TELEGRAM_NPM): an unpaired chat gets a code and keeps it, a wrong code is
refused, the right one pairs, `/unpair` unbinds, and a pairing store that fails sends
no code. The emulator answers polls at once and has no files, edits or buttons: those
are tests/telegram_double.py's (test_telegram*.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import MakeClient, signed_in
from prerequisites import unavailable

from skald.core.runtime import Runtime
from skald.features.telegram.bridge import Bridge
from skald.features.telegram.texts import UNAVAILABLE

pytestmark = pytest.mark.timeout(90)

TOKEN = "654321:emulated-bot-token-abcdefghij"
_LAUNCH = """
const Server = require('telegram-test-api');
const server = new Server({port: Number(process.argv[1]), host: '127.0.0.1', storeTimeout: 600});
server.start().then(() => console.log('ready'));
"""


class Emulator:
    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=10)
        self.seen: dict[int, list[str]] = {}

    def says(self, user: int, text: str) -> None:
        message = {
            "botToken": TOKEN,
            "date": int(time.time()),
            "from": {"id": user, "is_bot": False, "first_name": "Ada"},
            "chat": {"id": user, "type": "private", "first_name": "Ada"},
            "text": text,
        }
        assert self.http.post("/sendMessage", json=message).json()["ok"]

    def bot_said(self, user: int) -> list[str]:
        got = self.http.post("/getUpdates", json={"token": TOKEN, "chatId": user}).json()
        self.seen.setdefault(user, []).extend(u["message"]["text"] for u in got["result"])
        return self.seen[user]

    def wait(self, user: int, check: Any) -> list[str]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            said = self.bot_said(user)
            if check(said):
                return said
            time.sleep(0.1)
        raise AssertionError(f"the bot said {self.seen.get(user)}")


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    folder = os.environ.get("SKALD_TELEGRAM_NPM")
    if not folder or not (Path(folder) / "node_modules" / "telegram-test-api").is_dir():
        unavailable("SKALD_TELEGRAM_NPM does not name an install of tests/telegram_npm")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        ["node", "-e", _LAUNCH, str(port)],
        cwd=folder,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield Emulator(f"http://127.0.0.1:{port}")
    finally:
        proc.kill()
        proc.wait()


async def _switch_on(runtime: Runtime, make_client: MakeClient, url: str) -> None:
    mum = await signed_in(make_client, "mum")
    body = {"enabled": True, "base_url": url, "token": TOKEN}
    assert (await mum.call("PUT", "/api/telegram/settings", json=body)).status_code == 200
    await runtime.server.state(Bridge).connected.wait()


def _code(said: list[str]) -> str:
    return [t for t in said if "code:" in t][-1].split("code: ", 1)[1].split()[0]


async def test_pairing_through_the_emulator_reuses_the_code_refuses_a_wrong_one_and_unbinds(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, emulator: Emulator
) -> None:
    await _switch_on(runtime, make_client, emulator.url)
    emulator.says(3001, "hello")
    said = await asyncio.to_thread(emulator.wait, 3001, lambda s: any("code:" in t for t in s))
    code = _code(said)
    emulator.says(3001, "hello again")
    said = await asyncio.to_thread(
        emulator.wait, 3001, lambda s: len([t for t in s if "code:" in t]) == 2
    )
    assert _code(said) == code
    ada = await signed_in(make_client, "ada")
    assert (
        await ada.call("POST", "/api/telegram/pair", json={"code": "WRONG234"})
    ).status_code == 400
    assert (await ada.call("POST", "/api/telegram/pair", json={"code": code})).status_code == 200
    await asyncio.to_thread(emulator.wait, 3001, lambda s: s[-1].startswith("Paired"))
    emulator.says(3001, "/unpair")
    await asyncio.to_thread(emulator.wait, 3001, lambda s: "no longer paired" in s[-1])
    assert (await ada.call("GET", "/api/telegram/me")).json()["links"] == []
    await runtime.server.db.call(lambda c: c.execute("DROP TABLE telegram_codes"))
    emulator.says(3002, "hello")
    said = await asyncio.to_thread(emulator.wait, 3002, lambda s: bool(s))
    assert said == [UNAVAILABLE]
