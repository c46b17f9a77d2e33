"""The legacy HTTP+SSE transport (MCP 2024-11-05), reached through `HttpTransport`.

Rule (the spec's backwards-compatibility procedure): the client POSTs `initialize` to the
one URL it was given; a 4xx answer other than 401/403 (those are about credentials) means
an older server, so it GETs the same URL as an event stream. That stream's first event,
`endpoint`, names the URI to POST every client message to (answered 202); every server
message (answers, requests, notifications) comes back as a `message` event on the
stream. The stream is the session: when it ends, the session is over.

Traps:
- The endpoint is resolved against the URL and must stay on its origin (scheme, host,
  port): the POSTs carry the connector's headers, and a server naming another host would
  have us send it the credentials.
- The stream cannot say which request a server message relates to (`UNKNOWN_ORIGIN`, as
  on stdio); there is no resumption and no session header.
- A POST's 202 is only a receipt: the answer is whatever arrives on the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from httpx_sse import EventSource

from skald.mcp.errors import TransportClosed
from skald.mcp.oauth import OAuthError
from skald.mcp.transport import MAX_MESSAGE_BYTES, decode_message
from skald.mcp.wire import RpcMessage

# How long the GET may take to bring its `endpoint` event.
ENDPOINT_WAIT_SECONDS = 10.0
_SSE = "text/event-stream"


def falls_back(status: int) -> bool:
    """Whether an HTTP status on the first POST means "try the legacy transport"."""
    return 400 <= status < 500 and status not in (401, 403)


def same_origin(a: str, b: str) -> bool:
    x, y = urlsplit(a), urlsplit(b)
    return (x.scheme, x.hostname, x.port) == (y.scheme, y.hostname, y.port)


class LegacyStream:
    """One legacy session: the GET stream (read in a task) and the endpoint to POST to."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        headers: dict[str, str],
        auth: Any,
        deliver: Callable[[RpcMessage], None],
        die: Callable[[str], None],
    ) -> None:
        self.url = url
        self.endpoint: str | None = None
        self._http = http
        self._headers = headers
        self._auth = auth
        self._deliver = deliver
        self._die = die
        self._found: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Open the stream and wait for its `endpoint` event, or `TransportClosed`."""
        self._task = asyncio.create_task(self._read(), name="mcp-legacy-sse")
        try:
            self.endpoint = await asyncio.wait_for(
                asyncio.shield(self._found), ENDPOINT_WAIT_SECONDS
            )
        except TimeoutError:
            raise TransportClosed(
                f"its event stream sent no endpoint event within {ENDPOINT_WAIT_SECONDS:g} s"
            ) from None

    async def post(self, body: bytes) -> httpx.Response:
        assert self.endpoint is not None
        headers = {**self._headers, "content-type": "application/json"}
        return await self._http.post(
            self.endpoint, content=body, headers=headers, auth=self._auth, timeout=30.0
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    def _lost(self, reason: str) -> None:
        """Before the endpoint: the fallback failed; after: the session is over."""
        if not self._found.done():
            self._found.set_exception(TransportClosed(reason))
            self._found.exception()  # retrieved: no "never retrieved" warning
        else:
            self._die(reason)

    async def _read(self) -> None:
        headers = {**self._headers, "accept": _SSE}
        try:
            async with self._http.stream("GET", self.url, headers=headers, auth=self._auth) as r:
                ctype = r.headers.get("content-type", "").partition(";")[0].strip()
                if r.status_code != 200 or ctype != _SSE:
                    self._lost(f"GET {self.url} answered HTTP {r.status_code}, not an event stream")
                    return
                await self._events(r)
            self._lost("the server closed its event stream")
        except TransportClosed as exc:
            self._lost(exc.reason)
        except httpx.HTTPError as exc:
            self._lost(f"cannot reach {self.url}: {type(exc).__name__}: {exc}"[:300])
        except OAuthError as exc:
            self._lost(f"sign-in failed: {exc}")

    async def _events(self, response: httpx.Response) -> None:
        async for event in EventSource(response).aiter_sse():
            if len(event.data) > MAX_MESSAGE_BYTES:
                raise TransportClosed(
                    f"protocol error: an event longer than {MAX_MESSAGE_BYTES} bytes"
                )
            if not self._found.done():
                if event.event != "endpoint":
                    raise TransportClosed(
                        "protocol error: the stream did not start with an endpoint event"
                    )
                endpoint = urljoin(self.url, event.data.strip())
                if not same_origin(endpoint, self.url):
                    raise TransportClosed(
                        "protocol error: the endpoint event names another origin than the URL"
                    )
                self._found.set_result(endpoint)
            elif event.event in ("message", "") and event.data.strip():
                self._deliver(decode_message(event.data))
