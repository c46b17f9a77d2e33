"""`kill -9` of the real server during a burst of 20 Telegram messages: after the restart
every message is answered exactly once (the inbox and the offset in the registry, the
hub's recovery for a turn that was running, the streamed message finished in place)."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest
from fake_llm import FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, household, wait_until
from telegram_double import TelegramDouble

pytestmark = pytest.mark.timeout(240)

PW = "kid's long password"
TG = 5005


def test_kill_9_during_a_burst_of_twenty_messages_answers_each_exactly_once(
    tmp_path: Path,
) -> None:
    # The children's role is not encrypted: their data is unlocked at boot, as a bot needs.
    with (
        FakeLLM() as fake,
        TelegramDouble() as double,
        household(tmp_path, ("kid", PW), role="children") as srv,
    ):
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        r = admin.patch(
            "/api/roles/children", json={"capabilities": ["chat", "inbox", "telegram.use"]}
        )
        assert r.status_code == 200, r.text
        admin.add_model(fake.base_url_openai, "m")
        fake.script("m", [Text("ok", delay=0.5) for _ in range(60)])
        body = {"enabled": True, "base_url": double.url, "token": double.token}
        assert admin.request("PUT", "/api/telegram/settings", json=body).status_code == 200
        kid = Api(srv.url)
        kid.login("kid", PW)
        code = kid.post("/api/telegram/code").json()["code"]
        double.says(TG, code)
        double.wait_for(lambda: [s for s in double.to(TG) if s.text.startswith("Paired")])

        def answered() -> Counter[int]:
            return Counter(s.reply_to for s in double.to(TG) if s.text == "ok" and s.reply_to)

        burst = [double.says(TG, f"message {i}") for i in range(20)]
        # Kill while the model works on the sixth (answers 1-5 went out, 6-20 wait): not
        # in the instant between Telegram taking an answer and the inbox row's deletion,
        # the one window no bot can close (Telegram has no idempotent send).
        wait_until(lambda: len(fake.bodies("openai")) >= 6)
        srv.stop(signal.SIGKILL)
        assert len(answered()) < 20
        srv.start()
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        wait_until(lambda: set(answered()) >= set(burst))
        wait_until(lambda: admin.get("/api/telegram/settings").json()["pending_updates"] == 0)
        counts = answered()
        assert set(counts) == set(burst)
        assert all(n == 1 for n in counts.values()), (
            counts,
            [(s.message_id, s.reply_to, s.text, s.edits, s.parse_mode) for s in double.to(TG)],
        )
        kid = Api(srv.url)
        kid.login("kid", PW)
        (conv,) = kid.get("/api/conversations").json()
        items = kid.get(f"/api/conversations/{conv['id']}/messages").json()
        said = Counter(i["text"] for i in items if i["role"] == "user")
        assert all(said[f"message {i}"] == 1 for i in range(20)), said
