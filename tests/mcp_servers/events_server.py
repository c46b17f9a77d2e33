"""An MCP server (official Python SDK, stdio) that emits events the way a mail or calendar
connector tells its client news: notifications of its own, for tests/test_event_triage.py.

Tool `emit(events)`: each item `{"method": "notifications/…", "params": {...}}` is sent
as a notification, in order, before the call answers (one stream, in order). Also sends
a log message and a tool-list change, which are protocol bookkeeping, never events.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

SCHEMA = {
    "type": "object",
    "properties": {"events": {"type": "array", "items": {"type": "object"}}},
    "required": ["events"],
}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool(name="emit", description="send these events", input_schema=SCHEMA)]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    session = ctx.session
    outbound = session._connection.outbound  # raw notifications of any name
    await outbound.notify("notifications/message", {"level": "info", "data": "emitting"})
    await session.send_tool_list_changed()
    sent = 0
    for item in (params.arguments or {}).get("events", []):
        await outbound.notify(str(item["method"]), dict(item.get("params") or {}))
        sent += 1
    return types.CallToolResult(content=[types.TextContent(text=f"emitted {sent}")])


async def main() -> None:
    server: Server[Any] = Server("events-test", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    import anyio

    anyio.run(main)
