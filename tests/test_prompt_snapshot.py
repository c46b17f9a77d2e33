"""The system prompt and the tool list a member's assistant receives stay byte-identical
to the stored snapshot (tests/data/prompt_snapshot/), tool order and schemas included.

Providers cache a request's prefix: a refactor that changes one character of the system
prompt, one tool description or the order of the tools makes every member's next turn
pay for the whole prompt again. So a change here must be a decision, never a side
effect. The requests are the real ones: one chat turn per member through the
conversation service, recorded by the fake provider over HTTP.

Members: an admin, an adult member with notes in both stores (sandbox off, then on:
the sandbox tools come with the manager; its Docker host does not exist, so no
container is made) and a child (the
simple-shell `kid` agent, notes only).

Volatile parts are normalised explicitly (`_normalised`): the date and hour (prompt and
`schedule` tool) and the members' ids. Nothing else may differ.

To accept a deliberate change, rewrite the snapshot and review the diff:

    SKALD_REFRESH_PROMPT_SNAPSHOT=1 python -m pytest tests/test_prompt_snapshot.py

Trap: the refresh rewrites every file; commit only the diffs you meant.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD, TEST_ENV
from fake_llm import FakeLLM

from skald.config import load_config
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.paths import DataLayout

SNAPSHOT = Path(__file__).parent / "data" / "prompt_snapshot"
REFRESH = os.environ.get("SKALD_REFRESH_PROMPT_SNAPSHOT") == "1"
MODEL = "snapshot-model"
NO_DOCKER = "unix:///nonexistent/skald-snapshot/docker.sock"

_DATETIME = re.compile(
    r"It is \w+ \d{1,2} \w+ \d{4}, between (\d\d):00 and \1:59, in the UTC timezone"
)
_SCHEDULE_NOW = re.compile(r"it is \w+ \d{4}-\d\d-\d\d \d\d:00 there")


def _normalised(text: str, ids: dict[str, str]) -> str:
    text = _DATETIME.sub("It is <DATE>, between <HH>:00 and <HH>:59, in the UTC timezone", text)
    text = _SCHEDULE_NOW.sub("it is <DAY> <DATE> <HH>:00 there", text)
    for name, user_id in ids.items():
        text = text.replace(user_id, f"<id of {name}>")
    return text


async def _boot(root: Path, sandbox: bool) -> Runtime:
    env = {**TEST_ENV, "SKALD_SANDBOX_ENABLED": "false"}
    if sandbox:
        # The manager and its tools, but no container: Docker is "down" for this runtime.
        env |= {"SKALD_SANDBOX_ENABLED": "true", "SKALD_SANDBOX_DOCKER_HOST": NO_DOCKER}
    layout = DataLayout(root)
    return await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())


async def _household(rt: Runtime, fake: FakeLLM) -> dict[str, str]:
    ids = {}
    for name, role in (("mum", "admin"), ("ada", "member"), ("tim", "children")):
        ids[name] = (await rt.core.users.create(name, PASSWORD, role)).user.id
        await rt.attach(await rt.core.users.unlock(name, PASSWORD))
    provider = await rt.llm.add_provider(
        "Fake", "openai_compatible", fake.base_url_openai, "sk-test-123"
    )
    await rt.llm.add_model(provider.id, MODEL, MODEL, "average", ["tools"], 1, True)
    return ids


async def _write_notes(rt: Runtime, user_id: str) -> None:
    # Through the stores, not the tools under test: the index lines are written as is.
    member = rt.user_runtimes[user_id]
    await member.handle.store.note_put("people/ada.md", "# Ada\nLikes rivers and long walks.\n")
    await member.handle.store.note_put("index.md", "- people/ada.md — Ada\n")
    await member.shared.note_put("house/heating.md", "# Heating\nServiced in October.\n", user_id)
    await member.shared.note_put("index.md", "- house/heating.md — Heating\n", user_id)


async def _request(rt: Runtime, fake: FakeLLM, user_id: str) -> dict[str, Any]:
    fake.script(MODEL, ["Hello."])
    svc = rt.conversations
    conversation = await svc.create(user_id)
    sent = await svc.send(user_id, conversation.id, "hello")
    assert isinstance(sent, Sent)
    await svc.wait(user_id, sent)
    body: dict[str, Any] = fake.bodies()[-1]
    return body


def _check(case: str, body: dict[str, Any], ids: dict[str, str]) -> list[str]:
    messages = body["messages"]
    assert messages[0]["role"] == "system", messages[0]
    prompt = _normalised(messages[0]["content"], ids)
    tools = _normalised(json.dumps(body.get("tools", []), indent=1, ensure_ascii=False), ids)
    changed = []
    for name, text in ((f"{case}.system.txt", prompt), (f"{case}.tools.json", tools + "\n")):
        path = SNAPSHOT / name
        if REFRESH:
            path.write_text(text, encoding="utf-8")
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            changed.append(name)
    return changed


@pytest.fixture
async def household(
    tmp_path: Path, fake_llm: FakeLLM
) -> AsyncIterator[tuple[Runtime, dict[str, str]]]:
    rt = await _boot(tmp_path / "data", sandbox=False)
    ids = await _household(rt, fake_llm)
    yield rt, ids
    await rt.shutdown()


async def test_the_prompt_and_tools_of_every_role_are_byte_identical_to_the_snapshot(
    household: tuple[Runtime, dict[str, str]], fake_llm: FakeLLM
) -> None:
    rt, ids = household
    await _write_notes(rt, ids["ada"])
    changed = []
    for name in ids:
        changed += _check(name, await _request(rt, fake_llm, ids[name]), ids)
    assert not changed, f"prompt or tools changed: {changed} (see the module docstring)"


async def test_the_sandbox_tools_and_prompt_are_byte_identical_to_the_snapshot(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    rt = await _boot(tmp_path / "data", sandbox=True)
    try:
        ids = await _household(rt, fake_llm)
        await _write_notes(rt, ids["ada"])
        body = await _request(rt, fake_llm, ids["ada"])
        assert "execute_cmd" in json.dumps(body["tools"])
        changed = _check("ada-sandbox", body, ids)
    finally:
        await rt.shutdown()
    assert not changed, f"prompt or tools changed: {changed} (see the module docstring)"
