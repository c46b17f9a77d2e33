"""Shared by the review tests: a household with two parents supervising a child, the
fake model as its only provider, and a way to run the review pass now."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import PASSWORD, TEST_ENV, add_models
from fake_llm import FakeLLM

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.system_agents.reports import Reports
from skald.features.system_agents.runner import SystemAgents
from skald.paths import DataLayout
from skald.plugins.manager import Plugins
from skald.store import people

WORRY = "nobody would even notice if I was gone. a man from the game wants my address"


async def boot(root: Path, toml: str = "") -> Runtime:
    layout = DataLayout(root)
    await asyncio.to_thread(layout.ensure)
    await asyncio.to_thread((root / "config.toml").write_text, toml, encoding="utf-8")
    config = load_config(
        root, TEST_ENV, sections=lambda p: Plugins.load(p.modules).config_sections()
    )
    return await Runtime.boot(layout, config, announce=io.StringIO())


@pytest.fixture(name="runtime")
async def runtime_fixture(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = await boot(tmp_path / "data")
    yield rt
    await rt.shutdown()


async def family(rt: Runtime) -> dict[str, str]:
    """mum (admin) and dad (member) supervise tim (child); ada is a member nobody links."""
    ids = {}
    for name, role in (("mum", "admin"), ("dad", "member"), ("tim", "children"), ("ada", "member")):
        ids[name] = (await rt.core.users.create(name, PASSWORD, role)).user.id
    await people.link(rt.server.db, ids["mum"], ids["tim"])
    await people.link(rt.server.db, ids["dad"], ids["tim"])
    return ids


async def sign_in(rt: Runtime, username: str) -> None:
    await rt.attach(await rt.core.users.unlock(username, PASSWORD))


async def child_says(rt: Runtime, fake: FakeLLM, child: str, *texts: str) -> None:
    """The child's conversation: each text answered by the scripted model. The clock
    then moves past the second these were stored in (stamps have second resolution)."""
    if rt.user_runtimes.get(child) is None:
        user, _ = await rt.member(child)
        await sign_in(rt, user.username)
    fake.script("model-a", [f"answer {i}" for i in range(len(texts))])
    cid = None
    for text in texts:
        reply = await rt.conversations.chat(child, text, cid)
        assert reply.status == "done", reply
        cid = reply.conversation_id
    await asyncio.sleep(1.1)


async def with_model(rt: Runtime, fake: FakeLLM) -> None:
    await add_models(rt, fake, "model-a")


@pytest.fixture(name="ids")
async def ids_fixture(runtime: Runtime, fake_llm: FakeLLM) -> dict[str, str]:
    """The `family`'s ids, with the fake model as its only provider."""
    ids = await family(runtime)
    await with_model(runtime, fake_llm)
    return ids


def runner(rt: Runtime) -> SystemAgents:
    return rt.server.state(SystemAgents)


def reports(rt: Runtime) -> Reports:
    return runner(rt).reports


REPORT = (
    "# Tim felt nobody would notice him\n"
    "One message tonight needs you: Tim said nobody would notice if he was gone, and a "
    "man from a game asked for his address.\n\n"
    "## Worth your attention\n"
    "At 20:14 Tim wrote that nobody would notice if he was gone. A talk soon would help.\n\n"
    "## What they talked about\n"
    "Homework and a game."
)
