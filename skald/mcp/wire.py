"""The MCP wire types: JSON-RPC 2.0 envelopes and the MCP messages Skald speaks.

Rule: every message that crosses a transport is decoded into one of these structs (or
fails as a protocol error); nothing downstream reads raw dicts except where the
protocol itself carries free-form JSON (tool arguments, JSON Schemas, log data,
`_meta`).

Trap: MCP spells fields in camelCase and many are optional; the structs use
`rename="camel"` and `omit_defaults=True` so an absent field stays absent on the wire
(some servers reject `null` where the schema says "optional"). Unknown fields are
ignored (msgspec's default), so a newer server's additions do not break us, but an
unknown content block type does (the model would see nothing sensible otherwise).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

# Newest first; the first is what we offer, any of them is accepted in the answer.
# These are the revisions the conformance suite (@modelcontextprotocol/conformance)
# covers, plus the two before them that servers in the wild still answer with.
PROTOCOL_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS[0]

RequestId = int | str

# JSON-RPC 2.0 error codes (the spec's, plus MCP's own).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
URL_ELICITATION_REQUIRED = -32042


class _Wire(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base of the MCP payload structs (camelCase names, absent stays absent)."""


# -- JSON-RPC envelopes ------------------------------------------------------------------


class RpcError(msgspec.Struct, kw_only=True):
    code: int
    message: str
    data: Any = UNSET


class RpcMessage(msgspec.Struct, kw_only=True):
    """Any JSON-RPC message; which kind it is follows from the fields present:
    request (`id` + `method`), notification (`method`, no `id`), response (`id` +
    `result` or `error`). UNSET fields are left out on the wire; `jsonrpc` is always
    written (no `omit_defaults` here: servers drop a message without it)."""

    jsonrpc: str = "2.0"
    id: RequestId | UnsetType = UNSET
    method: str | UnsetType = UNSET
    params: dict[str, Any] | UnsetType = UNSET
    result: dict[str, Any] | UnsetType = UNSET
    error: RpcError | UnsetType = UNSET

    @property
    def is_request(self) -> bool:
        return self.method is not UNSET and self.id is not UNSET

    @property
    def is_notification(self) -> bool:
        return self.method is not UNSET and self.id is UNSET

    @property
    def is_response(self) -> bool:
        return self.method is UNSET and self.id is not UNSET


# -- initialize ----------------------------------------------------------------------------


class Implementation(_Wire):
    name: str
    version: str = ""
    title: str | UnsetType = UNSET


class ClientCapabilities(_Wire):
    roots: dict[str, Any] | UnsetType = UNSET
    sampling: dict[str, Any] | UnsetType = UNSET
    elicitation: dict[str, Any] | UnsetType = UNSET
    experimental: dict[str, Any] | UnsetType = UNSET


class ServerCapabilities(_Wire):
    tools: dict[str, Any] | UnsetType = UNSET
    resources: dict[str, Any] | UnsetType = UNSET
    prompts: dict[str, Any] | UnsetType = UNSET
    logging: dict[str, Any] | UnsetType = UNSET
    completions: dict[str, Any] | UnsetType = UNSET
    experimental: dict[str, Any] | UnsetType = UNSET


class InitializeParams(_Wire):
    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation


class InitializeResult(_Wire):
    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | UnsetType = UNSET


# -- content -------------------------------------------------------------------------------


class TextContent(_Wire, tag_field="type", tag="text"):
    text: str


class ImageContent(_Wire, tag_field="type", tag="image"):
    data: str  # base64
    mime_type: str


class AudioContent(_Wire, tag_field="type", tag="audio"):
    data: str  # base64
    mime_type: str


class _ResourceMeta(_Wire):
    """What a resource, a link to one and a resource template say about themselves.
    (A subclass adds its required fields with `kw_only=True`: they follow these.)"""

    name: str = ""
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET


class ResourceLink(_ResourceMeta, tag_field="type", tag="resource_link", kw_only=True):
    uri: str


class ResourceContents(_Wire):
    """The contents of a resource: `text` or `blob` (base64), never both."""

    uri: str
    mime_type: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET


class EmbeddedResource(_Wire, tag_field="type", tag="resource"):
    resource: ResourceContents


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


# -- tools ---------------------------------------------------------------------------------


class ToolAnnotations(_Wire):
    title: str | UnsetType = UNSET
    read_only_hint: bool | UnsetType = UNSET
    destructive_hint: bool | UnsetType = UNSET
    idempotent_hint: bool | UnsetType = UNSET
    open_world_hint: bool | UnsetType = UNSET


class Tool(_Wire):
    name: str
    title: str | UnsetType = UNSET
    description: str = ""
    # Free-form JSON Schema; `skald.mcp.tools.tool_spec` validates it before use.
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    output_schema: dict[str, Any] | UnsetType = UNSET
    annotations: ToolAnnotations | UnsetType = UNSET


class ListToolsResult(_Wire):
    tools: list[Tool]
    next_cursor: str | UnsetType = UNSET


class CallToolResult(_Wire):
    content: list[ContentBlock] = msgspec.field(default_factory=list)
    structured_content: dict[str, Any] | UnsetType = UNSET
    is_error: bool = False

    def text(self) -> str:
        """The result as text for a model: text blocks as they are, the others named."""
        parts: list[str] = []
        for block in self.content:
            if isinstance(block, TextContent):
                parts.append(block.text)
            elif isinstance(block, ImageContent | AudioContent):
                kind = "image" if isinstance(block, ImageContent) else "audio"
                parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
            elif isinstance(block, ResourceLink):
                parts.append(f"[resource {block.uri}]")
            else:
                res = block.resource
                parts.append(res.text if isinstance(res.text, str) else f"[resource {res.uri}]")
        if not parts and self.structured_content is not UNSET:
            parts.append(msgspec.json.encode(self.structured_content).decode())
        return "\n".join(parts)


# -- resources and prompts -----------------------------------------------------------------


class Resource(_ResourceMeta, kw_only=True):
    uri: str
    size: int | UnsetType = UNSET


class ListResourcesResult(_Wire):
    resources: list[Resource]
    next_cursor: str | UnsetType = UNSET


class ResourceTemplate(_ResourceMeta, kw_only=True):
    uri_template: str


class ListResourceTemplatesResult(_Wire):
    resource_templates: list[ResourceTemplate]
    next_cursor: str | UnsetType = UNSET


class ReadResourceResult(_Wire):
    contents: list[ResourceContents]


class ResourceUpdatedParams(_Wire):
    uri: str


class PromptArgument(_Wire):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    required: bool = False


class Prompt(_Wire):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    arguments: list[PromptArgument] = msgspec.field(default_factory=list)


class ListPromptsResult(_Wire):
    prompts: list[Prompt]
    next_cursor: str | UnsetType = UNSET


class PromptMessage(_Wire):
    role: Literal["user", "assistant"]
    content: ContentBlock


class GetPromptResult(_Wire):
    messages: list[PromptMessage]
    description: str | UnsetType = UNSET


# -- notifications ---------------------------------------------------------------------------


class ProgressParams(_Wire):
    progress_token: RequestId
    progress: float
    total: float | UnsetType = UNSET
    message: str | UnsetType = UNSET


class CancelledParams(_Wire):
    request_id: RequestId
    reason: str | UnsetType = UNSET


LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class LoggingMessageParams(_Wire):
    level: LogLevel
    data: Any = None
    logger: str | UnsetType = UNSET


class ElicitationCompleteParams(_Wire):
    elicitation_id: str


# -- server-to-client requests -----------------------------------------------------------


class ElicitRequestParams(_Wire):
    """`elicitation/create`: a form (a flat JSON Schema of primitive fields) or, in URL
    mode, a page the user must open themselves (sign-in, payment)."""

    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: dict[str, Any] | UnsetType = UNSET
    url: str | UnsetType = UNSET
    elicitation_id: str | UnsetType = UNSET


class ElicitResult(_Wire):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str]] | UnsetType = UNSET


class Root(_Wire):
    uri: str  # file:// URIs only, per the spec
    name: str | UnsetType = UNSET


class ListRootsResult(_Wire):
    roots: list[Root]


def encode(message: RpcMessage) -> bytes:
    return msgspec.json.encode(message)


def to_builtins(value: msgspec.Struct) -> dict[str, Any]:
    """A payload struct as the plain dict that goes into `params`/`result`."""
    out = msgspec.to_builtins(value)
    assert isinstance(out, dict)
    return out
