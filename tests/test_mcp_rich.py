"""Resources, resource templates, subscriptions and prompts through the client library,
against tests/mcp_servers/rich_server.py (the official Python SDK) over stdio and the
legacy HTTP+SSE transport."""

from __future__ import annotations

import asyncio
import base64

import pytest
from mcp_support import rich_http, rich_stdio

from skald.mcp import Handlers, HttpTransport, McpSession, RemoteError, Transport, connect


async def _exercise(transport: Transport) -> None:
    updated: asyncio.Queue[str] = asyncio.Queue()
    session: McpSession = await connect(
        transport, name="rich", handlers=Handlers(on_resource_updated=updated.put_nowait)
    )
    try:
        resources = await session.list_resources()
        assert [(r.uri, r.name) for r in resources] == [
            ("note://shopping", "shopping"),
            ("file:///logo.png", "logo"),
        ]
        [template] = await session.list_resource_templates()
        assert template.uri_template == "note://{name}" and template.name == "note"
        assert session.listed["resources/templates/list"][0] == 1

        [text] = (await session.read_resource("note://shopping")).contents
        assert text.text == "milk, eggs" and text.mime_type == "text/plain"
        [blob] = (await session.read_resource("file:///logo.png")).contents
        assert isinstance(blob.blob, str)
        assert base64.b64decode(blob.blob).startswith(b"\x89PNG")
        with pytest.raises(RemoteError, match="no resource"):
            await session.read_resource("note://nothing")

        # Subscribed: the server's update reaches the handler with the resource's URI.
        assert session.can_subscribe
        await session.subscribe("note://shopping")
        await session.call_tool("note", {"text": "bread"})
        assert await asyncio.wait_for(updated.get(), 10) == "note://shopping"
        [text] = (await session.read_resource("note://shopping")).contents
        assert text.text == "bread"
        await session.unsubscribe("note://shopping")

        [prompt] = await session.list_prompts()
        assert prompt.name == "greet" and [a.name for a in prompt.arguments] == ["name"]
        got = await session.get_prompt("greet", {"name": "Ada"})
        [message] = got.messages
        assert message.role == "user"
        assert getattr(message.content, "text", "") == "Say hello to Ada in Italian."
    finally:
        await session.close()


async def test_resources_templates_subscriptions_and_prompts_over_stdio() -> None:
    await _exercise(rich_stdio())


async def test_resources_templates_subscriptions_and_prompts_over_legacy_sse() -> None:
    with rich_http("sse") as url:
        await _exercise(HttpTransport(url))
