"""A small MCP server (official Python SDK, stdio) for the connector tests: a clock, an
echo that reveals whether a secret reached it, and a slow tool with progress."""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("clock")


@server.tool()
def now() -> str:
    """The time on the server, as text."""
    return "12:34"


@server.tool()
def has_key() -> str:
    """Whether the API key reached the process (never the key itself)."""
    return "key present" if os.environ.get("CLOCK_KEY") else "no key"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:  # type: ignore[type-arg]
    """Count to `seconds`, reporting progress each step."""
    for i in range(int(seconds)):
        await ctx.report_progress(i, seconds)
        await asyncio.sleep(1)
    return "done"


if __name__ == "__main__":
    server.run("stdio")
