"""Turning an MCP tool into a tool a model can be offered (`skald.llm.types.ToolSpec`).

Rule: a server's tool description is untrusted input that ends up in every prompt; it is
checked before use. The input schema must be a JSON object schema (`"type": "object"`,
`properties` an object, `required` a list of names) of bounded size and depth, the
description bounded too; anything else raises `SchemaError` naming the connector and
the tool, and that tool is not offered (the others still are).

The model-facing name is `mcp__<server>__<tool>`, within the providers' common limit
(`^[a-zA-Z0-9_-]{1,64}$`): characters outside it become `_`; a name that is still too
long is refused rather than cut (two cut names could collide and call the wrong tool).

Trap: the model's arguments still have to be validated against the schema at call time
(the agent loop does that with `skald.agent.schema`); a valid schema is not valid input.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from skald.llm.types import ToolSpec
from skald.mcp.errors import SchemaError
from skald.mcp.wire import Tool

MAX_SCHEMA_BYTES = 32 * 1024
MAX_SCHEMA_DEPTH = 12
MAX_DESCRIPTION_CHARS = 4000
MAX_TOOL_NAME = 64
PREFIX = "mcp__"
SEPARATOR = "__"

_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def model_tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, or `SchemaError` when it cannot fit the providers' rule."""
    name = f"{PREFIX}{_BAD.sub('_', server)}{SEPARATOR}{_BAD.sub('_', tool)}"
    if not tool or len(name) > MAX_TOOL_NAME:
        raise SchemaError(
            server, tool[:80], f"the name {name[:80]!r} is longer than {MAX_TOOL_NAME} characters"
        )
    return name


def check_tool(server: str, tool: Tool) -> None:
    """Raise `SchemaError` when the tool cannot be offered to a model."""
    schema = tool.input_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise SchemaError(
            server, tool.name, 'the input schema is not a JSON object schema ("type": "object")'
        )
    size = len(msgspec.json.encode(schema))
    if size > MAX_SCHEMA_BYTES:
        raise SchemaError(
            server,
            tool.name,
            f"the input schema is {size} bytes, over the limit of {MAX_SCHEMA_BYTES}",
        )
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise SchemaError(
            server, tool.name, f"the input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
        )
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, dict | bool) for v in props.values()):
        raise SchemaError(server, tool.name, '"properties" must map each argument to a schema')
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError(server, tool.name, '"required" must be a list of argument names')
    description = tool.description or ""
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SchemaError(
            server,
            tool.name,
            f"the description is {len(description)} characters, over the limit of {MAX_DESCRIPTION_CHARS}",
        )


def tool_spec(server: str, tool: Tool) -> ToolSpec:
    """The model-facing description of one MCP tool (checked; `SchemaError` if not)."""
    name = model_tool_name(server, tool.name)
    check_tool(server, tool)
    description = (
        tool.description or (tool.title if isinstance(tool.title, str) else "") or tool.name
    )
    parameters: dict[str, Any] = dict(tool.input_schema)
    parameters.setdefault("properties", {})
    return ToolSpec(name=name, description=description, parameters=parameters)


def tool_specs(server: str, tools: list[Tool]) -> tuple[list[ToolSpec], list[SchemaError]]:
    """Every tool that can be offered, and why each other one cannot (for the admins);
    a duplicate model-facing name is refused for all but the first."""
    specs: list[ToolSpec] = []
    refused: list[SchemaError] = []
    seen: set[str] = set()
    for tool in tools:
        try:
            spec = tool_spec(server, tool)
        except SchemaError as exc:
            refused.append(exc)
            continue
        if spec.name in seen:
            refused.append(
                SchemaError(server, tool.name, f"another tool is also named {spec.name!r}")
            )
            continue
        seen.add(spec.name)
        specs.append(spec)
    return specs, refused


def _depth(value: object, level: int = 0) -> int:
    if level > MAX_SCHEMA_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level
