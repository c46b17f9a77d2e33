"""A chat turn in which the model runs a command: the call waits for approval (the
default gate requires it for `exec` tools), runs in the member's container once approved,
and the model's answer carries what the container printed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import MakeClient, admin_adds_models, post_chat, signed_in, wait_idle
from fake_llm import Call, FakeLLM, Text
from sandbox_support import docker_fixture, sandbox_runtime_fixture, wait_for  # noqa: F401

from skald.core.runtime import Runtime

pytestmark = pytest.mark.docker


@pytest.fixture
async def runtime(sandbox_runtime: Runtime) -> AsyncIterator[Runtime]:
    # conftest's clients and household use `runtime`: here it is one with sandboxes.
    yield sandbox_runtime


class EchoLastToolResult:
    """Scripted reply: answer with the text of the latest tool result the model got."""


def _echo(fake: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    original = fake._next_reply

    def next_reply(model: str) -> Any:
        reply = original(model)
        if not isinstance(reply, EchoLastToolResult):
            return reply
        messages = fake.requests[-1].body["messages"]
        tool_results = [m["content"] for m in messages if m.get("role") == "tool"]
        return Text("The sandbox said: " + tool_results[-1])

    monkeypatch.setattr(fake, "_next_reply", next_reply)


async def test_model_runs_a_command_after_approval(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
    docker: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    _echo(fake_llm, monkeypatch)
    command = "echo made in $(hostname) on $(. /etc/os-release; echo $VERSION_CODENAME) as $(id -u)"
    fake_llm.script("model-a", [[Call("execute_cmd", {"command": command})], EchoLastToolResult()])
    ada = await signed_in(make_client, "ada")
    assert runtime.sandbox is not None
    sandbox = runtime.sandbox

    async def probed() -> bool:
        return bool(sandbox.commands.get(household["ada"]))

    await wait_for(probed, 20)  # the login started the container and probed it
    out = await post_chat(ada, "Which Debian does your sandbox run?")
    system = fake_llm.bodies("openai")[0]["messages"][0]["content"]
    assert "## Your sandbox" in system and "`python3`" in system and "`tesseract`" in system
    assert out["status"] == "awaiting_approval"
    cid = out["conversation_id"]
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    call = items[1]["tool_calls"][0]
    assert call["name"] == "execute_cmd" and call["status"] == "awaiting_approval"

    r = await ada.call("POST", f"/api/approvals/{call['id']}", json={"decision": "approve"})
    assert r.status_code == 204, r.text
    await wait_idle(ada, cid)

    assert runtime.sandbox is not None
    container = docker.containers.get(runtime.sandbox.container_name(household["ada"]))
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    answer = items[-1]["text"]
    # The container's hostname is its short id: only the container could have said it.
    assert f"made in {container.id[:12]} on trixie as" in answer, answer
    assert answer.startswith("The sandbox said: [exit code 0]")
