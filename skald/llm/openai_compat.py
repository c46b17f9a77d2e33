"""OpenAI-compatible Chat Completions: OpenAI itself, OpenRouter, DeepSeek, DeepInfra,
Ollama, LM Studio, llama.cpp server and vLLM all speak this one wire format.

The local servers differ from OpenAI in small ways (no key, missing tool-call indexes or
ids, `finish_reason: "stop"` after tool calls); the parser is lenient about those.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import msgspec

from skald.llm.errors import LlmError
from skald.llm.types import (
    ContentPart,
    Finished,
    ImagePart,
    Message,
    ReasoningDelta,
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

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]

# -- what arrives: the subset of a chat.completion.chunk we read ------------------------


class _FunctionDelta(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _FunctionDelta | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    # Reasoning streamed before the answer: DeepSeek, vLLM and llama.cpp name it
    # `reasoning_content`, OpenRouter and Ollama `reasoning`.
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # OpenRouter reports the charge (USD credits); Any, so an odd value elsewhere cannot
    # fail the whole stream over a number we only display.
    cost: Any = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None  # OpenRouter and others report mid-stream failures this way


_chunk_decoder = msgspec.json.Decoder(_Chunk)

Reason = Literal["stop", "tool_calls", "length", "content_filter", "other"]
_REASONS: dict[str, Reason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _CallAssembler:
    """Collects streamed tool-call fragments by index until the model finishes."""

    def __init__(self) -> None:
        self._calls: dict[int, _PendingCall] = {}
        self.seen = False

    def add(self, delta: _ToolCallDelta) -> None:
        self.seen = True
        index = delta.index
        if index is None:
            # Some servers omit the index: a new id opens a call, anything else continues
            # the last one.
            known = {c.id for c in self._calls.values()}
            new = not self._calls or bool(delta.id and delta.id not in known)
            index = len(self._calls) if new else max(self._calls)
        call = self._calls.setdefault(index, _PendingCall())
        if delta.id and not call.id:
            call.id = delta.id
        if delta.function is not None:
            if delta.function.name and not call.name:
                call.name = delta.function.name
            if delta.function.arguments:
                call.arguments.append(delta.function.arguments)

    def take(self) -> list[ToolCall]:
        done = [
            ToolCall(
                # Ollama has sent calls without ids; the result must still point at one.
                id=call.id or f"call_{secrets.token_hex(12)}",
                name=call.name,
                arguments=decode_arguments("".join(call.arguments)),
            )
            for _, call in sorted(self._calls.items())
        ]
        self._calls.clear()
        return done


# -- what goes out ----------------------------------------------------------------------


def _user_content(parts: list[ContentPart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        # A plain string: servers without vision support often reject the array form.
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, VideoPart):
            # No official field in this format: `video_url` is what vLLM, OpenRouter and
            # the Qwen-VL servers read; the model must be marked `video` to get one.
            url = f"data:{part.media_type};base64,{part.data_b64}"
            out.append({"type": "video_url", "video_url": {"url": url}})
        else:
            url = f"data:{part.media_type};base64,{part.data_b64}"
            out.append({"type": "image_url", "image_url": {"url": url}})
    return out


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    # All system text goes first, in one message: several local chat templates
    # (llama.cpp, vLLM) refuse a system message anywhere else.
    system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    # Pictures a tool returned: this format takes only text in a tool message, so they
    # follow the batch of tool messages as one user message (none may come in between).
    pictures: list[ContentPart] = []
    for m in messages:
        if m.role != "tool" and pictures:
            out.append({"role": "user", "content": _user_content(pictures)})
            pictures = []
        if m.role == "user":
            out.append({"role": "user", "content": _user_content(m.content)})
        elif m.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        # The API wants the arguments as a JSON string, not an object.
                        "function": {
                            "name": c.name,
                            "arguments": msgspec.json.encode(c.arguments).decode(),
                        },
                    }
                    for c in m.tool_calls
                ]
            elif item["content"] is None:
                item["content"] = ""
            out.append(item)
        elif m.role == "tool":
            # This format has no error flag on a tool result; say it in the text.
            text = f"ERROR: {m.text}" if m.is_error else m.text
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": text})
            images = [p for p in m.content if isinstance(p, ImagePart)]
            if images:
                note = f"The pictures the tool call {m.tool_call_id} returned:"
                pictures += [TextPart(note), *images]
    if pictures:
        out.append({"role": "user", "content": _user_content(pictures)})
    return out


def wire_body(request: Request, max_tokens_field: MaxTokensField) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "messages": wire_messages(request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        max_tokens_field: request.max_tokens,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    return body


# -- the client -------------------------------------------------------------------------


class OpenAICompatClient(StreamingClient):
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        provider_name: str,
        http: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        max_tokens_field: MaxTokensField = "max_tokens",
    ) -> None:
        super().__init__(base_url, api_key, http=http, timeout=timeout)
        self.provider_name = provider_name
        self._max_tokens_field = max_tokens_field

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatClient(provider={self.provider_name!r}, base_url={self.base_url!r})"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        headers = {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = msgspec.json.encode(wire_body(request, self._max_tokens_field))
        async for event in self._post("/chat/completions", headers, body):
            yield event

    async def _events(self, response: httpx.Response) -> AsyncIterator[StreamEvent]:
        calls = _CallAssembler()
        finish: str | None = None
        usage = Usage()
        done = False
        events = iter_sse(response.aiter_lines())
        async for sse in events:
            if sse.data.strip() == "[DONE]":
                done = True
                await drain(events)
                break
            if sse.event == "error":
                raise self._stream_error(_loads(sse.data))
            try:
                chunk = _chunk_decoder.decode(sse.data)
            except msgspec.MsgspecError:
                raise self._malformed() from None
            if chunk.error is not None:
                raise self._stream_error(chunk.error)
            if chunk.usage is not None:
                usage = Usage(
                    input_tokens=chunk.usage.prompt_tokens or 0,
                    output_tokens=chunk.usage.completion_tokens or 0,
                    cost_usd=_number(chunk.usage.cost),
                )
            for choice in (chunk.choices or [])[:1]:  # we never ask for n > 1
                if choice.delta is not None:
                    thought = choice.delta.reasoning_content or choice.delta.reasoning
                    if thought:
                        yield ReasoningDelta(thought)
                    if choice.delta.content:
                        yield TextDelta(choice.delta.content)
                    for delta in choice.delta.tool_calls or []:
                        calls.add(delta)
                if choice.finish_reason:
                    finish = choice.finish_reason
                    for call in calls.take():
                        yield ToolCallReady(call)
        if not done and finish is None:
            raise self._ended_early()
        for call in calls.take():
            yield ToolCallReady(call)
        reason: Reason = _REASONS.get(finish or "stop", "other")
        if calls.seen and reason == "stop":
            # Some local servers say "stop" after tool calls; the calls are what matter.
            reason = "tool_calls"
        yield Finished(reason=reason, usage=usage)

    def _stream_error(self, error: Any) -> LlmError:
        if isinstance(error, dict) and "error" in error:
            error = error["error"]
        message = error.get("message") if isinstance(error, dict) else error
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) and 400 <= code < 600 else None
        return self._in_stream(str(message), status)


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def _loads(data: str) -> Any:
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return data
