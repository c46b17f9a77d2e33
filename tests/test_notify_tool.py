"""The `notify` tool: the assistant tells its own member something, through the chat
loop with a scripted model (the default approval rules let it through)."""

from __future__ import annotations

import pytest
from conftest import PASSWORD
from fake_llm import Call, FakeLLM, Text

from skald.core.runtime import Runtime

pytestmark = pytest.mark.timeout(60)


async def _model(runtime: Runtime, fake: FakeLLM) -> None:
    provider = await runtime.llm.add_provider(
        "Fake", "openai_compatible", fake.base_url_openai, "sk-test-123"
    )
    await runtime.llm.add_model(provider.id, "model-a", "model-a", "average", ["tools"], 1, True)


@pytest.fixture
async def ada(runtime: Runtime, household: dict[str, str]) -> str:
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    await runtime.attach(await runtime.core.users.unlock("tim", PASSWORD))
    return household["ada"]


async def test_the_assistant_notifies_its_own_member_without_asking_for_approval(
    runtime: Runtime, ada: str, household: dict[str, str], fake_llm: FakeLLM
) -> None:
    await _model(runtime, fake_llm)
    call = Call("notify", {"title": "Bins out", "body": "It is Monday", "link": "/tasks"})
    fake_llm.script("model-a", [[call], Text("I will remind you.")])
    reply = await runtime.conversations.chat(ada, "remind me about the bins")
    assert reply.status == "done", reply
    assert reply.reply == "I will remind you."
    items, unread = await (await runtime.notifications.store(ada)).page(limit=10)
    assert [(n.title, n.body, n.link, n.source) for n in items] == [
        ("Bins out", "It is Monday", "/tasks", "assistant")
    ]
    assert unread == 1
    tims, _ = await (await runtime.notifications.store(household["tim"])).page(limit=10)
    assert tims == []
    await runtime.notifications.flush()
    items, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    assert items[0].delivered


async def test_a_notify_call_with_a_link_elsewhere_is_an_error_the_model_reads(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await _model(runtime, fake_llm)
    call = Call("notify", {"title": "Click me", "link": "https://evil.example/login"})
    fake_llm.script("model-a", [[call], Text("Sorry.")])
    reply = await runtime.conversations.chat(ada, "go")
    assert reply.status == "done"
    history = await runtime.conversations.history(ada, reply.conversation_id)
    results = [i for i in history if i.role == "tool"]
    assert any(i.is_error and "page of the app" in i.text for i in results), history
    items, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    assert items == []
