"""What a turn offers the model it goes to (skald/core/model_profile.py): no tools to a
model without the `tools` capability, the compact profile for a small one (short
prompt, core tools, the rest through `more_tools`), and the full prompt unchanged for
every other. Real owner databases, the fake provider over real HTTP, the real routes."""

from __future__ import annotations

import json
from typing import Any

from conftest import MakeClient, signed_in
from fake_llm import Call, FakeLLM

from skald.core.conversations import Sent
from skald.core.model_profile import CORE_TOOLS, MORE_TOOLS
from skald.core.runtime import Runtime


async def _model(
    runtime: Runtime,
    fake: FakeLLM,
    name: str,
    *,
    capabilities: tuple[str, ...] = ("tools",),
    context_window: int | None = None,
    profile: str = "auto",
    priority: int = 1,
) -> str:
    providers = await runtime.llm.store.providers()
    provider = providers[0] if providers else None
    if provider is None:
        provider = await runtime.llm.add_provider(
            "Fake", "openai_compatible", fake.base_url_openai, "sk-test-123"
        )
    row = await runtime.llm.add_model(
        provider.id,
        name,
        name,
        "average",
        list(capabilities),  # type: ignore[arg-type]
        priority,
        True,
        None,
        context_window,
        "chat",
        profile,  # type: ignore[arg-type]
    )
    return row.id


async def _ask(runtime: Runtime, ada: str, text: str) -> str:
    svc = runtime.conversations
    conversation = await svc.create(ada)
    sent = await svc.send(ada, conversation.id, text)
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    return conversation.id


def _system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    content = first["content"]
    return content if isinstance(content, str) else json.dumps(content)


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


async def test_a_model_without_the_tools_capability_gets_no_tools_and_is_told_what_it_cannot_do(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await _model(runtime, fake_llm, "chatty", capabilities=())
    fake_llm.script("chatty", ["I can talk with you."])
    await _ask(runtime, ada, "remind me of the oven")
    body = fake_llm.bodies()[-1]
    assert "tools" not in body
    system = _system(body)
    assert "This model has no tools" in system and "Tasks page" in system
    # No tool is described in words either.
    for name in ("read_file", "write_file", "memory_search", "more_tools", "execute_task"):
        assert name not in system, name


async def test_a_fallback_model_without_tools_gets_none_on_the_wire(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await _model(runtime, fake_llm, "able", priority=1)
    await _model(runtime, fake_llm, "plain", capabilities=(), priority=2)
    fake_llm.script("able", [503])
    fake_llm.script("plain", ["Answered without tools."])
    await _ask(runtime, ada, "hello")
    first, second = fake_llm.bodies()[-2:]
    assert first["model"] == "able" and "read_file" in _tool_names(first)
    assert second["model"] == "plain" and "tools" not in second


async def test_a_small_context_window_gets_the_compact_profile_and_reaches_the_rest_by_name(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await _model(runtime, fake_llm, "tiny", context_window=8192)
    fake_llm.script(
        "tiny",
        [
            [Call(MORE_TOOLS, {})],
            [Call(MORE_TOOLS, {"names": ["memory_search"]})],
            [Call("memory_search", {"query": "oven"})],
            "Nothing about the oven yet.",
        ],
    )
    conversation_id = await _ask(runtime, ada, "what do my notes say about the oven?")
    bodies = fake_llm.bodies()[-4:]
    offered = _tool_names(bodies[0])
    assert offered == (CORE_TOOLS | {MORE_TOOLS}), offered
    assert "## How this conversation works" not in _system(bodies[0])
    assert "more_tools" in _system(bodies[0])
    results = [
        i for i in await runtime.conversations.history(ada, conversation_id) if i.role == "tool"
    ]
    listing, schema, search = results
    assert "- memory_search:" in listing.text and "- read_file" not in listing.text
    assert '"query"' in schema.text and not schema.is_error
    # The tool described on demand ran as itself.
    assert not search.is_error, search.text


async def test_a_model_set_to_full_keeps_the_whole_prompt_and_every_tool_byte_for_byte(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await _model(runtime, fake_llm, "big")
    await _model(runtime, fake_llm, "small-full", context_window=4096, profile="full", priority=2)
    fake_llm.script("big", ["One."])
    fake_llm.script("small-full", ["Two."])
    await _ask(runtime, ada, "hello")
    models = {m.name: m.id for m in await runtime.llm.store.models()}
    svc = runtime.conversations
    conversation = await svc.create(ada)
    await svc.update(ada, conversation.id, model_id=models["small-full"])
    sent = await svc.send(ada, conversation.id, "hello")
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    big, small = fake_llm.bodies()[-2:]
    assert small["model"] == "small-full"
    assert _system(big) == _system(small)
    assert big["tools"] == small["tools"] and len(big["tools"]) > len(CORE_TOOLS) + 1


async def test_the_models_page_sets_the_prompt_profile_and_refuses_an_unknown_one(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    model_id = await _model(runtime, fake_llm, "tiny")
    mum = await signed_in(make_client, "mum")
    r = await mum.call("PATCH", f"/api/llm/models/{model_id}", json={"prompt_profile": "compact"})
    assert r.status_code == 200, r.text
    assert r.json()["prompt_profile"] == "compact"
    assert (await runtime.llm.store.model(model_id)).prompt_profile == "compact"
    r = await mum.call("PATCH", f"/api/llm/models/{model_id}", json={"prompt_profile": "tiny"})
    assert r.status_code == 400
