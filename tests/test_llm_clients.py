"""Both provider clients against the fake provider, over a real socket.

Each behaviour is checked for both wire formats (the `api` parameter); the fake checks
every request as strictly as the real services, so a passing test also means the
request would have been accepted.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_llm import Call, Error, FakeLLM, Hang, Text, ToolCalls, fake_llm_fixture  # noqa: F401
from harness import free_port

from skald.errors import ConfigError
from skald.llm.anthropic import AnthropicClient
from skald.llm.errors import LlmError
from skald.llm.openai_compat import OpenAICompatClient
from skald.llm.provider_types import load_provider_types, make_client
from skald.llm.transport import model_http_client
from skald.llm.types import (
    Finished,
    ImagePart,
    Message,
    Request,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from skald.llm.wire import iter_sse

Client = OpenAICompatClient | AnthropicClient

PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode()
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture(params=["openai", "anthropic"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def client_for(
    fake: FakeLLM, api: str, key: str | None = None, **kw: Any
) -> OpenAICompatClient | AnthropicClient:
    if api == "openai":
        return OpenAICompatClient(fake.base_url_openai, key, provider_name="Fake", **kw)
    return AnthropicClient(fake.base_url_anthropic, key, **kw)


def user(text: str) -> Message:
    return Message(role="user", content=[TextPart(text)])


def request(*messages: Message, tools: list[ToolSpec] | None = None) -> Request:
    return Request(model="m1", messages=list(messages), tools=tools or [], max_tokens=256)


async def collect(client: Client, req: Request) -> list[StreamEvent]:
    try:
        return [event async for event in client.stream(req)]
    finally:
        await client.aclose()


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls_of(events: list[StreamEvent]) -> list[ToolCall]:
    return [e.call for e in events if isinstance(e, ToolCallReady)]


def finished(events: list[StreamEvent]) -> Finished:
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return events[-1]


# -- streaming --------------------------------------------------------------------------


async def test_streams_text(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", [Text("Hello there, household!", chunk_size=3)])
    events = await collect(
        client_for(fake_llm, api),
        request(Message(role="system", content=[TextPart("Be brief.")]), user("Hi")),
    )
    assert text_of(events) == "Hello there, household!"
    assert sum(isinstance(e, TextDelta) for e in events) > 3  # really streamed
    assert finished(events) == Finished(
        reason="stop", usage=Usage(input_tokens=12, output_tokens=5)
    )

    sent = fake_llm.requests[-1]
    assert sent.body["stream"] is True
    if api == "openai":
        assert sent.path == "/v1/chat/completions"
        assert sent.body["stream_options"] == {"include_usage": True}
        assert sent.body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ]
        assert "authorization" not in sent.headers  # local servers need no key
    else:
        assert sent.path == "/v1/messages"
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.body["system"] == "Be brief."
        assert sent.body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
        ]
        assert "x-api-key" not in sent.headers


async def test_key_goes_in_the_providers_header(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.api_key = "sk-household-1"
    fake_llm.script("m1", ["ok"])
    async with httpx.AsyncClient() as http:  # a shared client stays the caller's
        events = await collect(
            client_for(fake_llm, api, "sk-household-1", http=http), request(user("Hi"))
        )
        assert not http.is_closed
    assert text_of(events) == "ok"
    headers = fake_llm.requests[-1].headers
    if api == "openai":
        assert headers["authorization"] == "Bearer sk-household-1"
    else:
        assert headers["x-api-key"] == "sk-household-1"


async def test_connections_are_reused_between_rounds(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", ["one", [Call("get_weather", {"city": "Oslo"})], "three"])
    async with model_http_client(httpx.Timeout(5.0)) as http:  # the server's shared client
        client = client_for(fake_llm, api, http=http)
        for _ in range(3):
            await collect(client, request(user("Hi"), tools=[WEATHER]))
    # The stream is read to its end, so the pooled connection serves the next round.
    assert len({r.peer for r in fake_llm.requests}) == 1


async def test_system_text_goes_first_in_one_message(fake_llm: FakeLLM) -> None:
    fake_llm.script("m1", ["ok"])
    system = Message(role="system", content=[TextPart("Rule two.")])
    first = Message(role="system", content=[TextPart("Rule one.")])
    await collect(client_for(fake_llm, "openai"), request(first, user("Hi"), system))
    sent = fake_llm.requests[-1].body["messages"]
    assert sent[0] == {"role": "system", "content": "Rule one.\n\nRule two."}
    assert [m["role"] for m in sent] == ["system", "user"]


async def test_length_and_refusal_finish_reasons(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", [Text("cut sh", finish="length"), Text("no", finish="content_filter")])
    assert finished(await collect(client_for(fake_llm, api), request(user("a")))).reason == "length"
    events = await collect(client_for(fake_llm, api), request(user("b")))
    assert finished(events).reason == "content_filter"


async def test_usage_is_parsed(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", [Text("ok", input_tokens=4321, output_tokens=87)])
    events = await collect(client_for(fake_llm, api), request(user("Hi")))
    assert finished(events).usage == Usage(input_tokens=4321, output_tokens=87)


# -- tool calls -------------------------------------------------------------------------


async def test_tool_call_arguments_arrive_in_fragments(fake_llm: FakeLLM, api: str) -> None:
    arguments = {"city": "Torino", "days": 3, "note": 'ünïcode "quoted" \\ text'}
    fake_llm.script("m1", [ToolCalls([Call("get_weather", arguments)], fragments=7)])
    events = await collect(client_for(fake_llm, api), request(user("Weather?"), tools=[WEATHER]))
    (call,) = calls_of(events)
    assert call.name == "get_weather"
    assert call.arguments == arguments
    assert call.id
    assert finished(events).reason == "tool_calls"
    sent = fake_llm.requests[-1].body["tools"][0]
    if api == "openai":
        assert sent["function"]["parameters"] == WEATHER.parameters
    else:
        assert sent["input_schema"] == WEATHER.parameters


async def test_several_calls_in_one_response_keep_their_order(fake_llm: FakeLLM, api: str) -> None:
    calls = [Call("get_weather", {"city": "Oslo"}), Call("get_weather", {"city": "Rome"})]
    fake_llm.script("m1", [ToolCalls(calls, text="Checking both.")])
    events = await collect(client_for(fake_llm, api), request(user("Weather?"), tools=[WEATHER]))
    assert text_of(events) == "Checking both."
    assert [c.arguments["city"] for c in calls_of(events)] == ["Oslo", "Rome"]
    # Text first, then calls, then the end.
    kinds = [type(e).__name__ for e in events]
    assert kinds[-3:] == ["ToolCallReady", "ToolCallReady", "Finished"]


async def test_malformed_arguments_are_kept_raw(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", [[Call("get_weather", '{"city": "Tor')], [Call("get_weather", "")]])
    (call,) = calls_of(
        await collect(client_for(fake_llm, api), request(user("a"), tools=[WEATHER]))
    )
    assert call.arguments == {"_raw": '{"city": "Tor'}
    (call,) = calls_of(
        await collect(client_for(fake_llm, api), request(user("b"), tools=[WEATHER]))
    )
    assert call.arguments == {}


async def test_two_round_exchange(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script(
        "m1",
        [
            ToolCalls([Call("get_weather", {"city": "Torino"})], text="Let me check."),
            Text("Sunny, 24 °C."),
        ],
    )
    history = [Message(role="system", content=[TextPart("You help.")]), user("Weather?")]
    first = await collect(client_for(fake_llm, api), request(*history, tools=[WEATHER]))
    (call,) = calls_of(first)
    history += [
        Message(role="assistant", content=[TextPart(text_of(first))], tool_calls=[call]),
        Message(role="tool", tool_call_id=call.id, content=[TextPart("sunny, 24")]),
    ]
    second = await collect(client_for(fake_llm, api), request(*history, tools=[WEATHER]))
    assert text_of(second) == "Sunny, 24 °C."
    assert fake_llm.requests[-1].status == 200  # the fake accepted the pairing

    wire = fake_llm.requests[-1].body["messages"]
    if api == "openai":
        assistant, result = wire[-2], wire[-1]
        assert assistant["content"] == "Let me check."
        (sent_call,) = assistant["tool_calls"]
        assert sent_call["id"] == call.id
        assert isinstance(sent_call["function"]["arguments"], str)  # a JSON string on this API
        assert json.loads(sent_call["function"]["arguments"]) == {"city": "Torino"}
        assert result == {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24"}
    else:
        assistant, result = wire[-2], wire[-1]
        assert assistant["content"] == [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": call.id, "name": "get_weather", "input": {"city": "Torino"}},
        ]
        assert result == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny, 24"}],
        }


async def test_parallel_results_and_errors_go_on_the_wire(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", ["Oslo is cold; Rome failed."])
    calls = [
        ToolCall(id="call_a", name="get_weather", arguments={"city": "Oslo"}),
        ToolCall(id="call_b", name="get_weather", arguments={"city": "Rome"}),
    ]
    history = [
        user("Weather in Oslo and Rome?"),
        # No text at all beside the calls: neither API may see an empty text block.
        Message(role="assistant", content=[TextPart("")], tool_calls=calls),
        Message(role="tool", tool_call_id="call_a", content=[TextPart("-3")]),
        Message(role="tool", tool_call_id="call_b", content=[TextPart("timeout")], is_error=True),
        user("And keep it short."),
    ]
    await collect(client_for(fake_llm, api), request(*history, tools=[WEATHER]))
    wire = fake_llm.requests[-1].body["messages"]
    if api == "openai":
        assert wire[1]["content"] is None
        assert wire[3]["content"] == "ERROR: timeout"
        assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user"]
    else:
        # One user message answers both calls (results first), as the API requires.
        assert [m["role"] for m in wire] == ["user", "assistant", "user"]
        assert wire[2]["content"] == [
            {"type": "tool_result", "tool_use_id": "call_a", "content": "-3"},
            {
                "type": "tool_result",
                "tool_use_id": "call_b",
                "content": "timeout",
                "is_error": True,
            },
            {"type": "text", "text": "And keep it short."},
        ]


async def test_foreign_tool_ids_are_made_acceptable_to_anthropic(fake_llm: FakeLLM) -> None:
    fake_llm.script("m1", ["done"])
    call = ToolCall(id="functions.get_weather:0", name="get_weather", arguments={})
    history = [
        user("Weather?"),
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_call_id=call.id, content=[TextPart("fine")]),
    ]
    await collect(client_for(fake_llm, "anthropic"), request(*history, tools=[WEATHER]))
    wire = fake_llm.requests[-1].body["messages"]
    assert wire[1]["content"][0]["id"] == wire[2]["content"][0]["tool_use_id"]
    assert wire[2]["content"][0]["tool_use_id"] == "functions_get_weather_0"


# -- images -----------------------------------------------------------------------------


async def test_images_go_on_the_wire(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", ["A cat."])
    photo = Message(
        role="user",
        content=[TextPart("What is this?"), ImagePart(media_type="image/png", data_b64=PNG_B64)],
    )
    assert text_of(await collect(client_for(fake_llm, api), request(photo))) == "A cat."
    content = fake_llm.requests[-1].body["messages"][0]["content"]
    if api == "openai":
        assert content == [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        ]
    else:
        assert content == [
            {"type": "text", "text": "What is this?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
            },
        ]


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "retriable"), [(401, False), (429, True), (503, True)])
async def test_http_errors(fake_llm: FakeLLM, api: str, status: int, retriable: bool) -> None:
    fake_llm.script("m1", [Error(status, message="scripted trouble")])
    with pytest.raises(LlmError) as caught:
        await collect(client_for(fake_llm, api), request(user("Hi")))
    assert caught.value.status == status
    assert caught.value.retriable is retriable
    assert "scripted trouble" in str(caught.value)  # the provider's message is kept


async def test_unknown_model_is_not_retriable(fake_llm: FakeLLM, api: str) -> None:
    with pytest.raises(LlmError) as caught:
        await collect(client_for(fake_llm, api), request(user("Hi")))
    assert caught.value.status == 404
    assert not caught.value.retriable


async def test_connection_refused_is_retriable(api: str) -> None:
    port = free_port()  # nothing listens there
    if api == "openai":
        client: Client = OpenAICompatClient(f"http://127.0.0.1:{port}/v1", None, provider_name="X")
    else:
        client = AnthropicClient(f"http://127.0.0.1:{port}", "sk-x")
    with pytest.raises(LlmError) as caught:
        await collect(client, request(user("Hi")))
    assert caught.value.retriable
    assert caught.value.status is None


async def test_a_silent_server_times_out_retriably(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", [Hang(before_headers=True)])
    with pytest.raises(LlmError) as caught:
        await collect(client_for(fake_llm, api, timeout=0.3), request(user("Hi")))
    assert caught.value.retriable
    assert "Timeout" in str(caught.value)


async def test_error_inside_the_stream(fake_llm: FakeLLM, api: str) -> None:
    status = 503 if api == "openai" else 529
    fake_llm.script(
        "m1", [Error(status, message="overloaded now", in_stream=True, text_before="Par")]
    )
    seen: list[StreamEvent] = []
    with pytest.raises(LlmError) as caught:
        async for event in client_for(fake_llm, api).stream(request(user("Hi"))):
            seen.append(event)
    assert text_of(seen) == "Par"
    assert caught.value.retriable
    assert "overloaded now" in str(caught.value)


async def test_the_fake_rejects_a_tool_result_without_its_call(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", ["never sent"])
    orphan = Message(role="tool", tool_call_id="call_nowhere", content=[TextPart("42")])
    with pytest.raises(LlmError) as caught:
        await collect(client_for(fake_llm, api), request(user("Hi"), orphan))
    assert caught.value.status == 400
    assert not caught.value.retriable
    expected = (
        "preceeding message with 'tool_calls'" if api == "openai" else "unexpected `tool_use_id`"
    )
    assert expected in str(caught.value)
    assert fake_llm.remaining("m1") == 1  # rejected before any reply was used


async def test_the_api_key_never_shows(fake_llm: FakeLLM, api: str) -> None:
    secret = "sk-very-secret-0123456789"
    fake_llm.api_key = "sk-the-right-one"
    fake_llm.echo_key = True  # the worst case: a server that repeats the rejected key
    client = client_for(fake_llm, api, secret)
    assert secret not in repr(client)
    with pytest.raises(LlmError) as caught:
        await collect(client, request(user("Hi")))
    assert caught.value.status == 401
    assert not caught.value.retriable
    assert secret in (fake_llm.requests[-1].error or "")  # it really was echoed
    assert secret not in str(caught.value)
    assert secret not in repr(caught.value)


# -- cancellation -----------------------------------------------------------------------


async def test_cancelling_the_consumer_closes_the_connection(fake_llm: FakeLLM, api: str) -> None:
    fake_llm.script("m1", [Hang(text_before="Thinking")])
    first_text = asyncio.Event()

    async def consume() -> None:
        async for event in client_for(fake_llm, api).stream(request(user("Hi"))):
            if isinstance(event, TextDelta):
                first_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_text.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await fake_llm.wait_disconnected(fake_llm.requests[-1])


# -- the fake is as strict as the real services ------------------------------------------

GOOD_OPENAI: dict[str, Any] = {"model": "m1", "messages": [{"role": "user", "content": "Hi"}]}
GOOD_ANTHROPIC: dict[str, Any] = {
    "model": "m1",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "Hi"}],
}
ASSISTANT_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    ],
}


@pytest.mark.parametrize(
    ("api_path", "body", "expected"),
    [
        ("/v1/chat/completions", {"messages": GOOD_OPENAI["messages"]}, "provide a model"),
        ("/v1/chat/completions", {"model": "m1", "messages": []}, "too short"),
        (
            "/v1/chat/completions",
            {"model": "m1", "messages": [GOOD_OPENAI["messages"][0], ASSISTANT_CALL]},
            "expected a string, but got an object",
        ),
        (
            "/chat/completions",
            {**GOOD_OPENAI, "stream_options": {"include_usage": True}},
            "only allowed when 'stream' is enabled",
        ),
        (
            "/v1/messages",
            {"model": "m1", "messages": GOOD_ANTHROPIC["messages"]},
            "max_tokens: Field required",
        ),
        (
            "/v1/messages",
            {
                **GOOD_ANTHROPIC,
                "messages": [{"role": "system", "content": "x"}, GOOD_ANTHROPIC["messages"][0]],
            },
            "Unexpected role",
        ),
        (
            "/v1/messages",
            {**GOOD_ANTHROPIC, "messages": [GOOD_ANTHROPIC["messages"][0]] * 2},
            "roles must alternate",
        ),
        (
            "/v1/messages",
            {
                **GOOD_ANTHROPIC,
                "messages": [
                    GOOD_ANTHROPIC["messages"][0],
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {"role": "user", "content": "no result here"},
                ],
            },
            "without `tool_result` blocks",
        ),
        (
            "/v1/messages",
            {
                **GOOD_ANTHROPIC,
                "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}],
            },
            "must be non-empty",
        ),
    ],
)
async def test_the_fake_rejects_malformed_requests(
    fake_llm: FakeLLM, api_path: str, body: dict[str, Any], expected: str
) -> None:
    headers = {"anthropic-version": "2023-06-01"} if api_path == "/v1/messages" else {}
    async with httpx.AsyncClient(base_url=fake_llm.base_url_anthropic) as http:
        r = await http.post(api_path, json=body, headers=headers)
    assert r.status_code == 400
    error = r.json()
    if api_path == "/v1/messages":
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
    else:
        assert error["error"]["type"] == "invalid_request_error"
    assert expected in str(error)


async def test_the_fake_requires_the_anthropic_version_header(fake_llm: FakeLLM) -> None:
    async with httpx.AsyncClient(base_url=fake_llm.base_url_anthropic) as http:
        r = await http.post("/v1/messages", json=GOOD_ANTHROPIC)
    assert r.status_code == 400
    assert "anthropic-version" in r.json()["error"]["message"]


async def test_the_fake_also_answers_without_streaming(fake_llm: FakeLLM) -> None:
    fake_llm.script("m1", [[Call("f", {"a": 1}, id="call_9")], [Call("f", {"a": 2}, id="toolu_9")]])
    async with httpx.AsyncClient(base_url=fake_llm.base_url_anthropic) as http:
        r = await http.post("/v1/chat/completions", json=GOOD_OPENAI)
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        assert choice["message"]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
        r = await http.post(
            "/v1/messages", json=GOOD_ANTHROPIC, headers={"anthropic-version": "2023-06-01"}
        )
        message = r.json()
        assert message["stop_reason"] == "tool_use"
        assert message["content"] == [
            {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"a": 2}}
        ]


# -- SSE framing ------------------------------------------------------------------------


async def test_sse_framing() -> None:
    lines = [": keep-alive", "event: one", 'data: {"a":', "data: 1}", "", "", "data:[DONE]"]

    async def source() -> AsyncIterator[str]:
        for line in lines:
            yield line

    events = [e async for e in iter_sse(source())]
    assert [(e.event, e.data) for e in events] == [("one", '{"a":\n1}'), ("message", "[DONE]")]


# -- provider types ---------------------------------------------------------------------


def test_shipped_provider_types() -> None:
    types = load_provider_types(None)
    assert set(types) == {
        "openai",
        "openrouter",
        "deepseek",
        "deepinfra",
        "ollama",
        "lmstudio",
        "llamacpp",
        "vllm",
    }
    assert types["ollama"].base_url == "http://127.0.0.1:11434/v1"
    assert not types["ollama"].requires_key
    assert types["lmstudio"].base_url == "http://127.0.0.1:1234/v1"
    assert types["llamacpp"].base_url == "http://127.0.0.1:8080/v1"
    assert types["vllm"].base_url == "http://127.0.0.1:8000/v1"
    assert types["openrouter"].requires_key
    assert all(t.docs for t in types.values())


def test_override_file_replaces_and_adds(tmp_path: Path) -> None:
    (tmp_path / "providers.json").write_text(
        json.dumps(
            {
                "providers": [
                    {
                        "id": "ollama",
                        "name": "Ollama (attic)",
                        "base_url": "http://192.168.1.20:11434/v1",
                        "requires_key": False,
                    },
                    {
                        "id": "together",
                        "name": "Together",
                        "base_url": "https://api.together.example/v1",
                    },
                ]
            }
        )
    )
    types = load_provider_types(tmp_path)
    assert types["ollama"].base_url == "http://192.168.1.20:11434/v1"
    assert types["together"].requires_key  # the default
    assert types["openai"].name == "OpenAI"  # untouched entries stay


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"providers": [{"id": "x", "name": "X"}]}', "base_url"),
        (
            '{"providers": [{"id": "x", "name": "X", "base_url": "http://x", "colour": 1}]}',
            "colour",
        ),
        ('{"providers": [{"id": "anthropic", "name": "A", "base_url": "http://a"}]}', "reserved"),
    ],
)
def test_malformed_override_names_the_file(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "providers.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_provider_types(tmp_path)
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_make_client_defaults_and_refusals() -> None:
    types = load_provider_types(None)
    ollama = make_client("ollama", None, None, types)
    assert isinstance(ollama, OpenAICompatClient)
    assert ollama.base_url == "http://127.0.0.1:11434/v1"
    assert isinstance(make_client("anthropic", None, "sk-a", types), AnthropicClient)
    with pytest.raises(ConfigError, match="needs an API key"):
        make_client("openrouter", None, None, types)
    with pytest.raises(ConfigError, match="base URL"):
        make_client("openai_compatible", None, None, types)
    with pytest.raises(ConfigError, match="unknown provider kind"):
        make_client("nope", None, None, types)


async def test_made_clients_talk_to_the_fake(fake_llm: FakeLLM) -> None:
    types = load_provider_types(None)
    fake_llm.script("m1", ["one", "two", "three"])
    for kind, key in (("llamacpp", None), ("openai", "sk-1"), ("openai_compatible", None)):
        client = make_client(kind, fake_llm.base_url_openai, key, types)
        assert isinstance(client, OpenAICompatClient)
        assert text_of(await collect(client, request(user("Hi"))))
    # OpenAI's own API gets the newer field its reasoning models insist on.
    assert "max_tokens" in fake_llm.requests[0].body
    assert fake_llm.requests[1].body["max_completion_tokens"] == 256
