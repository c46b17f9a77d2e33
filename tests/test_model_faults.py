"""What real model servers do, through the whole chat: a real API, real owner and
registry databases, and the fake provider speaking the real wire formats with the
failures real servers produce (issue 16)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import Client
from fake_llm import Drop, FakeLLM

from skald.core.runtime import Runtime

MakeClient = Callable[[], Awaitable[Client]]


async def _models(
    make_client: MakeClient, fake: FakeLLM, models: list[tuple[str, str]], **extra: Any
) -> Client:
    """An admin adds the fake as a provider and these (wire id, api) models, in order."""
    admin = await make_client()
    await admin.login("mum")
    providers: dict[str, str] = {}
    for api in dict.fromkeys(api for _, api in models):
        body = (
            {"name": "Fake OpenAI", "kind": "openai_compatible", "base_url": fake.base_url_openai}
            if api == "openai"
            else {
                "name": "Fake Anthropic",
                "kind": "anthropic",
                "base_url": fake.base_url_anthropic,
                "api_key": "sk-ant-test",
            }
        )
        r = await admin.call("POST", "/api/llm/providers", json=body)
        assert r.status_code == 201, r.text
        providers[api] = r.json()["id"]
    for priority, (wire, api) in enumerate(models, start=1):
        body = {
            "provider_id": providers[api],
            "model": wire,
            "name": wire,
            "priority": priority,
            "capabilities": ["tools"],
            **extra,
        }
        r = await admin.call("POST", "/api/llm/models", json=body)
        assert r.status_code == 201, r.text
    return admin


async def _chat(client: Client, text: str, conversation_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"text": text}
    if conversation_id:
        body["conversation_id"] = conversation_id
    r = await client.call("POST", "/api/chat", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


async def _items(client: Client, cid: str) -> list[dict[str, Any]]:
    r = await client.call("GET", f"/api/conversations/{cid}/messages")
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()
    return items


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_server_hanging_up_mid_answer_keeps_the_text_the_member_saw(
    api: str,
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    await _models(make_client, fake_llm, [("model-a", api)])
    fake_llm.script("model-a", [Drop("The tide turns at six"), "Six o'clock."])
    ada = await make_client()
    await ada.login("ada")

    out = await _chat(ada, "When does the tide turn?")

    assert out["status"] == "failed"
    items = await _items(ada, out["conversation_id"])
    assert [(i["role"], i["text"]) for i in items] == [
        ("user", "When does the tide turn?"),
        ("assistant", "The tide turns at six"),
    ]
    assert items[1]["interrupted"] not in (None, "stopped")
    # The next request tells the model its answer broke off.
    await _chat(ada, "Go on", out["conversation_id"])
    last = fake_llm.bodies(api)[-1]["messages"]  # type: ignore[arg-type]
    said = next(m for m in last if m["role"] == "assistant")
    blocks = said["content"]
    text = blocks if api == "openai" else "".join(b["text"] for b in blocks)
    assert text.startswith("The tide turns at six") and "interrupted" in text
