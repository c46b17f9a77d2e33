"""The conversation service on its own: no HTTP, no session, only a user id, as a bot,
the scheduler or a system agent will call it. Real owner databases, a fake provider."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import PASSWORD, add_models
from fake_llm import Call, FakeLLM, Text

from skald.agent import TurnDone
from skald.core.conversations import COMMANDS, ChatReply, CommandResult, Sent, is_command
from skald.core.events import (
    ChatEvent,
    ConversationUpdated,
    ServerEvent,
    SessionRevoked,
    UserMessage,
)
from skald.core.runtime import Runtime
from skald.errors import DatabaseClosedError, InvalidInputError, NotFoundError


async def test_a_turn_runs_from_a_user_id_alone_and_its_answer_is_waited_for(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    llm.script("model-a", ["Hello from the service."])
    svc = runtime.conversations
    conversation = await svc.create(ada, "from a bot")
    sent = await svc.send(ada, conversation.id, "hi there")
    assert isinstance(sent, Sent)
    reply = await svc.wait(ada, sent)
    assert reply == ChatReply(
        conversation_id=conversation.id, reply="Hello from the service.", status="done"
    )
    history = await svc.history(ada, conversation.id)
    assert [(i.role, i.text) for i in history] == [
        ("user", "hi there"),
        ("assistant", "Hello from the service."),
    ]
    assert [c.id for c in await svc.all(ada)] == [conversation.id]


async def test_the_view_context_reaches_the_model_but_not_the_shown_text(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    llm.script("model-a", ["ok"])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    sent = await svc.send(ada, conversation.id, "what is this?", view_context="Files: ~/notes")
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    asked = json.dumps(llm.bodies()[-1])
    assert "Files: ~/notes" in asked
    assert (await svc.history(ada, conversation.id))[0].text == "what is this?"
    # The title comes from what was typed.
    assert (await svc.get(ada, conversation.id)).title == "what is this?"


async def test_slash_commands_run_in_the_service_and_are_never_stored(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "model-a", "model-b")
    svc = runtime.conversations
    conversation = await svc.create(ada)
    out = await svc.send(ada, conversation.id, "/model model-b")
    assert out == CommandResult(command="model", result="using model-b")
    assert (await svc.get(ada, conversation.id)).model_id is not None
    out = await svc.command(ada, conversation.id, "/model auto")
    assert out.result == "using AUTO"
    assert "tokens in" in (await svc.command(ada, conversation.id, "/cost")).result
    new = await svc.command(ada, conversation.id, "/new")
    assert new.conversation_id and new.conversation_id != conversation.id
    assert (await svc.command(ada, conversation.id, "/stop")).result == "stopped"
    with pytest.raises(InvalidInputError, match="known: /stop"):
        await svc.command(ada, conversation.id, "/reboot")
    with pytest.raises(InvalidInputError, match="no model named"):
        await svc.command(ada, conversation.id, "/model nope")
    assert await svc.history(ada, conversation.id) == []
    # /chat answers a command inline, and "/etc/hosts" is not one.
    reply = await svc.chat(ada, "/cost", conversation.id)
    assert reply.status == "done" and "tokens in" in reply.reply
    assert not is_command("/etc/hosts: what is it?") and is_command("  /model x")
    assert [c.name for c in COMMANDS] == ["stop", "compact", "model", "cost", "new"]


async def test_chat_answers_awaiting_approval_and_a_decision_by_user_id_continues_the_turn(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    write = Call("write_file", {"path": "shared-memory/wifi.md", "content": "on the fridge"})
    llm.script("model-a", [[write], Text("Saved for everyone.")])
    svc = runtime.conversations
    reply = await svc.chat(ada, "tell the household")
    assert reply.status == "awaiting_approval" and reply.reply == ""
    history = await svc.history(ada, reply.conversation_id)
    call_id = history[1].tool_calls[0].id
    # Another member's id finds nothing, neither the call nor the conversation.
    mum = (await runtime.core.users.get("mum")).id
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    with pytest.raises(NotFoundError):
        await svc.decide(mum, call_id, True)
    with pytest.raises(NotFoundError):
        await svc.history(mum, reply.conversation_id)
    await svc.decide(ada, call_id, True)
    for _ in range(200):
        if (await svc.get(ada, reply.conversation_id)).status == "idle":
            break
        await asyncio.sleep(0.02)
    assert (await svc.history(ada, reply.conversation_id))[-1].text == "Saved for everyone."
    assert "fridge" in await runtime.shared_memory.note_get("wifi.md")


async def test_a_subscription_follows_the_members_events_without_a_session(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    llm.script("model-a", ["Streamed."])
    svc = runtime.conversations
    seen: list[ServerEvent] = []
    async with svc.subscribe(ada) as events:
        conversation = await svc.create(ada)
        sent = await svc.send(ada, conversation.id, "hello")
        assert isinstance(sent, Sent)
        async for event in events:
            seen.append(event)
            if isinstance(event, ChatEvent) and isinstance(event.event, TurnDone):
                break
    assert isinstance(seen[0], ConversationUpdated)
    assert any(isinstance(e, UserMessage) and e.item.text == "hello" for e in seen)
    # Closed with the block: nothing is delivered to it any more.
    assert all(c.token_hash for c in runtime.events.connections(ada))


async def test_a_subscription_ends_when_the_member_is_deactivated(
    runtime: Runtime, ada: str
) -> None:
    events = runtime.conversations.subscribe(ada)
    await runtime.deactivate(await runtime.core.users.get("ada"))
    assert isinstance([e async for e in events][-1], SessionRevoked)


async def test_a_locked_member_cannot_be_reached_and_an_unknown_one_is_not_found(
    runtime: Runtime, ada: str
) -> None:
    svc = runtime.conversations
    conversation = await svc.create(ada)
    await runtime.lock(ada)
    with pytest.raises(DatabaseClosedError):
        await svc.get(ada, conversation.id)
    with pytest.raises(NotFoundError):
        await svc.all("no-such-user")


async def test_update_checks_the_model_and_the_security_group(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    svc = runtime.conversations
    conversation = await svc.create(ada)
    with pytest.raises(InvalidInputError, match="no such model"):
        await svc.update(ada, conversation.id, model_id="nope")
    with pytest.raises(InvalidInputError, match="security group"):
        await svc.update(ada, conversation.id, security_group="nope")
    default = await svc.default_security_group(ada)
    assert default in {g.name for g in await svc.security_groups(ada)}
    changed = await svc.update(ada, conversation.id, title="Renamed", security_group=default)
    assert changed.title == "Renamed" and changed.security_group == default
