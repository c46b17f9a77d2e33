"""Provider-neutral message and streaming types.

The agent loop and the chat history speak these; each provider client translates them
to and from its own wire format (OpenAI chat completions, Anthropic Messages).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class TextPart(msgspec.Struct, tag="text", frozen=True):
    text: str


class ImagePart(msgspec.Struct, tag="image", frozen=True, kw_only=True):
    """An image for vision models, inlined as base64."""

    media_type: str  # image/png, image/jpeg, image/webp, image/gif
    data_b64: str


class VideoPart(msgspec.Struct, tag="video", frozen=True, kw_only=True):
    """A video for models marked `video`, inlined as base64 (skald/core/uploads.py)."""

    media_type: str  # video/mp4, video/webm, video/quicktime
    data_b64: str


ContentPart = TextPart | ImagePart | VideoPart


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    arguments: dict[str, Any]


class Interruption(msgspec.Struct, frozen=True, kw_only=True):
    """Why an assistant answer ended early; kept with the partial text it stopped."""

    code: str  # "stopped" (by the member), or the error's code (see skald.llm.errors)
    detail: str  # the technical text: for the model, the log and administrators


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a conversation as models see it.

    - system: `content` only (clients move it where their API wants it).
    - user: `content` (text and images).
    - assistant: `content` (text) and/or `tool_calls`.
    - tool: the result of one call: `tool_call_id`, `content` (text), `is_error`.
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: list[ContentPart] = msgspec.field(default_factory=list)
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False
    # An assistant answer cut short by a stop or a failure (its text is what was shown).
    interrupted: Interruption | None = None

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # ^[a-zA-Z0-9_-]{1,64}$
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments object


def tool_spec(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> ToolSpec:
    """A tool whose arguments are one object of `properties` and nothing else: the shape
    of every built-in tool. The keys keep their order (type, properties, required,
    additionalProperties): the schema is part of the prompt providers cache."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    parameters["additionalProperties"] = False
    return ToolSpec(name=name, description=description, parameters=parameters)


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    estimated: bool = False  # a count is Skald's estimate, not the server's report


# -- streaming events a client yields, in order ---------------------------------------


class TextDelta(msgspec.Struct, tag="text_delta", frozen=True):
    text: str


class ToolCallReady(msgspec.Struct, tag="tool_call", frozen=True):
    """A complete tool call (clients assemble the streamed argument fragments)."""

    call: ToolCall


class Finished(msgspec.Struct, tag="finished", frozen=True, kw_only=True):
    """Always the last event: why the model stopped, and what it cost."""

    reason: Literal["stop", "tool_calls", "length", "content_filter", "other"]
    usage: Usage


class ReasoningDelta(msgspec.Struct, tag="reasoning_delta", frozen=True):
    """A piece of the reasoning a model streams before its answer (`reasoning_content`
    or `reasoning` on OpenAI-compatible servers). Shown to the member, never stored
    nor sent back to a model."""

    text: str


class Restart(msgspec.Struct, tag="restart", frozen=True, kw_only=True):
    """The answer so far is void: the model source switched to another model after a
    failure mid-stream (before any tool call); a new answer follows from the start.
    Provider clients never send it; a model source with fallback does."""

    reason: str  # the failure, technical
    model: str  # the household's name of the model that continues
    usage: Usage  # what the void part cost (estimated)


StreamEvent = TextDelta | ReasoningDelta | ToolCallReady | Finished | Restart


class Request(msgspec.Struct, frozen=True, kw_only=True):
    model: str  # the provider's own model id, as it goes on the wire
    messages: list[Message]
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None
