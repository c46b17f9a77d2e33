"""Telegram benchmark: the bridge's overhead on a round trip, as a ratio to the web path.

Run from the repository root:

    .venv/bin/python bench/bench_telegram.py            # 40 turns per path
    .venv/bin/python bench/bench_telegram.py --quick    # 10 turns per path

One in-process server (the tests' way: `Runtime.boot`, the light KDF, services running)
with one unlocked member whose assistant is the scripted fake model of tests/fake_llm.py
answering "ok" at once, and the Bot API double of tests/telegram_double.py on
127.0.0.1, paired to the member. The two paths alternate turn by turn in one
conversation each:

- web: `POST /api/chat` through the app (httpx's ASGI transport), from the request
  to its answer;
- Telegram: the double queues a message for the bot's long poll, to the moment the
  double receives the answer (`sendMessage` replying to that message).

It prints the median and 90th percentile of each and the ratio of the medians. Both
include the same model round trip over loopback; the Telegram figure adds a poll's
wake-up, the inbox write, the pairing look-up, the conversation service's turn and one
send over HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import httpx
from fake_llm import FakeLLM, Text
from telegram_double import TelegramDouble

from skald.api.app import create_app
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.telegram.bridge import Bridge
from skald.paths import DataLayout

PASSWORD = "a household password"
TG = 7007


def _p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.9) - 1)]


async def main(turns: int) -> None:
    os.environ["SKALD_SECURITY_KDF_PROFILE"] = "test"
    os.environ["SKALD_SANDBOX_ENABLED"] = "false"
    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as fake, TelegramDouble() as double:
        layout = DataLayout(Path(tmp) / "data")
        runtime = await Runtime.boot(layout, load_config(layout.root, {}), announce=io.StringIO())
        try:
            user = (await runtime.core.users.create("ada", PASSWORD, "member")).user
            await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
            provider = await runtime.llm.add_provider(
                "Fake", "openai_compatible", fake.base_url_openai, "sk-bench"
            )
            await runtime.llm.add_model(provider.id, "m", "m", "average", ["tools"], 1, True)
            fake.script("m", [Text("ok") for _ in range(2 * turns + 10)])
            bridge = runtime.server.state(Bridge)
            await bridge.store.save_settings(
                enabled=True,
                base_url=double.url,
                web_url="",
                token_sealed=bridge.seal(double.token),
                keep_token=False,
            )
            bridge.reload()
            await asyncio.wait_for(bridge.connected.wait(), 10)
            code = await bridge.store.code_for_chat(TG)
            await bridge.store.redeem_chat_code(code, user.id)
            transport = httpx.ASGITransport(app=create_app(runtime), client=("127.0.0.1", 50000))
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as web:
                me = (
                    await web.post(
                        "/api/auth/login", json={"username": "ada", "password": PASSWORD}
                    )
                ).json()
                headers = {"X-CSRF-Token": me["csrf_token"]}
                cid = (await web.post("/api/conversations", json={}, headers=headers)).json()["id"]
                web_s: list[float] = []
                tg_s: list[float] = []
                for i in range(turns + 3):  # three of each to warm up
                    start = time.perf_counter()
                    r = await web.post(
                        "/api/chat", json={"text": "hi", "conversation_id": cid}, headers=headers
                    )
                    took = time.perf_counter() - start
                    assert r.json()["reply"] == "ok", r.text
                    start = time.perf_counter()
                    sent = double.says(TG, "hi")
                    await asyncio.to_thread(
                        double.wait_for,
                        lambda sent=sent: [s for s in double.to(TG) if s.reply_to == sent],
                    )
                    took_tg = time.perf_counter() - start
                    if i >= 3:
                        web_s.append(took)
                        tg_s.append(took_tg)
        finally:
            await runtime.shutdown()
    web_ms = statistics.median(web_s) * 1000
    tg_ms = statistics.median(tg_s) * 1000
    print(f"{'path':<10}{'median ms':>12}{'p90 ms':>10}")
    print(f"{'web':<10}{web_ms:>12.1f}{_p90(web_s) * 1000:>10.1f}")
    print(f"{'telegram':<10}{tg_ms:>12.1f}{_p90(tg_s) * 1000:>10.1f}")
    print(f"ratio telegram/web (medians): {tg_ms / web_ms:.2f} over {turns} turns each")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(10 if args.quick else 40))
