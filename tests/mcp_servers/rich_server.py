"""An MCP server with tools, resources, resource templates, subscriptions, prompts and
image results (official Python SDK), for tests/test_mcp_rich.py and
tests/test_connectors_rich.py (never the product).

Usage: python tests/mcp_servers/rich_server.py MODE [PORT]

- stdio: over stdin/stdout.
- http: streamable HTTP on 127.0.0.1:PORT (path /mcp).
- sse: the legacy HTTP+SSE transport (2024-11-05) on 127.0.0.1:PORT: GET /sse opens the
  stream whose first event (`endpoint`) names where to POST (/messages/?session_id=...);
  a POST to /sse is refused with 405, as such servers do.

Tools: `echo` (text), `picture` (a PNG: `size` "small" is 2x2, "large" is 400x400
noise, ~160 KB), `note` (sets note://shopping and tells subscribers). Resources:
note://shopping (text), file:///logo.png (a PNG blob); template note://{name}; prompt
`greet` (argument `name`).
"""

from __future__ import annotations

import base64
import os
import struct
import sys
import zlib
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server

MODE = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 0
STRING = {"type": "string"}
notes = {"shopping": "milk, eggs"}
subscribers: dict[str, list[Any]] = {}


def png(side: int, noise: bool = False) -> bytes:
    """A grey PNG of side x side pixels (random pixels with `noise`: it does not compress)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + (os.urandom(side) if noise else bytes([(y * 8) % 256] * side))
        for y in range(side)
    )
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    return head + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    def tool(name: str, description: str, **props: Any) -> types.Tool:
        schema = {"type": "object", "properties": props}
        return types.Tool(name=name, description=description, input_schema=schema)

    return types.ListToolsResult(
        tools=[
            tool("echo", "says the text back", text=STRING),
            tool("picture", "draws a picture", size={"type": "string", "enum": ["small", "large"]}),
            tool("note", "sets the shopping note", text=STRING),
        ]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "echo":
        return _text(str(args.get("text", "")))
    if params.name == "picture":
        data = png(2) if args.get("size", "small") == "small" else png(400, noise=True)
        encoded = base64.b64encode(data).decode()
        return types.CallToolResult(
            content=[
                types.TextContent(text="here it is"),
                types.ImageContent(data=encoded, mime_type="image/png"),
            ]
        )
    if params.name == "note":
        notes["shopping"] = str(args.get("text", ""))
        for session in subscribers.get("note://shopping", []):
            await session.send_resource_updated("note://shopping")
        return _text("noted")
    return _text(f"unknown tool {params.name}", error=True)


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(
                uri="note://shopping",
                name="shopping",
                title="Shopping list",
                mime_type="text/plain",
            ),
            types.Resource(uri="file:///logo.png", name="logo", mime_type="image/png"),
        ]
    )


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template="note://{name}", name="note", description="a note by name"
            )
        ]
    )


async def read_resource(
    ctx: Any, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "file:///logo.png":
        blob = base64.b64encode(png(2)).decode()
        contents: list[Any] = [
            types.BlobResourceContents(uri=uri, blob=blob, mime_type="image/png")
        ]
    elif uri.startswith("note://") and uri[7:] in notes:
        contents = [
            types.TextResourceContents(uri=uri, text=notes[uri[7:]], mime_type="text/plain")
        ]
    else:
        raise ValueError(f"no resource {uri}")
    return types.ReadResourceResult(contents=contents)


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribers.setdefault(str(params.uri), []).append(ctx.session)
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    sessions = subscribers.get(str(params.uri), [])
    if ctx.session in sessions:
        sessions.remove(ctx.session)
    return types.EmptyResult()


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    argument = types.PromptArgument(name="name", description="who", required=True)
    return types.ListPromptsResult(
        prompts=[types.Prompt(name="greet", description="a greeting", arguments=[argument])]
    )


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    name = (params.arguments or {}).get("name", "friend")
    message = types.PromptMessage(
        role="user", content=types.TextContent(text=f"Say hello to {name} in Italian.")
    )
    return types.GetPromptResult(description="a greeting", messages=[message])


def make_server() -> Server[Any]:
    return Server(
        "rich-test",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def sse_app(server: Server[Any]) -> Any:
    """The legacy transport as the SDK's SseServerTransport serves it."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/")

    async def handle_sse(scope: Any, receive: Any, send: Any) -> Response:
        async with sse.connect_sse(scope, receive, send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    class _Endpoint:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await handle_sse(scope, receive, send)

    return Starlette(
        routes=[
            Route("/sse", endpoint=_Endpoint(), methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
        ]
    )


async def main() -> None:
    from mcp.server.stdio import stdio_server

    server = make_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if MODE == "stdio":
        anyio.run(main)
    else:
        import uvicorn

        server = make_server()
        app = sse_app(server) if MODE == "sse" else server.streamable_http_app(host="127.0.0.1")
        uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
