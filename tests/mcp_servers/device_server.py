"""An MCP server with a QR/device sign-in (official Python SDK, streamable HTTP), for
tests/test_connectors_device.py (never the product).

Usage: python tests/mcp_servers/device_server.py PORT PENDING

`login_status` answers a QR code (an image content: a real PNG) and a pairing code as
text the first PENDING times it is called, then "signed in as ada"; `logout` signs out
and starts over. `whoami` is an ordinary tool the model may call.
"""

from __future__ import annotations

import base64
import struct
import sys
import zlib
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server

PORT = int(sys.argv[1])
PENDING = int(sys.argv[2])
OBJECT = {"type": "object", "properties": {}}
state = {"calls": 0, "signed_in": False}


def _png() -> str:
    """A 2x2 black-and-white PNG, base64 (a stand-in for a QR code)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"\x00\x00\xff" + b"\x00\xff\x00"
    ihdr = struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows))
    return base64.b64encode(raw + chunk(b"IEND", b"")).decode()


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [
        types.Tool(name=n, description=f"the {n} tool", input_schema=OBJECT)
        for n in ("login_status", "logout", "whoami")
    ]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "login_status":
        if not state["signed_in"]:
            state["calls"] += 1
            if state["calls"] > PENDING:
                state["signed_in"] = True
        if state["signed_in"]:
            return _text("signed in as ada")
        return types.CallToolResult(
            content=[
                types.ImageContent(data=_png(), mime_type="image/png"),
                types.TextContent(
                    text="Scan the code, or enter 4242-ABCD at https://example.test/link"
                ),
            ]
        )
    if params.name == "logout":
        state["calls"], state["signed_in"] = 0, False
        return _text("signed out")
    if params.name == "whoami":
        return _text("ada" if state["signed_in"] else "nobody")
    return types.CallToolResult(content=[types.TextContent(text="unknown tool")], is_error=True)


if __name__ == "__main__":
    import uvicorn

    server = Server("device-test", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
