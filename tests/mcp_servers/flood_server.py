"""An MCP server (official Python SDK, stdio) that lists as much as it is told to: for
the limits on what a connector can make the server keep (issue 20, item 5).

Environment:
- FLOOD_TOOLS: how many tools it lists (default 3), FLOOD_PAGE per page (default 200);
- FLOOD_PAD: characters of padding in each tool's schema (a property's description);
- FLOOD_RESOURCES, FLOOD_PROMPTS: how many resources and prompts it lists (default 0);
- FLOOD_GROW: the tool `grow` makes the tool list this long and sends
  `notifications/tools/list_changed` (a connector growing after it started).
Every tool answers its own name.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

PAGE = int(os.environ.get("FLOOD_PAGE", "200"))
PAD = int(os.environ.get("FLOOD_PAD", "0"))
COUNTS = {
    "tools": int(os.environ.get("FLOOD_TOOLS", "3")),
    "resources": int(os.environ.get("FLOOD_RESOURCES", "0")),
    "prompts": int(os.environ.get("FLOOD_PROMPTS", "0")),
}


def _schema() -> dict[str, Any]:
    text: dict[str, Any] = {"type": "string"}
    if PAD:
        text["description"] = "x" * PAD
    return {"type": "object", "properties": {"text": text}}


def _page(params: types.PaginatedRequestParams | None, kind: str) -> tuple[range, str | None]:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = min(start + PAGE, COUNTS[kind])
    return range(start, end), (str(end) if end < COUNTS[kind] else None)


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    numbers, more = _page(params, "tools")
    tools = [
        types.Tool(name=f"t{i}", description="a tool", input_schema=_schema()) for i in numbers
    ]
    if 0 in numbers:
        tools[0] = types.Tool(name="grow", description="grow the list", input_schema=_schema())
    return types.ListToolsResult(tools=tools, next_cursor=more)


async def list_resources(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    numbers, more = _page(params, "resources")
    found = [types.Resource(name=f"r{i}", uri=f"file:///r{i}") for i in numbers]
    return types.ListResourcesResult(resources=found, next_cursor=more)


async def list_prompts(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    numbers, more = _page(params, "prompts")
    found = [types.Prompt(name=f"p{i}") for i in numbers]
    return types.ListPromptsResult(prompts=found, next_cursor=more)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "grow":
        COUNTS["tools"] = int(os.environ.get("FLOOD_GROW", "600"))
        await ctx.session.send_tool_list_changed()
    return types.CallToolResult(content=[types.TextContent(text=params.name)])


async def main() -> None:
    server = Server(
        "flood",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_prompts=list_prompts,
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
