"""A small MCP server (official Python SDK, stdio; `http PORT` for streamable HTTP) for
the connector tests: a clock, an echo that reveals whether a secret reached it, a slow
tool with progress, and elicitations (at once, or once a test creates a file)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("clock")


@server.tool()
async def now(ctx: Context) -> str:  # type: ignore[type-arg]
    """The time on the server, as text."""
    await ctx.info("the clock was read")
    return "12:34"


@server.tool()
def has_key() -> str:
    """Whether the API key reached the process (never the key itself)."""
    return "key present" if os.environ.get("CLOCK_KEY") else "no key"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:  # type: ignore[type-arg]
    """Count to `seconds`, reporting progress each step."""
    try:
        for i in range(int(seconds)):
            await ctx.report_progress(i, seconds)
            await asyncio.sleep(1)
    except asyncio.CancelledError:
        # The client's notifications/cancelled reached the server: say so for the test.
        mark = os.environ.get("CANCEL_MARK")
        if mark:
            Path(mark).write_text("cancelled")  # noqa: ASYNC240 - a test server, tiny write
        raise
    return "done"


class Colour(BaseModel):
    colour: str


@server.tool()
async def favourite(ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the user for their favourite colour (an elicitation) and repeat it."""
    result = await ctx.elicit("What is your favourite colour?", Colour)
    if result.action == "accept" and result.data is not None:
        return f"favourite colour: {result.data.colour}"
    return f"no answer ({result.action})"


async def _until(gate: str) -> None:
    while not Path(gate).exists():  # noqa: ASYNC110, ASYNC240 - a test server polls a file
        await asyncio.sleep(0.02)


@server.tool()
async def ask_when(gate: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Once the file `gate` exists, ask for a favourite colour (an elicitation)."""
    await _until(gate)
    return await favourite(ctx)


@server.tool()
async def hold(gate: str) -> str:
    """Wait until the file `gate` exists."""
    await _until(gate)
    return "released"


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
