"""MCP servers built with the official Python SDK, for tests/test_mcp_*.py (never the product).

Usage: python tests/mcp_servers/sdk_server.py MODE [MARKER_DIR [PORT]]

- ok: 7 tools served 3 per page (cursors); `echo`; `wait` blocks until cancelled and
  then writes MARKER_DIR/cancelled-<request id> (the server saw the cancellation);
  `sample` asks the client to sample and returns the error it got; `roots` returns the
  client's roots; `ask` elicits a form and returns the answer.
- banner: writes a start-up banner on stdout before serving (garbage on the wire).
- die: like ok, but `echo` exits the process with status 3 mid-call.
- badversion: answers initialize with protocol version 1999-01-01, then waits.
- http: as ok, over streamable HTTP on 127.0.0.1:PORT (path /mcp).
- http-stateless: the same, stateless with JSON answers (it offers no GET stream).
- hang: never answers initialize, ignores SIGTERM and starts a grandchild that sleeps
  (its pid goes to MARKER_DIR/grandchild) - only a process-group SIGKILL ends both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

if sys.argv[1] == "hang":
    # First thing, before the SDK's slow imports: a SIGTERM-proof process with a child.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _child = subprocess.Popen(["sleep", "600"])
    if len(sys.argv) > 2:
        (Path(sys.argv[2]) / "grandchild").write_text(str(_child.pid))
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1]
MARKERS = Path(sys.argv[2]) if len(sys.argv) > 2 else None
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 0
PAGE = 3
TOOL_NAMES = ["echo", "wait", "sample", "roots", "ask", "six", "seven"]
OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}}


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    names = TOOL_NAMES[start : start + PAGE]
    tools = [types.Tool(name=n, description=f"the {n} tool", input_schema=OBJECT) for n in names]
    more = start + PAGE < len(TOOL_NAMES)
    return types.ListToolsResult(tools=tools, next_cursor=str(start + PAGE) if more else None)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "echo":
        if MODE == "die":
            os._exit(3)
        return _text(str(args.get("text", "")))
    if params.name == "wait":
        if MARKERS is not None:
            (MARKERS / f"started-{ctx.request_id}").write_text("running")
        try:
            await anyio.sleep_forever()
        finally:
            # Reached when the SDK cancels the handler on notifications/cancelled.
            if MARKERS is not None:
                (MARKERS / f"cancelled-{ctx.request_id}").write_text("seen")
    if params.name == "sample":
        try:
            await ctx.session.create_message(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(text="hi"))],
                max_tokens=10,
            )
        except Exception as exc:
            return _text(f"sampling refused: {exc}")
        return _text("sampling answered")
    if params.name == "roots":
        roots = await ctx.session.list_roots()
        return _text(",".join(str(r.uri) for r in roots.roots) or "(no roots)")
    if params.name == "ask":
        answer = await ctx.session.elicit_form(
            message="Which colour?",
            requested_schema={
                "type": "object",
                "properties": {
                    "colour": {"type": "string"},
                    "shade": {"type": "string", "default": "dark"},
                },
                "required": ["colour"],
            },
        )
        return _text(f"{answer.action}: {answer.content}")
    return _text(f"unknown tool {params.name}", error=True)


@asynccontextmanager
async def hanging(_server: Any) -> AsyncIterator[dict[str, Any]]:
    await anyio.sleep_forever()
    yield {}


async def main() -> None:
    if MODE == "banner":
        os.write(1, b"my-server 1.0 starting up...\n")
    if MODE == "badversion":
        import mcp.server.runner as runner

        runner.HANDSHAKE_PROTOCOL_VERSIONS = ()  # type: ignore[misc]
        runner.LATEST_HANDSHAKE_VERSION = "1999-01-01"  # type: ignore[misc]
    kwargs: dict[str, Any] = {"lifespan": hanging} if MODE == "hang" else {}
    server = Server("skald-test", on_list_tools=list_tools, on_call_tool=call_tool, **kwargs)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http() -> None:
    import uvicorn

    server = Server("skald-test", on_list_tools=list_tools, on_call_tool=call_tool)
    stateless = MODE == "http-stateless"
    app = server.streamable_http_app(
        host="127.0.0.1", stateless_http=stateless, json_response=stateless
    )
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")


if __name__ == "__main__":
    if MODE.startswith("http"):
        serve_http()
    else:
        anyio.run(main)
