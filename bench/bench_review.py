"""Review benchmark: one conversation-review pass over a child's month of messages
(3,000 by default) against the fake provider, measuring what the model is sent and the
server's memory.

Run from the repository root:

    .venv/bin/python bench/bench_review.py                 # 3,000 messages
    .venv/bin/python bench/bench_review.py --messages 600  # quicker

It boots a real `Runtime` in this process on a scratch data directory (real SQLCipher
for the encrypted parent, the child's unencrypted database), links the parent to the
child, writes the messages into the child's database over 30 days (100 conversations,
realistic lengths), and gives the catalogue one model with a 32,000-token context.
Then it runs `SystemAgents.pass_once()` once and reports: the transcript lines and
characters the model was sent, the prompt's estimated tokens against the model's
window, the pass's time, and VmRSS before and after the pass (the acceptance bound is
< 20 MiB growth).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_llm import FakeLLM

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.system_agents.runner import SystemAgents
from skald.paths import DataLayout
from skald.plugins.manager import Plugins
from skald.store import people

PW = "a long bench password"
WINDOW = 32_000
WORDS = [
    "homework",
    "maths",
    "game",
    "friends",
    "school",
    "football",
    "drawing",
    "music",
    "dinner",
    "tired",
    "story",
]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _fill(c, count: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(25)
    start = datetime.now(UTC) - timedelta(days=30)
    per = count // 100
    for n in range(100):
        cid = f"conv{n:03d}"
        at = start + timedelta(hours=7 * n)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        c.execute(
            "INSERT INTO conversations(id, title, agent_id, created_at, updated_at) "
            "VALUES (?, ?, 'kid', ?, ?)",
            (cid, f"Chat {n}", stamp, stamp),
        )
        for i in range(per):
            role = "user" if i % 2 == 0 else "assistant"
            text = _text(rng, 12 if role == "user" else 60)
            body = json.dumps({"role": role, "content": [{"type": "text", "text": text}]})
            when = (at + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            c.execute(
                "INSERT INTO chat_messages(conversation_id, role, body, created_at) "
                "VALUES (?, ?, ?, ?)",
                (cid, role, body, when),
            )


async def main(messages: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as fake:
        layout = DataLayout(Path(tmp) / "data")
        env = {"SKALD_SECURITY_KDF_PROFILE": "test", "SKALD_SANDBOX_ENABLED": "false"}
        config = load_config(
            layout.root, env, sections=lambda p: Plugins.load(p.modules).config_sections()
        )
        rt = await Runtime.boot(layout, config, announce=io.StringIO())
        try:
            mum = (await rt.core.users.create("mum", PW, "admin")).user.id
            tim = (await rt.core.users.create("tim", PW, "children")).user.id
            await people.link(rt.server.db, mum, tim)
            for name in ("mum", "tim"):
                await rt.attach(await rt.core.users.unlock(name, PW))
            provider = await rt.llm.add_provider(
                "Fake", "openai_compatible", fake.base_url_openai, "k"
            )
            await rt.llm.add_model(
                provider.id, "model-a", "model-a", "high", ["tools"], 1, True, context_window=WINDOW
            )
            await rt.user_runtimes[tim].handle.db.transaction(lambda c: _fill(c, messages))
            fake.script("model-a", ["NOTHING_TO_REPORT"])
            runner = rt.server.state(SystemAgents)
            before = rss_mib()
            started = time.monotonic()
            opened = await runner.pass_once()
            took = time.monotonic() - started
            after = rss_mib()
            (body,) = fake.bodies()
            system = body["messages"][0]["content"]
            trigger = body["messages"][-1]["content"]
            lines = sum(1 for line in trigger.splitlines() if line.startswith("["))
            tokens = (len(system) + len(trigger)) // 4
            print(f"messages in the window:        {messages}")
            print(f"runs opened:                   {opened}")
            print(f"transcript lines sent:         {lines} (newest kept)")
            print(f"prompt characters sent:        {len(system) + len(trigger)}")
            print(f"prompt tokens (chars/4):       {tokens} of a {WINDOW}-token window")
            print(f"pass time:                     {took:.2f} s")
            print(f"RSS before / after the pass:   {before:.1f} / {after:.1f} MiB "
                  f"(growth {after - before:+.1f} MiB)")  # fmt: skip
        finally:
            await rt.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    asyncio.run(main(parser.parse_args().messages))
