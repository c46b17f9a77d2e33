"""What the threaded HTTP doubles (oauth_double, push_double, telegram_double) share: a JSON
answer, and a server thread started on entering the double and shut down on leaving it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


def send_json(handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    """One JSON answer with its length, as every double's endpoints give it."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class ServedDouble:
    """A double whose `server` runs on its own thread for the `with` block it is used in."""

    server: ThreadingHTTPServer
    thread: threading.Thread

    def serve(self, server: ThreadingHTTPServer) -> None:
        """Keeps `server` to run on a daemon thread once the double is entered."""
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
