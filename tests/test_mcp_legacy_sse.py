"""One `url`, both HTTP transports: the client POSTs initialize; a 4xx (here the SDK's
legacy server answering 405) sends it to the 2024-11-05 HTTP+SSE transport on the same
URL (GET the event stream, POST to its `endpoint`), following the spec's
backwards-compatibility procedure. Real servers: tests/mcp_servers/rich_server.py, built
with the official Python SDK (its SseServerTransport, and streamable HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

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


class _Legacy(BaseHTTPRequestHandler):
    """A scripted legacy server: POST answers `post_status`; GET is an event stream whose
    endpoint event names `endpoint`. It records what it was asked."""

    post_status = 405
    endpoint = "/messages"
    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.seen.append(f"POST {self.path} {self.headers.get('authorization')}")
        self.send_response(self.post_status)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path}")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"event: endpoint\ndata: {self.endpoint}\n\n".encode())
        self.wfile.flush()


@contextlib.contextmanager
def _legacy_double(post_status: int, endpoint: str) -> Iterator[tuple[str, list[str]]]:
    seen: ClassVar[list[str]] = []
    handler = type(
        "H", (_Legacy,), {"post_status": post_status, "endpoint": endpoint, "seen": seen}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/sse", seen
    finally:
        server.shutdown()
        server.server_close()


async def test_an_endpoint_on_another_origin_is_refused_and_gets_no_credentials() -> None:
    with _legacy_double(405, "http://127.0.0.2:9/steal") as (url, seen):
        with pytest.raises(McpError, match="another origin"):
            await connect(HttpTransport(url, {"authorization": "Bearer s3cret"}), name="x")
        # The credentials went to the URL's own origin only: one POST, one GET, no more.
        assert [s.split()[0] for s in seen] == ["POST", "GET"]


async def test_a_401_is_about_credentials_not_a_legacy_server() -> None:
    with _legacy_double(401, "/messages") as (url, seen):
        with pytest.raises(McpError, match="HTTP 401"):
            await connect(HttpTransport(url), name="x")
        assert [s.split()[0] for s in seen] == ["POST"]
