"""One `url`, both HTTP transports: the client POSTs initialize; a 4xx (here the SDK's
legacy server answering 405) sends it to the 2024-11-05 HTTP+SSE transport on the same
URL (GET the event stream, POST to its `endpoint`), following the spec's
backwards-compatibility procedure. Real servers: tests/mcp_servers/rich_server.py, built
with the official Python SDK (its SseServerTransport, and streamable HTTP)."""

from __future__ import annotations

import asyncio

import pytest
from mcp_support import rich_http

from skald.mcp import Disconnected, HttpTransport, McpError, connect


async def test_a_legacy_sse_server_behind_the_url_lists_and_calls_tools() -> None:
    with rich_http("sse") as url:
        transport = HttpTransport(url)
        session = await connect(transport, name="legacy")
        try:
            assert transport.legacy is not None
            names = [t.name for t in await session.list_tools()]
            assert names == ["echo", "picture", "note"]
            result = await session.call_tool("echo", {"text": "ciao"})
            assert result.text() == "ciao"
            # Several calls at once: each answer finds its request on the one stream.
            many = await asyncio.gather(
                *(session.call_tool("echo", {"text": str(i)}) for i in range(5))
            )
            assert [r.text() for r in many] == [str(i) for i in range(5)]
        finally:
            await session.close()


async def test_a_streamable_server_stays_on_streamable_http() -> None:
    with rich_http("http") as url:
        transport = HttpTransport(url)
        session = await connect(transport, name="modern")
        try:
            assert transport.legacy is None
            assert (await session.call_tool("echo", {"text": "x"})).text() == "x"
        finally:
            await session.close()


async def test_a_url_that_is_neither_transport_fails_the_handshake_naming_both() -> None:
    with rich_http("sse") as url:
        wrong = url.replace("/sse", "/nothing")
        with pytest.raises(McpError) as caught:
            await connect(HttpTransport(wrong), name="nowhere")
        text = str(caught.value)
        assert "HTTP 404" in text and "not a legacy HTTP+SSE server" in text


async def test_the_legacy_session_ends_when_the_server_goes() -> None:
    with rich_http("sse") as url:
        session = await connect(HttpTransport(url), name="legacy")
    # The server is killed: its stream ends, and the session says so by itself.
    failure = await asyncio.wait_for(session.wait_closed(), 30)
    assert isinstance(failure, Disconnected)
    assert "connector 'legacy' disconnected" in str(failure)
    with pytest.raises(Disconnected):
        await session.call_tool("echo", {"text": "late"})
