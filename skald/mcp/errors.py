"""What goes wrong talking to an MCP server, as exceptions whose text a model may read.

Rule: every failure of a connector reaches the caller as an `McpError`; its `str()` is
written for the model and the member, names the connector and never contains a
secret (the transport never puts headers or environment into a message).

- `Disconnected`: the session is over (the server died, wrote garbage, hung in the
  handshake, broke the protocol). Text: exactly
  "connector '<name>' disconnected: <reason>"; protocol violations have a reason that
  starts with "protocol error".
- `SessionExpired` (a `Disconnected`): the request met "unknown session" (HTTP 404),
  so the server did not run it; a new session may send it again, once.
- `RemoteError`: the server answered a request with a JSON-RPC error; the session lives.
- `RequestTimeout`: no answer in time; the request was cancelled, the session lives.
- `SchemaError`: a tool's description cannot be offered to a model.
- `ListTooLarge`: a list (tools, resources, prompts) goes past the session's `Limits`;
  nothing of it is kept. The session lives; the caller decides (the supervisor refuses
  the connector).

Trap: `asyncio.CancelledError` is not an `McpError` and is never turned into one: a
cancelled call propagates cancellation (after telling the server).
"""

from __future__ import annotations

from typing import Any


class McpError(Exception):
    """Base of every error of the MCP client."""


class Disconnected(McpError):
    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"connector '{name}' disconnected: {reason}")


class SessionExpired(Disconnected):
    """The server no longer knows the session (streamable HTTP: 404 on a request carrying
    its id), so this request was not run: the caller may start a new session and send it
    once more. Only the request that met the 404 gets this; others in flight on the same
    session get a plain `Disconnected` (they may have run)."""


class TransportClosed(Exception):
    """Raised by a transport when it can carry no more messages (internal: the session
    turns it into `Disconnected` with the connector's name). `not_run`: the request the
    server refused because it forgot the session (it did not run it)."""

    def __init__(self, reason: str, not_run: int | str | None = None) -> None:
        self.reason = reason
        self.not_run = not_run
        super().__init__(reason)


class RemoteError(McpError):
    def __init__(self, name: str, method: str, code: int, message: str, data: Any = None) -> None:
        self.name = name
        self.method = method
        self.code = code
        self.message = message
        self.data = data
        super().__init__(f"connector '{name}' refused {method}: {message} (error {code})")


class RequestTimeout(McpError):
    def __init__(self, name: str, method: str, seconds: float) -> None:
        self.name = name
        self.method = method
        self.seconds = seconds
        super().__init__(f"connector '{name}' did not answer {method} within {seconds:g} s")


class SchemaError(McpError):
    def __init__(self, name: str, tool: str, problem: str) -> None:
        self.name = name
        self.tool = tool
        self.problem = problem
        super().__init__(f"connector '{name}' tool '{tool}' cannot be offered: {problem}")


class ListTooLarge(McpError):
    """A server's list is over a limit (`Limits`); `problem` is short, for a prompt line."""

    def __init__(self, name: str, method: str, problem: str) -> None:
        self.name = name
        self.method = method
        self.problem = problem
        super().__init__(f"connector '{name}' refused: {problem}")
