"""What real model servers do, through the whole chat: a real API, real owner and
registry databases, and the fake provider speaking the real wire formats with the
failures real servers produce (issue 16)."""

from __future__ import annotations

import asyncio
import functools
import socket
from typing import Any

import pytest
from conftest import Client, MakeClient, admin_adds_models, post_chat, signed_in, wait_idle
from fake_llm import Call, Drop, Error, FakeLLM, Hang, Text, ToolCalls

from skald.agent import ModelSwitched, TokenDelta, TurnDone
from skald.core.plain_errors import plain
from skald.core.runtime import Runtime

# These tests add models with the tools capability only.
_models = functools.partial(admin_adds_models, capabilities=("tools",))


async def _items(client: Client, cid: str) -> list[dict[str, Any]]:
    r = await client.call("GET", f"/api/conversations/{cid}/messages")
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()
    return items


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_server_hanging_up_mid_answer_keeps_the_text_the_member_saw(
    api: str,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    await _models(make_client, fake_llm, [("model-a", api)])
    fake_llm.script("model-a", [Drop("The tide turns at six"), "Six o'clock."])
    ada = await signed_in(make_client, "ada")

    out = await post_chat(ada, "When does the tide turn?")

    assert out["status"] == "failed"
    items = await _items(ada, out["conversation_id"])
    assert [(i["role"], i["text"]) for i in items] == [
        ("user", "When does the tide turn?"),
        ("assistant", "The tide turns at six"),
    ]
    assert items[1]["interrupted"] not in (None, "stopped")
    # The next request tells the model its answer broke off.
    await post_chat(ada, "Go on", out["conversation_id"])
    last = fake_llm.bodies(api)[-1]["messages"]  # type: ignore[arg-type]
    said = next(m for m in last if m["role"] == "assistant")
    blocks = said["content"]
    text = blocks if api == "openai" else "".join(b["text"] for b in blocks)
    assert text.startswith("The tide turns at six") and "interrupted" in text


async def test_every_model_request_gets_a_usage_row_with_its_outcome(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await _models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a",
        [
            Text("Reported.", input_tokens=40, output_tokens=3),
            Text("Nobody counted this answer.", report_usage=False),
            Drop("Half an ans"),
            Hang(text_before="A story that never ends, and "),
        ],
    )
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "one")
    cid = out["conversation_id"]
    await post_chat(ada, "two", cid)
    await post_chat(ada, "three", cid)
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "four"})
    assert r.status_code == 202
    async with asyncio.timeout(10):
        while len(fake_llm.requests) < 4:  # noqa: ASYNC110 - the fake runs in another thread
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)  # the hanging answer's first words are on their way
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "/stop"})
    assert r.status_code == 200
    await wait_idle(ada, cid)

    rows = list(reversed(await runtime.llm.store.requests()))
    assert [r.status for r in rows] == ["finished", "finished", "failed", "stopped"]
    reported, unreported, broken, stopped = rows
    assert (reported.input_tokens, reported.output_tokens, reported.estimated) == (40, 3, False)
    assert unreported.estimated and unreported.input_tokens > 0
    assert unreported.output_tokens == len("Nobody counted this answer.") // 4 + 1
    assert broken.estimated and broken.output_tokens > 0 and broken.error
    assert stopped.estimated and stopped.input_tokens > 0 and stopped.output_tokens > 0
    # The conversation's totals count the stopped and the broken answers too.
    conv = (await ada.call("GET", "/api/conversations")).json()[0]
    total_out = sum(r.output_tokens for r in rows)
    assert conv["usage"]["output_tokens"] == total_out


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_call_cut_at_the_output_limit_is_not_run_over_the_real_wire(
    api: str,
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    await _models(make_client, fake_llm, [("model-a", api)])
    long_note = {"path": "user-memory/story.md", "content": "Once upon a time " * 40}
    fake_llm.script(
        "model-a",
        [ToolCalls([Call("write_file", long_note)], cut_at=60), "Sorry, I will be brief."],
    )
    ada = await signed_in(make_client, "ada")

    out = await post_chat(ada, "Write me a story into my notes")

    assert out["status"] == "done"
    items = await _items(ada, out["conversation_id"])
    result = next(i for i in items if i["role"] == "tool")
    assert result["is_error"] and "output limit" in result["text"]
    store = (await runtime.user_runtime(await runtime.core.users.get("ada"))).handle.store
    assert [n.path for n in await store.note_list()] == []  # nothing was written


async def test_a_childs_turn_ends_at_the_roles_token_budget(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await _models(make_client, fake_llm, [("model-a", "openai")])
    look = [
        ToolCalls([Call("read_file", {"path": f"user-memory/{n}.md"})], input_tokens=150_000)
        for n in range(5)
    ]
    fake_llm.script("model-a", [*look, "never"])
    tim = await signed_in(make_client, "tim")

    out = await post_chat(tim, "look at everything")

    assert out["status"] == "failed" and out["error_code"] == "turn_budget"
    assert fake_llm.remaining("model-a") == 4  # two calls made, 300k tokens > 200k


async def test_a_provider_silent_past_its_own_timeout_fails_over_to_the_next_model(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    admin = await _models(make_client, fake_llm, [("model-a", "openai"), ("model-b", "anthropic")])
    providers = {p["name"]: p for p in (await admin.call("GET", "/api/llm/providers")).json()}
    slow = providers["Fake OpenAI"]
    assert slow["silence_timeout_s"] is None  # the kind's default until set
    r = await admin.call("PATCH", f"/api/llm/providers/{slow['id']}", json={"silence_timeout_s": 1})
    assert r.status_code == 200 and r.json()["silence_timeout_s"] == 1
    bad = await admin.call(
        "PATCH", f"/api/llm/providers/{slow['id']}", json={"silence_timeout_s": 5000}
    )
    assert bad.status_code == 400
    fake_llm.script("model-a", [Hang(before_headers=True)])
    fake_llm.script("model-b", ["B answers."])
    ada = await signed_in(make_client, "ada")

    out = await post_chat(ada, "hello?")

    assert out["status"] == "done" and out["reply"] == "B answers."
    failed = (await runtime.llm.store.requests())[-1]
    assert failed.status == "failed" and "Timeout" in (failed.error or "")


def test_hosted_kinds_wait_two_minutes_of_silence_and_local_ones_five() -> None:
    from skald.llm.provider_types import load_provider_types, silence_default

    types = load_provider_types(None)
    assert silence_default("anthropic", types) == 120
    assert {k: silence_default(k, types) for k in ("openai", "openrouter")} == {
        "openai": 120,
        "openrouter": 120,
    }
    assert silence_default("ollama", types) == silence_default("llamacpp", types) == 300
    assert silence_default("openai_compatible", types) == 300


async def test_a_member_reads_a_plain_sentence_and_only_admins_see_the_technical_detail(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    # A provider nobody answers at (a port that was just free).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    admin = await signed_in(make_client, "mum")
    body = {"name": "Gone", "kind": "openai_compatible", "base_url": f"http://127.0.0.1:{port}/v1"}
    provider = (await admin.call("POST", "/api/llm/providers", json=body)).json()
    model = {"provider_id": provider["id"], "model": "m", "name": "m"}
    assert (await admin.call("POST", "/api/llm/models", json=model)).status_code == 201
    ada = await signed_in(make_client, "ada")

    async with runtime.conversations.subscribe(household["ada"]) as events:
        out = await post_chat(ada, "hello?")
        async with asyncio.timeout(10):
            async for event in events:
                inner = getattr(event, "event", None)
                if isinstance(inner, TurnDone):
                    done = inner
                    break

    assert out["status"] == "failed" and out["error_code"] == "unreachable"
    assert out["error"] == plain("unreachable")
    assert out["error_detail"] is None and str(port) not in str(out)
    assert done.error == plain("unreachable") and done.error_detail is None
    assert str(port) not in str(done)
    items = await _items(ada, out["conversation_id"])
    assert items[-1]["interrupted"] == "unreachable" and str(port) not in str(items)
    # Whoever manages the models gets the provider's own words too.
    mine = await post_chat(admin, "hello?")
    assert mine["error"] == plain("unreachable")
    assert mine["error_detail"] is not None and str(port) in mine["error_detail"]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_each_model_gets_its_own_longest_answer_instead_of_a_fixed_4096(
    api: str,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    admin = await _models(make_client, fake_llm, [("model-a", api)], max_output_tokens=777)
    fake_llm.script("model-a", ["Short.", "Default."])
    ada = await signed_in(make_client, "ada")
    await post_chat(ada, "hi")
    assert fake_llm.bodies(api)[-1]["max_tokens"] == 777  # type: ignore[arg-type]

    model = next(m for m in (await admin.call("GET", "/api/llm/models")).json())
    assert model["max_output_tokens"] == 777 and model["context_window"] is None
    r = await admin.call("PATCH", f"/api/llm/models/{model['id']}", json={"max_output_tokens": 0})
    assert r.status_code == 200 and r.json()["max_output_tokens"] is None  # unknown again
    await post_chat(ada, "hi again")
    assert fake_llm.bodies(api)[-1]["max_tokens"] == 4096  # type: ignore[arg-type]


async def test_limits_come_from_the_providers_model_list_where_it_reports_them(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script("vendor/big", [])
    fake_llm.script("plain", [])
    fake_llm.model_info["vendor/big"] = {  # OpenRouter's shape
        "context_length": 131072,
        "top_provider": {"context_length": 131072, "max_completion_tokens": 16384},
        "supported_parameters": ["tools", "temperature", "reasoning"],
        "architecture": {"input_modalities": ["text", "image"]},
    }
    admin = await _models(make_client, fake_llm, [])
    body = {"name": "Fake", "kind": "openai_compatible", "base_url": fake_llm.base_url_openai}
    provider = (await admin.call("POST", "/api/llm/providers", json=body)).json()

    r = await admin.call("GET", f"/api/llm/providers/{provider['id']}/models")

    assert r.status_code == 200, r.text
    listed = {m["id"]: m for m in r.json()}
    assert listed["vendor/big"] == {
        "id": "vendor/big",
        "context_window": 131072,
        "max_output_tokens": 16384,
        "capabilities": ["reasoning", "tools", "vision"],
    }
    assert listed["plain"]["context_window"] is None and listed["plain"]["capabilities"] == []
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("GET", f"/api/llm/providers/{provider['id']}/models")).status_code == 403


async def test_compaction_starts_from_the_real_context_window(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    admin = await _models(
        make_client, fake_llm, [("model-a", "openai")], context_window=8000, max_output_tokens=1000
    )
    await signed_in(make_client, "ada")  # her data is unlocked by the login
    mine = await runtime.user_runtime(await runtime.core.users.get("ada"))
    conversation = await mine.hub.store.create("c1", "assistant")

    setup = await mine.turn_setup(conversation, needs=())
    assert setup.config.compact_at_tokens == int((8000 - 1000) * 0.8)

    model = (await admin.call("GET", "/api/llm/models")).json()[0]
    await admin.call("PATCH", f"/api/llm/models/{model['id']}", json={"context_window": 0})
    setup = await mine.turn_setup(conversation, needs=())
    assert setup.config.compact_at_tokens is None  # unknown window, none configured


# What real providers answer when the conversation no longer fits (verbatim shapes).
OVERFLOW = {
    "openai": Error(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9013 tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
    ),
    "anthropic": Error(400, "prompt is too long: 208310 tokens > 200000 maximum"),
}


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_context_overflow_400_compacts_and_asks_again_once(
    api: str,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    await _models(make_client, fake_llm, [("model-a", api)])
    fake_llm.script("model-a", [f"Answer {n}." for n in range(5)])
    ada = await signed_in(make_client, "ada")
    long = "with a long explanation " * 40
    cid = (await post_chat(ada, f"Question 0 {long}"))["conversation_id"]
    for n in range(1, 5):
        await post_chat(ada, f"Question {n} {long}", cid)
    fake_llm.script(
        "model-a", [OVERFLOW[api], "Summary: five questions, five answers.", "Answer 5."]
    )

    out = await post_chat(ada, "Question 5", cid)

    assert out["status"] == "done" and out["reply"] == "Answer 5."
    overflowed, summary, retried = fake_llm.bodies(api)[-3:]  # type: ignore[arg-type]
    assert "tools" not in summary  # the compaction call
    assert len(str(retried["messages"])) < len(str(overflowed["messages"]))
    assert "five questions" in str(retried["messages"])
    # A second overflow in the same turn is not compacted again: it fails, in plain words.
    fake_llm.script("model-a", [OVERFLOW[api], OVERFLOW[api]])
    out = await post_chat(ada, "Question 6", cid)
    assert out["status"] == "failed" and out["error_code"] == "context_overflow"


async def test_an_overload_400_falls_back_to_the_next_model(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await _models(make_client, fake_llm, [("model-a", "openai"), ("model-b", "openai")])
    fake_llm.script("model-a", [Error(400, "Model is overloaded, please try again later.")])
    fake_llm.script("model-b", ["B here."])
    ada = await signed_in(make_client, "ada")

    out = await post_chat(ada, "hello")

    assert out["status"] == "done" and out["reply"] == "B here."


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_stream_that_breaks_before_any_call_starts_over_on_the_next_model(
    api: str,
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    await _models(make_client, fake_llm, [("model-a", api), ("model-b", api)])
    fake_llm.script("model-a", [Drop("The first half of a")])
    fake_llm.script("model-b", ["A whole answer."])
    ada = await signed_in(make_client, "ada")

    async with runtime.conversations.subscribe(household["ada"]) as events:
        out = await post_chat(ada, "hello")
        seen: list[Any] = []
        async with asyncio.timeout(10):
            async for event in events:
                inner = getattr(event, "event", None)
                seen.append(inner)
                if isinstance(inner, TurnDone):
                    break

    assert out["status"] == "done" and out["reply"] == "A whole answer."
    switched = [e for e in seen if isinstance(e, ModelSwitched)]
    assert len(switched) == 1 and switched[0].model == "model-b"
    assert switched[0].reason == ""  # a member is not told which provider broke
    deltas = [e.text for e in seen if isinstance(e, TokenDelta)]
    assert deltas.index(next(d for d in deltas if "whole" in d.lower() or d == "A wh")) > 0
    items = await _items(ada, out["conversation_id"])
    assert [(i["role"], i["text"]) for i in items] == [
        ("user", "hello"),
        ("assistant", "A whole answer."),  # the void half is not stored
    ]
    rows = list(reversed(await runtime.llm.store.requests()))
    assert [r.status for r in rows] == ["failed", "finished"]


@pytest.mark.parametrize(
    ("status", "body", "kind", "retriable"),
    [
        (
            400,
            '{"error":{"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}',
            "context_overflow",
            False,
        ),  # llama.cpp
        (
            400,
            '{"object":"error","message":"This model\'s maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError"}',
            "context_overflow",
            False,
        ),  # vLLM
        (
            413,
            '{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}',
            "context_overflow",
            False,
        ),  # Anthropic
        (
            400,
            '{"error":{"message":"Model is overloaded, please try again later.","code":400}}',
            "overloaded",
            True,
        ),
        (
            400,
            '{"error":{"message":"messages: field required","type":"invalid_request_error"}}',
            "bad_request",
            False,
        ),
        (422, '{"detail":"temperature: must be at most 2"}', "bad_request", False),
    ],
)
def test_misused_400s_are_recognised_by_their_words(
    status: int, body: str, kind: str, retriable: bool
) -> None:
    from skald.llm.errors import error_for_status
    from skald.llm.wire import error_detail

    error = error_for_status(status, "Local", error_detail(body.encode()), body)
    assert (error.kind, error.retriable) == (kind, retriable)


async def test_a_message_sent_while_a_turn_runs_is_answered_in_that_turn(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await _models(make_client, fake_llm, [("model-a", "openai")])
    note = {"path": "shared-memory/wifi.md", "content": "# Wi-Fi\nOn the fridge."}
    fake_llm.script("model-a", [[Call("write_file", note)], "Saved, and yes: it is on the fridge."])
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "Tell everyone where the wifi password is")
    assert out["status"] == "awaiting_approval"  # the turn waits for a person, still running
    cid = out["conversation_id"]

    more = {"text": "It is the one on the fridge, by the way"}
    assert (
        await ada.call("POST", f"/api/conversations/{cid}/messages", json=more)
    ).status_code == 202
    call = (await _items(ada, cid))[1]["tool_calls"][0]
    r = await ada.call("POST", f"/api/approvals/{call['id']}", json={"decision": "approve"})
    assert r.status_code == 204
    await wait_idle(ada, cid)

    # One turn, two model calls: the second saw the message at its next step.
    assert fake_llm.remaining("model-a") == 0 and len(fake_llm.bodies()) == 2
    second = fake_llm.bodies()[1]["messages"]
    assert [m["role"] for m in second][-3:] == ["assistant", "tool", "user"]
    assert second[-1]["content"] == more["text"]
    items = await _items(ada, cid)
    assert [i["role"] for i in items] == ["user", "assistant", "tool", "user", "assistant"]
    assert items[-1]["text"] == "Saved, and yes: it is on the fridge."
