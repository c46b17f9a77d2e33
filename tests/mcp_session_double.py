"""A scripted streamable-HTTP MCP server on 127.0.0.1 that misbehaves in one exact way
on demand (the SDK's own server never does on purpose): it can put another session id
on later answers, and it can forget every session it issued (404 to requests carrying
one, as a restarted server does). Each initialize issues a new id: s1, s2, ..."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from skald.mcp.wire import LATEST_PROTOCOL_VERSION


class SessionDouble(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        # Every POST seen: (JSON-RPC method, the mcp-session-id header it carried, status).
        self.seen: list[tuple[str, str | None, int]] = []
        self.later_id: str | None = None  # a session id put on answers after initialize
        self.issued = 0
        self.forgotten: set[str] = set()  # ids answered 404
        self.arrived: list[str] = []  # tool names of tools/call, as they arrive
        # A call of the tool "hold" is answered once this is set.
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"

    def forget_all(self) -> None:
        """Forget every session issued so far (a restart): their ids answer 404."""
        self.forgotten |= {f"s{n}" for n in range(1, self.issued + 1)}

    def sent_on(self, session: str) -> list[tuple[str, int]]:
        return [(m, status) for m, carried, status in self.seen if carried == session]


class _Handler(BaseHTTPRequestHandler):
    server: SessionDouble

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

    def _answer(self, message: dict[str, Any], carried: str | None) -> tuple[int, Any, Any]:
        method = message.get("method", "(response)")
        server = self.server
        if method == "initialize":
            server.issued += 1
            result = {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "double", "version": "1"},
            }
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return 200, answer, f"s{server.issued}"
        if carried is not None and carried in server.forgotten:
            return 404, {"jsonrpc": "2.0", "error": {"code": -32001, "message": "gone"}}, None
        if "id" not in message:
            return 202, None, None
        result: dict[str, Any] = {}
        if method == "tools/list":
            result = {"tools": []}
        elif method == "tools/call":
            name = message["params"]["name"]
            server.arrived.append(name)
            if name == "hold":
                server.release.wait(30)
            result = {"content": [{"type": "text", "text": f"ran on {carried}"}]}
        return 200, {"jsonrpc": "2.0", "id": message["id"], "result": result}, server.later_id

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        carried = self.headers.get("mcp-session-id")
        status, body, session = self._answer(message, carried)
        self.server.seen.append((message.get("method", "(response)"), carried, status))
        self._send(status, body, session)


@contextmanager
def session_double() -> Iterator[SessionDouble]:
    server = SessionDouble()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join()
