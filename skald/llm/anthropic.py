"""Anthropic Messages API: content blocks in, typed SSE events out.

The API is stricter than chat completions: no system role among the messages, no
empty text blocks or messages, and every `tool_use` must be answered by `tool_result`
blocks in the one user message that comes next. The translation below guarantees those
rules, so history written by any provider can be replayed here.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import msgspec

from skald.llm.errors import LlmError
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
    Usage,
    VideoPart,
)
from skald.llm.wire import (
    DEFAULT_TIMEOUT,
    StreamingClient,
    decode_arguments,
    drain,
    iter_sse,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"

# -- what arrives: one struct covers every event type; unknown types are skipped -------


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _StartMessage(msgspec.Struct):
    usage: _Usage | None = None


class _Block(msgspec.Struct):
    type: str
    id: str | None = None
    name: str | None = None
    input: Any = None


class _Delta(msgspec.Struct):
    type: str | None = None
    text: str | None = None  # text_delta
    partial_json: str | None = None  # input_json_delta
    stop_reason: str | None = None  # message_delta


class _ErrorBody(msgspec.Struct):
    type: str = "api_error"
    message: str = ""


class _Event(msgspec.Struct):
    type: str
    index: int = 0
    message: _StartMessage | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None
    error: _ErrorBody | None = None


_event_decoder = msgspec.json.Decoder(_Event)

_REASONS: dict[str, Literal["stop", "tool_calls", "length", "content_filter"]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

# Error types the API names in bodies and in stream `error` events.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


@dataclass
class _ToolBlock:
    id: str
    name: str
    start_input: Any
    json: list[str] = field(default_factory=list)

    def call(self) -> ToolCall:
        if self.json:
            arguments = decode_arguments("".join(self.json))
        else:  # some proxies put the whole input in the start event
            arguments = self.start_input if isinstance(self.start_input, dict) else {}
        return ToolCall(id=self.id, name=self.name, arguments=arguments)


@dataclass
class _Tally:
    input_tokens: int = 0
    cache_tokens: int = 0
    output_tokens: int = 0

    def add(self, usage: _Usage | None) -> None:
        if usage is None:
            return
        if usage.input_tokens is not None:
            self.input_tokens = usage.input_tokens
        if (
            usage.cache_creation_input_tokens is not None
            or usage.cache_read_input_tokens is not None
        ):
            self.cache_tokens = (usage.cache_creation_input_tokens or 0) + (
                usage.cache_read_input_tokens or 0
            )
        if usage.output_tokens is not None:  # cumulative in message_delta
            self.output_tokens = usage.output_tokens

    def usage(self) -> Usage:
        # Cached prompt tokens are still prompt: count them, the context is that large.
        return Usage(
            input_tokens=self.input_tokens + self.cache_tokens, output_tokens=self.output_tokens
        )


# -- what goes out ----------------------------------------------------------------------

_BAD_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def _tool_id(raw: str | None) -> str:
    # Ids must match ^[a-zA-Z0-9_-]+$; history from another provider may hold ids such as
    # "functions.search:0". Mapping both the call and its result the same way keeps pairs.
    return _BAD_ID_CHARS.sub("_", raw or "") or "toolu_unknown"


def _image_block(part: ImagePart) -> dict[str, Any]:
    source = {"type": "base64", "media_type": part.media_type, "data": part.data_b64}
    return {"type": "image", "source": source}


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": _tool_id(m.tool_call_id)}
        images = [p for p in m.content if isinstance(p, ImagePart)]
        if images:  # a tool result may hold image blocks after its text
            text = [{"type": "text", "text": m.text}] if m.text.strip() else []
            result["content"] = text + [_image_block(p) for p in images]
        elif m.text:
            result["content"] = m.text
        if m.is_error:
            result["is_error"] = True
        return [result]
    blocks: list[dict[str, Any]] = []
    for part in m.content:
        if isinstance(part, TextPart):
            if part.text.strip():  # empty or blank text blocks are refused
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, VideoPart):
            # This API takes no video: a model marked `video` by mistake gets a note.
            blocks.append({"type": "text", "text": "[a video: this model cannot watch it]"})
        else:
            blocks.append(_image_block(part))
    if m.role == "assistant":
        blocks.extend(
            {"type": "tool_use", "id": _tool_id(c.id), "name": c.name, "input": c.arguments}
            for c in m.tool_calls
        )
    return blocks


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue  # goes to the top-level `system`
        blocks = _blocks(m)
        if not blocks:
            continue  # empty messages are refused
        role = "assistant" if m.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            # Tool results for one response must arrive together in one user message;
            # merging also keeps the roles alternating.
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for item in out:
        if item["role"] == "user":  # results lead, any text the user added follows
            item["content"].sort(key=lambda block: block["type"] != "tool_result")
    return out


def wire_body(request: Request) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": wire_messages(request.messages),
        "stream": True,
    }
    system = "\n\n".join(m.text for m in request.messages if m.role == "system" and m.text)
    if system:
        body["system"] = system
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    return body


# -- the client -------------------------------------------------------------------------


class AnthropicClient(StreamingClient):
    provider_name = "Anthropic"

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        http: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(base_url, api_key, http=http, timeout=timeout)

    def __repr__(self) -> str:  # never the key
        return f"AnthropicClient(base_url={self.base_url!r})"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        headers = {"anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        body = msgspec.json.encode(wire_body(request))
        async for event in self._post("/v1/messages", headers, body):
            yield event

    async def _events(self, response: httpx.Response) -> AsyncIterator[StreamEvent]:
        tally = _Tally()
        tools: dict[int, _ToolBlock] = {}
        stop_reason: str | None = None
        events = iter_sse(response.aiter_lines())
        async for sse in events:
            try:
                event = _event_decoder.decode(sse.data)
            except msgspec.MsgspecError:
                raise self._malformed() from None
            if event.type == "message_start" and event.message is not None:
                tally.add(event.message.usage)
            elif event.type == "content_block_start" and event.content_block is not None:
                block = event.content_block
                if block.type == "tool_use":
                    tools[event.index] = _ToolBlock(
                        id=block.id or "", name=block.name or "", start_input=block.input
                    )
            elif event.type == "content_block_delta" and event.delta is not None:
                if event.delta.type == "text_delta" and event.delta.text:
                    yield TextDelta(event.delta.text)
                elif event.delta.type == "input_json_delta" and event.index in tools:
                    tools[event.index].json.append(event.delta.partial_json or "")
            elif event.type == "content_block_stop" and event.index in tools:
                yield ToolCallReady(tools.pop(event.index).call())
            elif event.type == "message_delta":
                if event.delta is not None and event.delta.stop_reason:
                    stop_reason = event.delta.stop_reason
                tally.add(event.usage)
            elif event.type == "message_stop":
                await drain(events)
                break
            elif event.type == "error":
                raise self._stream_error(event.error or _ErrorBody())
            # ping, thinking blocks and future event types need nothing from us
        if stop_reason is None:
            raise self._ended_early()
        for index in sorted(tools):  # blocks a proxy forgot to close
            yield ToolCallReady(tools[index].call())
        yield Finished(reason=_REASONS.get(stop_reason, "other"), usage=tally.usage())

    def _stream_error(self, error: _ErrorBody) -> LlmError:
        return self._in_stream(f"{error.type}: {error.message}", _ERROR_STATUS.get(error.type))
