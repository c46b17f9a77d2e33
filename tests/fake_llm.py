"""A fake LLM provider: a real HTTP server on 127.0.0.1 that speaks the OpenAI Chat
Completions and the Anthropic Messages wire formats, replays scripted replies, records
every request, and rejects malformed requests the way the real services do.

    fake.script("gpt-x", ["Hello!", [Call("search", {"q": "tide"})], 429, Hang()])

A reply is text (`str` or `Text`), tool calls (`list[Call]` or `ToolCalls`), an error
status (`int` or `Error`, optionally raised mid-stream) or `Hang` (for cancellation).
Replies are rendered in whichever format the request used, streamed (SSE) or not.

In a test module: `from fake_llm import fake_llm_fixture  # noqa: F401`, then take a
`fake_llm` argument (or `with FakeLLM() as fake:` anywhere).

It runs on the stdlib `ThreadingHTTPServer` in a background thread, so tests on any
event loop can talk to it over a real socket; each request gets its own thread, which
is what lets it notice a client hanging up while it is "thinking".
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
import secrets
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, cast

import pytest

__all__ = [
    "Call",
    "Drop",
    "Error",
    "FakeLLM",
    "Gate",
    "Hang",
    "Recorded",
    "Text",
    "ToolCalls",
    "fake_llm_fixture",
]

Api = Literal["openai", "anthropic"]

# -- scripted replies ---------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    name: str
    # A `str` goes on the wire verbatim: that is how a test sends malformed JSON.
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Text:
    text: str
    finish: Literal["stop", "length", "content_filter"] = "stop"
    input_tokens: int = 12
    output_tokens: int = 5
    chunk_size: int = 4  # characters per streamed delta
    chunk_delay: float = 0.0  # seconds between streamed events
    delay: float = 0.0  # seconds before the response starts
    # Streamed first as `reasoning_content` deltas (OpenAI-compatible streams only), as
    # DeepSeek, vLLM and llama.cpp send a reasoning model's thinking.
    reasoning: str = ""
    report_usage: bool = True  # False: like servers that never send a usage chunk


@dataclass(frozen=True)
class ToolCalls:
    calls: list[Call]
    text: str = ""  # said before the calls
    fragments: int = 3  # argument pieces per call
    input_tokens: int = 20
    output_tokens: int = 9
    chunk_delay: float = 0.0
    delay: float = 0.0
    # Cut at the output limit: each call's argument JSON ends after this many
    # characters and the finish reason is "length" (OpenAI) / "max_tokens" (Anthropic).
    cut_at: int | None = None


@dataclass(frozen=True)
class Error:
    status: int
    message: str | None = None  # defaults to what the provider says for that status
    in_stream: bool = False  # a 200 stream that fails after `text_before`
    text_before: str = ""
    code: str | None = None  # OpenAI's error `code` (e.g. "context_length_exceeded")


@dataclass(frozen=True)
class Hang:
    """Stream `text_before`, then wait until the client disconnects (or the fake stops)."""

    text_before: str = ""
    before_headers: bool = False  # hang without even sending the status line


@dataclass(frozen=True)
class Drop:
    """Stream `text_before`, then close the connection mid-body (a crashed or restarted
    server, a proxy timing out): the client sees the chunked body end without its end."""

    text_before: str = ""


@dataclass(frozen=True)
class Gate:
    """Hold the request until the test sets `event` (at most `timeout` s), then answer
    `then`: a reply that must not arrive before something else has happened, without a
    sleep."""

    event: threading.Event
    then: Reply
    timeout: float = 60.0


Reply = str | int | list[Call] | Text | ToolCalls | Error | Hang | Drop | Gate


@dataclass
class _Plan:
    """A successful (200) reply, in neutral terms; each wire format renders it."""

    text: str = ""
    calls: list[Call] = field(default_factory=list)
    finish: str = "stop"  # stop | length | content_filter | tool_calls
    input_tokens: int = 12
    output_tokens: int = 5
    chunk_size: int = 4
    fragments: int = 3
    chunk_delay: float = 0.0
    delay: float = 0.0
    hang: bool = False
    drop: bool = False
    report_usage: bool = True
    stream_error: Error | None = None
    reasoning: str = ""


def _plan(reply: Reply) -> _Plan | Error:
    if isinstance(reply, str):
        reply = Text(reply)
    elif isinstance(reply, int):
        reply = Error(reply)
    elif isinstance(reply, list):
        reply = ToolCalls(reply)
    if isinstance(reply, Text):
        return _Plan(
            text=reply.text,
            finish=reply.finish,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            chunk_size=reply.chunk_size,
            chunk_delay=reply.chunk_delay,
            delay=reply.delay,
            reasoning=reply.reasoning,
            report_usage=reply.report_usage,
        )
    if isinstance(reply, ToolCalls):
        calls = reply.calls
        if reply.cut_at is not None:
            calls = [Call(c.name, _arguments(c)[: reply.cut_at], c.id) for c in calls]
        return _Plan(
            text=reply.text,
            calls=calls,
            finish="tool_calls" if reply.cut_at is None else "length",
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            fragments=reply.fragments,
            chunk_delay=reply.chunk_delay,
            delay=reply.delay,
        )
    if isinstance(reply, Hang):
        return _Plan(text=reply.text_before, hang=True, delay=-1.0 if reply.before_headers else 0)
    if isinstance(reply, Drop):
        return _Plan(text=reply.text_before, drop=True)
    if reply.in_stream:
        return _Plan(text=reply.text_before, stream_error=reply)
    return reply


# -- what the fake saw --------------------------------------------------------------------


@dataclass
class Recorded:
    api: Api | None  # None for an unknown path
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    raw: bytes
    peer: tuple[str, int] = ("", 0)  # the client's address: same port, same connection
    body: Any = None  # the decoded JSON, if it was JSON
    status: int = 0  # what the fake answered (0 until it answered)
    error: str | None = None  # the message of a rejection or scripted error
    disconnected: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


class _Gone(Exception):
    """The client hung up (or the fake is stopping): stop writing."""


# -- error bodies, in each provider's shape ------------------------------------------------

_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the resource."),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    503: ("api_error", "Service unavailable"),
    529: ("overloaded_error", "Overloaded"),
}


def openai_error(status: int, message: str | None = None, param: str | None = None) -> Any:
    default = ("server_error" if status >= 500 else "invalid_request_error", None, "Error.")
    kind, code, text = _OPENAI_ERRORS.get(status, default)
    return {"error": {"message": message or text, "type": kind, "param": param, "code": code}}


def anthropic_error(status: int, message: str | None = None) -> Any:
    default = ("api_error" if status >= 500 else "invalid_request_error", "Error.")
    kind, text = _ANTHROPIC_ERRORS.get(status, default)
    return {
        "type": "error",
        "error": {"type": kind, "message": message or text},
        "request_id": f"req_{secrets.token_hex(12)}",
    }


# -- request validation: what the real services refuse with 400 -------------------------

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_DATA_URL = re.compile(r"^data:(image/(?:png|jpeg|gif|webp));base64,(.+)$", re.DOTALL)
_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# `video_url` as vLLM's and OpenRouter's OpenAI-compatible servers read it (user messages).
_VIDEO_URL = re.compile(r"^data:(video/(?:mp4|webm|quicktime));base64,(.+)$", re.DOTALL)


def _is_base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return bool(data)


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def _check_openai_content(content: Any, where: str, *, images: bool) -> str | None:
    if isinstance(content, str):
        return None
    if not isinstance(content, list) or not content:
        return f"Invalid type for '{where}': expected a string or an array, but got {_type_name(content)} instead."
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        if kind == "image_url" and images:
            url = (
                part.get("image_url", {}).get("url")
                if isinstance(part.get("image_url"), dict)
                else None
            )
            if not isinstance(url, str):
                return f"Missing required parameter: '{where}[{j}].image_url.url'."
            match = _DATA_URL.match(url)
            if url.startswith(("http://", "https://")) or (match and _is_base64(match[2])):
                continue
            return f"Invalid image URL: '{where}[{j}].image_url.url'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,...'), or a URL."
        if kind == "video_url" and images:
            video = part.get("video_url")
            found = _VIDEO_URL.match(video.get("url", "")) if isinstance(video, dict) else None
            if found and _is_base64(found[2]):
                continue
            return f"Invalid video URL: '{where}[{j}].video_url.url'."
        return f"Invalid value: '{kind}'. Supported values are: 'text' and 'image_url'. ({where}[{j}].type)"
    return None


def _check_openai_tools(tools: Any) -> str | None:
    if not isinstance(tools, list):
        return f"Invalid type for 'tools': expected an array, but got {_type_name(tools)} instead."
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            return f"Missing required parameter: 'tools[{i}].function'."
        if not isinstance(fn.get("name"), str) or not _TOOL_NAME.match(fn["name"]):
            return f"Invalid 'tools[{i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            return f"Invalid type for 'tools[{i}].function.parameters': expected an object."
    return None


def _check_openai_assistant(m: dict[str, Any], i: int) -> tuple[str | None, set[str]]:
    calls = m.get("tool_calls")
    content = m.get("content")
    if calls is None:
        if content is None:
            return f"Invalid value for 'messages[{i}].content': expected a string, got null.", set()
        return _check_openai_content(content, f"messages[{i}].content", images=False), set()
    if not isinstance(calls, list) or not calls:
        return (
            f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum length 1.",
            set(),
        )
    if content is not None:
        error = _check_openai_content(content, f"messages[{i}].content", images=False)
        if error:
            return error, set()
    ids: set[str] = set()
    for j, call in enumerate(calls):
        where = f"messages[{i}].tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str):
            return f"Missing required parameter: '{where}.id'.", set()
        if call.get("type") != "function" or not isinstance(fn, dict):
            return f"Missing required parameter: '{where}.function'.", set()
        if not isinstance(fn.get("name"), str):
            return f"Missing required parameter: '{where}.function.name'.", set()
        if not isinstance(fn.get("arguments"), str):
            got = _type_name(fn.get("arguments"))
            return (
                f"Invalid type for '{where}.function.arguments': expected a string, but got {got} instead.",
                set(),
            )
        ids.add(call["id"])
    return None, ids


def check_openai(body: Any) -> str | None:
    """The first reason OpenAI would answer 400 to this body, or None."""
    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if messages is None:
        return "Missing required parameter: 'messages'."
    if not isinstance(messages, list):
        return f"Invalid type for 'messages': expected an array, but got {_type_name(messages)} instead."
    if not messages:
        return "[] is too short - 'messages'"
    if "stream_options" in body and body.get("stream") is not True:
        return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if name in body and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            return f"Invalid '{name}': integer below minimum value. Expected a value >= 1."
    if "max_tokens" in body and "max_completion_tokens" in body:
        return "max_tokens and max_completion_tokens cannot both be set"
    temperature = body.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or not 0 <= temperature <= 2
    ):
        return "Invalid 'temperature': decimal above maximum value. Expected a value <= 2."
    if "tools" in body and (error := _check_openai_tools(body["tools"])):
        return error
    pending: set[str] | None = None  # calls of the last assistant message awaiting results
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
        assert isinstance(m, dict)
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                return f"Missing required parameter: 'messages[{i}].tool_call_id'."
            if pending is None or call_id not in pending:
                return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
            pending.discard(call_id)
            error = _check_openai_content(m.get("content"), f"messages[{i}].content", images=False)
            if error:
                return error
            continue
        if pending:
            missing = ", ".join(sorted(pending))
            return f"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {missing}"
        pending = None
        if role == "assistant":
            error, ids = _check_openai_assistant(m, i)
            pending = ids or None
        else:
            where = f"messages[{i}].content"
            error = _check_openai_content(m.get("content"), where, images=role == "user")
        if error:
            return error
    if pending:
        missing = ", ".join(sorted(pending))
        return f"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {missing}"
    return None


def _check_anthropic_block(
    block: Any, where: str, role: str, previous_uses: set[str]
) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            return f"{where}.text: Field required"
        if not text:
            return f"{where}.text: text content blocks must be non-empty"
        if not text.strip():
            return f"{where}.text: text content blocks must contain non-whitespace text"
        return None
    if kind == "image":
        source = block.get("source")
        if not isinstance(source, dict) or source.get("type") != "base64":
            return f"{where}.image.source: Input tag found using 'type' does not match any of the expected tags: 'base64', 'url'"
        if source.get("media_type") not in _MEDIA_TYPES:
            return f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
        if not isinstance(source.get("data"), str) or not _is_base64(source["data"]):
            return f"{where}.image.source.base64.data: The image data is not valid base64"
        return None
    if kind == "tool_use":
        if role != "assistant":
            return f"{where}: `tool_use` blocks can only be in `assistant` messages"
        if not isinstance(block.get("id"), str) or not _TOOL_USE_ID.match(block["id"]):
            return f"{where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if not isinstance(block.get("name"), str):
            return f"{where}.tool_use.name: Field required"
        if not isinstance(block.get("input"), dict):
            return f"{where}.tool_use.input: Input should be a valid dictionary"
        return None
    if kind == "tool_result":
        if role != "user":
            return f"{where}: `tool_result` blocks can only be in `user` messages"
        use_id = block.get("tool_use_id")
        if not isinstance(use_id, str):
            return f"{where}.tool_result.tool_use_id: Field required"
        if use_id not in previous_uses:
            return f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {use_id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
        content = block.get("content", "")
        if not isinstance(content, str | list):
            return f"{where}.tool_result.content: Input should be a valid string or list"
        if "is_error" in block and not isinstance(block["is_error"], bool):
            return f"{where}.tool_result.is_error: Input should be a valid boolean"
        return None
    return f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags: 'text', 'image', 'tool_use', 'tool_result', 'document', 'thinking'"


def _check_anthropic_tools(tools: Any) -> str | None:
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return f"tools.{i}.name: Field required"
        if not _TOOL_NAME.match(tool["name"]):
            return f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            return f"tools.{i}.custom.input_schema: Field required"
        if schema.get("type") != "object":
            return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
    return None


def check_anthropic(body: Any, headers: dict[str, str]) -> str | None:
    """The first reason Anthropic would answer 400 to this request, or None."""
    if "anthropic-version" not in headers:
        return "anthropic-version: header is required"
    if not isinstance(body, dict):
        return "There was an issue with your request body: it is not valid JSON"
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    if not isinstance(body["model"], str):
        return "model: Input should be a valid string"
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    temperature = body.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or not 0 <= temperature <= 1
    ):
        return "temperature: Input should be less than or equal to 1"
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        return "system: Input should be a valid string or list"
    if "tools" in body and (error := _check_anthropic_tools(body["tools"])):
        return error
    messages = body["messages"]
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    previous_role = ""
    previous_uses: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "system":
            return 'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, not "system" as an input message role.'
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        assert isinstance(m, dict)
        if role == previous_role:
            return f'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row'
        content = m.get("content")
        last = i == len(messages) - 1
        if content in ("", []) and not (last and role == "assistant"):
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        if isinstance(content, str):
            blocks: Any = [{"type": "text", "text": content}] if content else []
        else:
            blocks = content
        if not isinstance(blocks, list):
            return f"messages.{i}.content: Input should be a valid list"
        results: set[str] = set()
        uses: set[str] = set()
        for j, block in enumerate(blocks):
            where = f"messages.{i}.content.{j}"
            error = _check_anthropic_block(block, where, role, previous_uses)
            if error:
                return error
            if block["type"] == "tool_result":
                results.add(block["tool_use_id"])
            elif block["type"] == "tool_use":
                uses.add(block["id"])
        if previous_uses and previous_uses - results:
            missing = ", ".join(sorted(previous_uses - results))
            return f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        previous_role, previous_uses = role, uses
    return None


# -- rendering replies --------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _fragments(text: str, count: int) -> list[str]:
    """Split at arbitrary points (mid-key, mid-escape) as real streams do."""
    if not text:
        return []
    step = max(1, -(-len(text) // max(1, count)))
    return [text[i : i + step] for i in range(0, len(text), step)]


def _arguments(call: Call) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _anthropic_input(call: Call) -> Any:
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        return json.loads(call.arguments)
    except ValueError:
        return {}


_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
    "tool_calls": "tool_use",
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeLLM


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, like the real thing
    record: Recorded

    @property
    def fake(self) -> FakeLLM:
        return cast(_Server, self.server).fake

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError):  # a client that hangs up between requests
            super().handle()

    def setup(self) -> None:
        super().setup()
        self.fake._connections.add(self.connection)

    def finish(self) -> None:
        self.fake._connections.discard(self.connection)
        with contextlib.suppress(OSError):  # the client went away first
            super().finish()

    # -- plumbing ----------------------------------------------------------------------

    def _gone(self, wait: float = 0.0) -> bool:
        """True when the client closed its side: the socket reads as EOF."""
        if self.fake._stopping.is_set():
            return True
        try:
            # poll, not select: select fails on descriptors above 1024
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(int(wait * 1000)):
                return False
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def _pause(self, seconds: float | None) -> None:
        """Wait (forever if None) while watching for the client hanging up."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while deadline is None or time.monotonic() < deadline:
            if self._gone(0.02):
                raise _Gone
        if self._gone():
            raise _Gone

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.record.status = status

    def _reject(self, status: int, message: str | None = None, code: str | None = None) -> None:
        self.record.error = message
        extra = {"retry-after": "1"} if status == 429 else {}
        if self.record.api == "anthropic":
            extra["request-id"] = f"req_{secrets.token_hex(12)}"
            self._send_json(status, anthropic_error(status, message), extra)
        else:
            extra["x-request-id"] = f"req_{secrets.token_hex(16)}"
            payload = openai_error(status, message)
            if code is not None:
                payload["error"]["code"] = code
            self._send_json(status, payload, extra)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.record.status = 200

    def _event(self, data: Any, event: str | None = None, delay: float = 0.0) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {event}\n" if event else "") + f"data: {text}\n\n"
        self._chunk(frame.encode())
        if delay:
            self._pause(delay)

    def _chunk(self, payload: bytes) -> None:
        if self._gone():
            raise _Gone
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        except OSError:
            raise _Gone from None

    def _drop(self) -> None:
        """Hang up in the middle of the body (no final chunk, no end of stream)."""
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _end_stream(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            raise _Gone from None

    # -- requests ----------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        api: Api = "anthropic" if "anthropic-version" in headers else "openai"
        self.record = Recorded(api=api, method="GET", path=path, headers=headers, raw=b"")
        self.fake._record(self.record)
        try:
            if path not in ("/v1/models", "/models"):
                self._reject(404, f"Invalid URL (GET {path})")
            elif (error := self._auth_error()) is not None:
                self._reject(401, error)
            elif api == "anthropic":
                data = [{"type": "model", "id": m, "display_name": m} for m in self.fake.models]
                self._send_json(200, {"data": data, "has_more": False})
            else:
                data = [
                    {
                        "id": m,
                        "object": "model",
                        "owned_by": "fake",
                        **self.fake.listed.get(m, {}),
                        **self.fake.model_info.get(m, {}),
                    }
                    for m in self.fake.models
                ]
                self._send_json(200, {"object": "list", "data": data})
        finally:
            self.record.done.set()

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        raw = self.rfile.read(int(headers.get("content-length", "0")))
        api: Api | None = None
        if path in ("/v1/chat/completions", "/chat/completions"):
            api = "openai"
        elif path == "/v1/messages":
            api = "anthropic"
        self.record = Recorded(
            api=api, method="POST", path=path, headers=headers, raw=raw, peer=self.client_address
        )
        try:
            self.record.body = json.loads(raw)
        except ValueError:
            self.record.body = None
        self.fake._record(self.record)
        try:
            self._answer()
        except (_Gone, OSError):
            if not self.fake._stopping.is_set():
                self.record.disconnected.set()
            self.close_connection = True
        finally:
            self.record.done.set()

    def _answer(self) -> None:
        rec = self.record
        if rec.api is None:
            return self._reject(404, f"Invalid URL (POST {rec.path})")
        if (error := self._auth_error()) is not None:
            return self._reject(401, error)
        if rec.api == "openai":
            error = check_openai(rec.body)
        else:
            error = check_anthropic(rec.body, rec.headers)
        if error is not None:
            return self._reject(400, error)
        model = rec.body["model"]
        reply = self.fake._next_reply(model)
        if reply is None:
            return self._reject(404, f"fake_llm: no scripted reply (left) for model {model!r}")
        plan = _plan(reply)
        if isinstance(plan, Error):
            return self._reject(plan.status, plan.message, plan.code)
        if plan.delay:
            self._pause(None if plan.delay < 0 else plan.delay)
        streaming = rec.body.get("stream") is True
        if rec.api == "openai" and streaming:
            usage = bool((rec.body.get("stream_options") or {}).get("include_usage"))
            self._openai_stream(model, plan, usage)
        elif rec.api == "openai":
            self._openai_json(model, plan)
        elif streaming:
            self._anthropic_stream(model, plan)
        else:
            self._anthropic_json(model, plan)
        return None

    def _auth_error(self) -> str | None:
        expected = self.fake.api_key
        if expected is None:
            return None  # a local server: no key needed
        if self.record.api == "anthropic":
            given = self.record.headers.get("x-api-key")
            if given is None:
                return "x-api-key header is required"
        else:
            auth = self.record.headers.get("authorization", "")
            if not auth.startswith("Bearer "):
                return "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            given = auth.removeprefix("Bearer ")
        if given == expected:
            return None
        # Real services mask the key; `echo_key` is the worst case some servers are.
        shown = given if self.fake.echo_key else f"{given[:3]}***{given[-2:]}"
        return f"Incorrect API key provided: {shown}."

    # -- OpenAI -----------------------------------------------------------------------

    def _openai_stream(self, model: str, plan: _Plan, include_usage: bool) -> None:
        cid = f"chatcmpl-{secrets.token_hex(12)}"
        created = int(time.time())
        delay = plan.chunk_delay

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                out["usage"] = None
            return out

        self._start_sse()
        self._event(chunk({"role": "assistant", "content": ""}), delay=delay)
        for piece in _pieces(plan.reasoning, plan.chunk_size):
            self._event(chunk({"reasoning_content": piece}), delay=delay)
        for piece in _pieces(plan.text, plan.chunk_size):
            self._event(chunk({"content": piece}), delay=delay)
        if plan.hang:
            self._pause(None)
        if plan.drop:
            return self._drop()
        if plan.stream_error is not None:
            err = plan.stream_error
            payload = openai_error(err.status, err.message)
            payload["error"]["code"] = err.status  # OpenRouter's mid-stream shape
            self.record.error = payload["error"]["message"]
            self._event(payload)
            return self._end_stream()
        for index, call in enumerate(plan.calls):
            head = {
                "index": index,
                "id": call.id or f"call_{secrets.token_hex(12)}",
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            self._event(chunk({"tool_calls": [head]}), delay=delay)
            for fragment in _fragments(_arguments(call), plan.fragments):
                part = {"index": index, "function": {"arguments": fragment}}
                self._event(chunk({"tool_calls": [part]}), delay=delay)
        self._event(chunk({}, plan.finish), delay=delay)
        if include_usage and plan.report_usage:
            last = chunk({})
            last["choices"] = []
            last["usage"] = {
                "prompt_tokens": plan.input_tokens,
                "completion_tokens": plan.output_tokens,
                "total_tokens": plan.input_tokens + plan.output_tokens,
            }
            self._event(last)
        self._event("[DONE]")
        return self._end_stream()

    def _openai_json(self, model: str, plan: _Plan) -> None:
        if plan.hang:
            self._pause(None)
        if plan.stream_error is not None:
            return self._reject(plan.stream_error.status, plan.stream_error.message)
        message: dict[str, Any] = {"role": "assistant", "content": plan.text or None}
        if plan.calls:
            message["tool_calls"] = [
                {
                    "id": c.id or f"call_{secrets.token_hex(12)}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments(c)},
                }
                for c in plan.calls
            ]
        self._send_json(
            200,
            {
                "id": f"chatcmpl-{secrets.token_hex(12)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": plan.finish}],
                "usage": {
                    "prompt_tokens": plan.input_tokens,
                    "completion_tokens": plan.output_tokens,
                    "total_tokens": plan.input_tokens + plan.output_tokens,
                },
            },
        )
        return None

    # -- Anthropic ----------------------------------------------------------------------

    def _anthropic_stream(self, model: str, plan: _Plan) -> None:
        delay = plan.chunk_delay

        def send(kind: str, payload: dict[str, Any]) -> None:
            self._event({"type": kind, **payload}, event=kind, delay=delay)

        self._start_sse()
        send(
            "message_start",
            {
                "message": {
                    "id": f"msg_{secrets.token_hex(12)}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": plan.input_tokens, "output_tokens": 1},
                }
            },
        )
        send("ping", {})
        index = 0
        if plan.text:
            send("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            for piece in _pieces(plan.text, plan.chunk_size):
                delta = {"type": "text_delta", "text": piece}
                send("content_block_delta", {"index": 0, "delta": delta})
        if plan.hang:
            self._pause(None)
        if plan.drop:
            return self._drop()
        if plan.stream_error is not None:
            payload = anthropic_error(plan.stream_error.status, plan.stream_error.message)
            payload.pop("request_id")
            self.record.error = payload["error"]["message"]
            self._event(payload, event="error")
            return self._end_stream()
        if plan.text:
            send("content_block_stop", {"index": 0})
            index = 1
        for offset, call in enumerate(plan.calls):
            block = {
                "type": "tool_use",
                "id": call.id or f"toolu_{secrets.token_hex(12)}",
                "name": call.name,
                "input": {},
            }
            send("content_block_start", {"index": index + offset, "content_block": block})
            # The real stream opens with an empty fragment; clients must cope.
            for fragment in ["", *_fragments(_arguments(call), plan.fragments)]:
                delta = {"type": "input_json_delta", "partial_json": fragment}
                send("content_block_delta", {"index": index + offset, "delta": delta})
            send("content_block_stop", {"index": index + offset})
        send(
            "message_delta",
            {
                "delta": {"stop_reason": _ANTHROPIC_STOP[plan.finish], "stop_sequence": None},
                "usage": {"output_tokens": plan.output_tokens},
            },
        )
        send("message_stop", {})
        return self._end_stream()

    def _anthropic_json(self, model: str, plan: _Plan) -> None:
        if plan.hang:
            self._pause(None)
        if plan.stream_error is not None:
            return self._reject(plan.stream_error.status, plan.stream_error.message)
        content: list[dict[str, Any]] = [{"type": "text", "text": plan.text}] if plan.text else []
        content.extend(
            {
                "type": "tool_use",
                "id": c.id or f"toolu_{secrets.token_hex(12)}",
                "name": c.name,
                "input": _anthropic_input(c),
            }
            for c in plan.calls
        )
        self._send_json(
            200,
            {
                "id": f"msg_{secrets.token_hex(12)}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": _ANTHROPIC_STOP[plan.finish],
                "stop_sequence": None,
                "usage": {"input_tokens": plan.input_tokens, "output_tokens": plan.output_tokens},
            },
        )
        return None


# -- the fake -----------------------------------------------------------------------------


class FakeLLM:
    """Start with `with FakeLLM() as fake:` or use the `fake_llm` fixture."""

    def __init__(self, *, api_key: str | None = None, echo_key: bool = False) -> None:
        self.api_key = api_key  # None: accept any request, like a local server
        self.echo_key = echo_key  # put the rejected key in full into the 401 message
        self.requests: list[Recorded] = []
        # Models `GET /v1/models` lists besides the scripted ones, with extra fields of
        # their entry (e.g. {"context_length": 8192}), as real servers add them.
        self.listed: dict[str, dict[str, Any]] = {}
        # Extra fields of a model's entry in GET /v1/models, as OpenRouter, vLLM or
        # llama.cpp report them (context_length, top_provider, meta...).
        self.model_info: dict[str, dict[str, Any]] = {}
        self._scripts: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url_openai(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def base_url_anthropic(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def models(self) -> list[str]:
        """What `GET /v1/models` lists: the scripted models and those in `listed`."""
        with self._lock:
            return sorted({*self._scripts, *self.listed})

    def script(self, model: str, replies: list[Reply]) -> None:
        """Queue replies for `model`, one per request, in order (appends to earlier ones)."""
        with self._lock:
            self._scripts.setdefault(model, deque()).extend(replies)

    def remaining(self, model: str) -> int:
        with self._lock:
            return len(self._scripts.get(model, ()))

    def bodies(self, api: Api | None = None) -> list[Any]:
        """The decoded bodies of POSTed requests, optionally of one wire format."""
        return [r.body for r in list(self.requests) if r.method == "POST" and api in (None, r.api)]

    async def wait_disconnected(self, request: Recorded, seconds: float = 5.0) -> bool:
        """Whether the client hung up on `request` (waiting up to `seconds`)."""
        return await asyncio.to_thread(request.disconnected.wait, seconds)

    def start(self) -> FakeLLM:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self.port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for conn in list(self._connections):  # wake handlers blocked on keep-alive reads
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_reply(self, model: str) -> Reply | None:
        with self._lock:
            queue = self._scripts.get(model)
            reply = queue.popleft() if queue else None
        if isinstance(reply, Gate):  # waited for outside the lock: other models go on
            if not reply.event.wait(reply.timeout):
                raise AssertionError("a Gate reply was never opened by the test")
            return reply.then
        return reply


# Imported under its own name (`from fake_llm import fake_llm_fixture`), tests can take a
# `fake_llm` argument without the linter seeing a redefinition.
@pytest.fixture(name="fake_llm")
def fake_llm_fixture() -> Iterator[FakeLLM]:
    """A started fake provider, stopped after the test."""
    with FakeLLM() as fake:
        yield fake
