"""The streamable-HTTP session id: taken from the initialize answer only, and a 404 on a
request carrying it ends the session (no silent retry on a dead id).

The server is a small scripted HTTP double on 127.0.0.1 (a real socket, a real httpx
client): the cases need a server that misbehaves in one exact way, which the SDK's own
server never does on purpose.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from skald.mcp import Disconnected, HttpTransport, connect
from skald.mcp.wire import LATEST_PROTOCOL_VERSION


class _Double(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        # Every POST seen: (JSON-RPC method, the mcp-session-id header it carried).
        self.seen: list[tuple[str, str | None]] = []
        self.later_id: str | None = None  # a session id put on answers after initialize
        self.gone = False  # the server forgot the session: 404 to every request with an id


class _Handler(BaseHTTPRequestHandler):
    server: _Double

    def log_message(self, *_args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any] | None, session: str | None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("content-type", "application/json")
        if session is not None:
            self.send_header("mcp-session-id", session)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(405, None, None)  # no stream for unprompted messages

    def do_DELETE(self) -> None:
        self._send(200, None, None)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        method, carried = message.get("method", "(response)"), self.headers.get("mcp-session-id")
        self.server.seen.append((method, carried))
        if method == "initialize":
            result = {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "double", "version": "1"},
            }
            self._send(200, {"jsonrpc": "2.0", "id": message["id"], "result": result}, "first")
        elif "id" not in message:
            self._send(202, None, None)
        elif self.server.gone and carried is not None:
            self._send(404, {"jsonrpc": "2.0", "error": {"code": -32001, "message": "gone"}}, None)
        else:
            result = {"tools": []} if method == "tools/list" else {}
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            self._send(200, answer, self.server.later_id)


@pytest.fixture
def double() -> Iterator[_Double]:
    server = _Double()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _url(server: _Double) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/mcp"


async def test_the_session_id_is_the_initialize_answers_and_a_later_one_never_replaces_it(
    double: _Double,
) -> None:
    transport = HttpTransport(_url(double))
    session = await connect(transport, name="double")
    try:
        double.later_id = "second"  # every later answer names another session
        await session.list_tools()
        await session.ping()
        await session.ping()
        assert transport.session_id == "first"
        after = double.seen[1:]
        assert [m for m, _ in after] == [
            "notifications/initialized",
            "tools/list",
            "ping",
            "ping",
        ]
        assert {carried for _, carried in after} == {"first"}
    finally:
        await session.close()


async def test_a_404_on_a_request_with_the_session_id_ends_the_session_without_a_retry(
    double: _Double,
) -> None:
    session = await connect(HttpTransport(_url(double)), name="double")
    try:
        await session.ping()
        double.gone = True
        with pytest.raises(Disconnected, match="HTTP 404"):
            await session.list_tools()
        failure = await session.wait_closed()
        assert failure is not None and "ended the session (HTTP 404)" in failure.reason
        # Nothing more goes to the dead id: the next call fails here, at once.
        with pytest.raises(Disconnected):
            await session.ping()
        assert [m for m, _ in double.seen if m == "tools/list"] == ["tools/list"]
        assert [m for m, _ in double.seen].count("ping") == 1
    finally:
        await session.close()
