"""The streamable HTTP transport (MCP 2025-03-26 and later).

Rule: every client message is one POST to the endpoint. A request's answer comes back
either as one JSON body or as an SSE stream that may carry the server's own requests
and notifications before the answer; notifications and responses we send get 202. After
the handshake a GET stream carries what the server sends unprompted (405 = it has
none). `Mcp-Session-Id` from the initialize answer goes on every later request, as
does `MCP-Protocol-Version`; `close()` DELETEs the session.

Resumption (SEP-1699): SSE events may carry `id:` and `retry:`. When a stream ends or
breaks before the answer we wait for arrived, and it had an event id, we wait the
server's `retry:` delay (or `DEFAULT_RETRY_MS`) and GET the endpoint with
`Last-Event-ID`; the server replays what we missed on that stream. The GET stream
reconnects the same way.

Traps:
- A stream that closes cleanly is not an answer; only the response message is.
- Events with an empty `data:` are priming events (they carry an id to resume from).
- One SSE reader (`httpx_sse`) parses every stream here and in `skald/llm/wire.py`.
- An HTTP error on a request fails that request (as a JSON-RPC error), not the session;
  404 with a session id means the server forgot the session: disconnected, and that
  request (only it: it was not run) fails with `SessionExpired`, so the caller may send
  it once more on a new session. Nothing is ever sent again on the dead id. Network
  errors (nobody listening) disconnect, on the GET stream too: its reconnection finding
  nobody is how a server that died while idle is noticed.
- Headers (they may hold credentials) never go into an error message.
- A 4xx (not 401/403) on the first POST falls back to the legacy HTTP+SSE transport on
  the same URL (`skald/mcp/sse.py`); from then on every message goes that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import msgspec
from httpx_sse import EventSource, ServerSentEvent

from skald.mcp.errors import TransportClosed
from skald.mcp.oauth import OAuthError
from skald.mcp.sse import LegacyStream, falls_back
from skald.mcp.transport import (
    MAX_MESSAGE_BYTES,
    UNKNOWN_ORIGIN,
    Origin,
    Transport,
    decode_message,
)
from skald.mcp.wire import INTERNAL_ERROR, RpcError, RpcMessage

log = logging.getLogger(__name__)

DEFAULT_RETRY_MS = 1000
# Reconnections of one stream in a row that bring no event before we give up on it.
MAX_RESUMPTIONS = 5
# How long the handshake waits for the GET stream to open before going on without it.
GET_STREAM_WAIT_SECONDS = 5.0
DEFAULT_HTTP_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=30.0)

_JSON = "application/json"
_SSE = "text/event-stream"


class HttpTransport(Transport):
    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        auth: httpx.Auth | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        """`headers` go on every request (e.g. `Authorization`); `auth` is an httpx
        authentication flow (OAuth: it may answer a 401 by fetching a token and
        retrying); `http` lets the caller share a client (it is then not closed here)."""
        self.url = url
        self.headers = dict(headers or {})
        self._auth = auth
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=DEFAULT_HTTP_TIMEOUT)
        # Each message with the request whose stream brought it (None: the GET stream).
        self._inbox: asyncio.Queue[tuple[RpcMessage, Origin] | TransportClosed] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._by_request: dict[int | str, asyncio.Task[None]] = {}
        self.session_id: str | None = None
        self._protocol_version: str | None = None
        self._closed = False
        self._dead: TransportClosed | None = None
        # Set when the server turned out to speak the legacy HTTP+SSE transport.
        self.legacy: LegacyStream | None = None

    # -- Transport ------------------------------------------------------------------------

    async def open(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise TransportClosed(f"not an http(s) URL: {self.url[:100]!r}")

    async def send(self, message: RpcMessage) -> None:
        if self._dead is not None:
            raise self._dead
        if self._closed:
            raise TransportClosed("the transport is closed")
        body = msgspec.json.encode(message)
        if self.legacy is not None:
            answer_to = message.id if message.is_request else None
            await self._legacy_post(
                None if isinstance(answer_to, msgspec.UnsetType) else answer_to, body
            )
        elif message.is_request:
            assert not isinstance(message.id, msgspec.UnsetType)
            # The answer may take as long as the tool runs: read it in a task of its own.
            request_id: int | str = message.id
            task = self._spawn(self._post_request(request_id, body, message.method == "initialize"))
            self._by_request[request_id] = task
            task.add_done_callback(lambda _t: self._by_request.pop(request_id, None))
            # The initialize answer carries the session id every later message needs.
            if message.method == "initialize":
                await asyncio.wait({task})
        else:
            await self._post_other(body)

    async def receive(self) -> RpcMessage:
        return (await self.receive_with_origin())[0]

    async def receive_with_origin(self) -> tuple[RpcMessage, Origin]:
        item = await self._inbox.get()
        if isinstance(item, TransportClosed):
            self._inbox.put_nowait(item)  # every later receive fails the same way
            raise item
        return item

    async def initialized(self, protocol_version: str) -> None:
        self._protocol_version = protocol_version
        if self.legacy is not None:
            return  # its one stream is open already
        established = asyncio.Event()
        task = self._spawn(self._get_stream(established))
        # Bounded: a server slow to open the stream must not stall the handshake.
        waiter = asyncio.ensure_future(established.wait())
        await asyncio.wait(
            {task, waiter}, timeout=GET_STREAM_WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()

    def forget(self, request_id: int | str) -> None:
        task = self._by_request.pop(request_id, None)
        if task is not None:
            task.cancel()

    async def close(self, *, grace: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self.legacy is not None:
            await self.legacy.close()  # ending the stream ends the session
        if self.session_id is not None:
            # Politeness: a server that does not know DELETE answers 405; no matter.
            with contextlib.suppress(httpx.HTTPError):
                await self._http.request(
                    "DELETE", self.url, headers=self._headers(), auth=self._auth_arg(), timeout=5.0
                )
        if self._own_http:
            await self._http.aclose()

    # -- internals ------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _auth_arg(self) -> Any:
        return self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT

    def _headers(
        self, accept: str | None = None, last_event_id: str | None = None
    ) -> dict[str, str]:
        headers = dict(self.headers)
        if accept:
            headers["accept"] = accept
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self._protocol_version is not None:
            headers["mcp-protocol-version"] = self._protocol_version
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        return headers

    def _die(self, reason: str, not_run: int | str | None = None) -> None:
        if self._dead is None:
            self._dead = TransportClosed(reason, not_run)
            self._inbox.put_nowait(self._dead)

    def _fail_request(self, request_id: int | str, message: str) -> None:
        error = RpcError(code=INTERNAL_ERROR, message=message)
        self._inbox.put_nowait((RpcMessage(id=request_id, error=error), Origin(True, request_id)))

    def _network_reason(self, exc: httpx.HTTPError) -> str:
        # str(exc) of httpx errors names the URL at most, never headers.
        return f"cannot reach {self.url}: {type(exc).__name__}: {exc}"[:300]

    def _end_reason(self, exc: TransportClosed | httpx.HTTPError | OAuthError) -> str:
        """Why the transport ends, for a failure it cannot go on after."""
        if isinstance(exc, TransportClosed):
            return exc.reason
        if isinstance(exc, httpx.HTTPError):
            return self._network_reason(exc)
        return f"sign-in failed: {exc}"

    async def _post_other(self, body: bytes) -> None:
        """A notification or a response: the server answers 202 (or 200) without a body."""
        headers = {**self._headers(f"{_JSON}, {_SSE}"), "content-type": _JSON}
        try:
            response = await self._http.post(
                self.url, content=body, headers=headers, auth=self._auth_arg(), timeout=30.0
            )
        except httpx.HTTPError as exc:
            self._die(self._network_reason(exc))
            raise self._dead or TransportClosed("unreachable") from None
        if response.status_code == 404 and self.session_id is not None:
            self._die("the server ended the session (HTTP 404)")

    async def _post_request(self, request_id: int | str, body: bytes, initialize: bool) -> None:
        try:
            outcome = await self._exchange(request_id, body, initialize)
        except (TransportClosed, httpx.HTTPError, OAuthError) as exc:
            self._die(self._end_reason(exc))
            return
        except Exception as exc:  # a bug must not leave the request waiting forever
            log.exception("mcp http request failed")
            self._die(f"client error: {type(exc).__name__}")
            return
        if isinstance(outcome, _Refused):
            await self._fall_back(request_id, body, outcome.error)
            return
        if outcome is None:
            return
        if not outcome.strip():
            self._fail_request(request_id, "the server answered with an empty body")
            return
        try:
            for message in _decode_body(outcome):
                self._inbox.put_nowait((message, Origin(True, request_id)))
        except TransportClosed as exc:
            self._die(exc.reason)

    async def _exchange(
        self, request_id: int | str, body: bytes, initialize: bool
    ) -> bytes | _Refused | None:
        """POST one request: its JSON body, None when it was dealt with here (a stream
        read into the inbox, an error answered), `_Refused` for the legacy fallback."""
        headers = {**self._headers(f"{_JSON}, {_SSE}"), "content-type": _JSON}
        async with self._http.stream(
            "POST", self.url, content=body, headers=headers, auth=self._auth_arg()
        ) as response:
            if initialize and response.headers.get("mcp-session-id"):
                self.session_id = response.headers["mcp-session-id"]
            if response.status_code == 404 and self.session_id is not None and not initialize:
                # The server did not run it: the caller may send it on a new session.
                self._die("the server ended the session (HTTP 404)", not_run=request_id)
                return None
            if not 200 <= response.status_code < 300:
                detail = (await _read_limited(response)).decode("utf-8", "replace")
                error = _http_error(response.status_code, detail)
                if initialize and falls_back(response.status_code):
                    return _Refused(error)
                self._fail_request(request_id, error)
                return None
            if _is_sse(response):
                state = _StreamState()
                await self._read_events(response, state, request_id)
                if not state.answered:
                    await self._resume(request_id, state)
                return None
            return await _read_limited(response)

    async def _fall_back(self, request_id: int | str, body: bytes, error: str) -> None:
        """The first POST met a 4xx: maybe a legacy HTTP+SSE server (spec: backwards
        compatibility). Open its stream; the initialize goes to its endpoint."""
        legacy = LegacyStream(
            self._http,
            self.url,
            dict(self.headers),
            self._auth_arg(),
            deliver=lambda message: self._inbox.put_nowait((message, UNKNOWN_ORIGIN)),
            die=self._die,
        )
        try:
            await legacy.open()
        except TransportClosed as exc:
            await legacy.close()
            self._fail_request(
                request_id, f"{error} (and not a legacy HTTP+SSE server: {exc.reason})"
            )
            return
        self.legacy = legacy
        await self._legacy_post(request_id, body)

    async def _legacy_post(self, request_id: int | str | None, body: bytes) -> None:
        """One message to the legacy endpoint; its answer (if any) comes on the stream."""
        assert self.legacy is not None
        try:
            response = await self.legacy.post(body)
        except httpx.HTTPError as exc:
            self._die(self._network_reason(exc))
            return
        except OAuthError as exc:
            self._die(f"sign-in failed: {exc}")
            return
        if 200 <= response.status_code < 300:
            return
        if response.status_code == 404:
            self._die("the server ended the session (HTTP 404)")
        elif request_id is not None:
            self._fail_request(request_id, _http_error(response.status_code, response.text))

    async def _read_events(
        self, response: httpx.Response, state: _StreamState, request_id: int | str | None
    ) -> None:
        """Put the stream's messages in the inbox until it ends; note id, retry, answer."""
        async for event in EventSource(response).aiter_sse():
            self._note(event, state)
            if not event.data.strip():
                continue  # a priming event: only its id matters
            if len(event.data) > MAX_MESSAGE_BYTES:
                raise TransportClosed(
                    f"protocol error: an event longer than {MAX_MESSAGE_BYTES} bytes"
                )
            message = decode_message(event.data)
            state.events += 1
            if request_id is not None and message.is_response and message.id == request_id:
                state.answered = True
            # A request's stream (and its resumption) relates what it carries to it.
            self._inbox.put_nowait((message, Origin(True, request_id)))
            if state.answered:
                return

    @staticmethod
    def _note(event: ServerSentEvent, state: _StreamState) -> None:
        if event.id:
            state.last_event_id = event.id
        if event.retry is not None and event.retry >= 0:
            state.retry_ms = event.retry

    async def _resume(self, request_id: int | str, state: _StreamState) -> None:
        """The POST stream ended before the answer: resume it with GET + Last-Event-ID."""
        failures = 0
        while not state.answered:
            if state.last_event_id is None or failures >= MAX_RESUMPTIONS:
                self._fail_request(
                    request_id, "the server closed the stream without answering the request"
                )
                return
            await asyncio.sleep(state.retry_ms / 1000)
            before = state.events
            try:
                async with self._get_events(state) as response:
                    if response.status_code != 200 or not _is_sse(response):
                        failures = MAX_RESUMPTIONS  # the server cannot resume: give up
                        continue
                    await self._read_events(response, state, request_id)
            except (httpx.HTTPError, OAuthError):
                pass
            failures = 0 if state.events > before else failures + 1

    def _get_events(self, state: _StreamState) -> AbstractAsyncContextManager[httpx.Response]:
        """GET the event stream, resuming after the last event id the state saw."""
        headers = self._headers(_SSE, state.last_event_id)
        return self._http.stream("GET", self.url, headers=headers, auth=self._auth_arg())

    async def _get_stream(self, established: asyncio.Event) -> None:
        """What the server sends unprompted; reconnects while it keeps working."""
        state = _StreamState()
        failures = 0
        while not self._closed:
            before = state.events
            try:
                async with self._get_events(state) as response:
                    if response.status_code == 404 and self.session_id is not None:
                        self._die("the server ended the session (HTTP 404)")
                        return
                    if response.status_code != 200 or not _is_sse(response):
                        return  # 405: the server offers no such stream
                    established.set()
                    await self._read_events(response, state, None)
            except (TransportClosed, httpx.ConnectError) as exc:
                # A ConnectError: nobody listens any more, the server died while idle. Say
                # so now (the supervisor shows it and reconnects) rather than at the next call.
                self._die(self._end_reason(exc))
                return
            except (httpx.HTTPError, OAuthError):
                pass
            failures = 0 if state.events > before else failures + 1
            if failures >= MAX_RESUMPTIONS:
                return
            await asyncio.sleep(state.retry_ms / 1000)


class _Refused:
    """The first POST's 4xx that sends us to the legacy transport (its text, in case
    that fails too)."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


class _StreamState:
    __slots__ = ("answered", "events", "last_event_id", "retry_ms")

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self.retry_ms = DEFAULT_RETRY_MS
        self.answered = False
        self.events = 0


def _is_sse(response: httpx.Response) -> bool:
    ctype: str = response.headers.get("content-type", "")
    return ctype.partition(";")[0].strip() == _SSE


async def _read_limited(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            raise TransportClosed(f"protocol error: a body longer than {MAX_MESSAGE_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode_body(data: bytes) -> list[RpcMessage]:
    """One message, or (2025-03-26) a batch of them."""
    if data.lstrip().startswith(b"["):
        try:
            items = msgspec.json.decode(data, type=list[msgspec.Raw])
        except msgspec.DecodeError:
            raise TransportClosed(
                "protocol error: the server sent a malformed JSON batch"
            ) from None
        return [decode_message(bytes(item)) for item in items]
    return [decode_message(data)]


def _http_error(status: int, body: str) -> str:
    detail = body.strip()
    try:
        parsed = msgspec.json.decode(detail)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            detail = str(parsed["error"].get("message", detail))
    except msgspec.DecodeError:
        pass
    return f"HTTP {status}: {detail[:200]}" if detail else f"HTTP {status}"
