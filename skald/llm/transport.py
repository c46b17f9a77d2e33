"""The model requests' HTTP/1.1 transport: h11 on asyncio streams, under httpx's client.

Rule: a model request (`wire.post_stream`) keeps httpx's client API (its request and
response, its timeouts, its errors), but its bytes go through `ModelTransport` instead
of httpcore's pool over anyio. With ten members streaming at once, httpcore and anyio
held close to half of the event loop's busy time (a fresh cancel scope for every read
of a streamed answer, the pool's locks): `bench/bench_sse_client.py` prices each client.
The framing is h11's, the HTTP/1.1 state machine httpcore itself uses; what is written
here is only the pool and the socket.

Traps:
- A kept-alive connection the server has since closed is found before reuse (its reader
  is at EOF), never by sending a POST into it: a model request is not idempotent, so a
  request lost on a dead connection cannot be sent again. One a NAT or a load balancer
  forgot says nothing: connections idle longer than `KEEPALIVE_S` (httpx's own 5 s)
  are closed instead of reused, or a request would wait out the silence timeout.
- A response not read to its end cannot go back to the pool: closing it drops the
  connection, which is also what stops a provider generating tokens nobody reads.
- Giving httpx a transport turns off its environment proxies. `model_http_client`
  mounts httpx's own proxy transports for them, from httpx's own reading of the
  environment, so a household behind a proxy keeps working and `NO_PROXY` hosts come
  back here.
- The TLS context (the CA bundle read from disk, tens of milliseconds) is made once, in
  a thread, at the first https connection: not at start, not on the loop.
- The whole request is written before its answer is read. A server that answers early
  (a 413 for an oversized picture) and stops reading must keep draining the body, as
  nginx's lingering close does; one that resets instead loses its answer on asyncio's
  streams (a reset discards what was read): the member sees the connection's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator

import h11
import httpx

# httpx keeps its reading of the proxy variables (NO_PROXY's forms included) private;
# taking it keeps one reading of them in the process instead of a second copy.
from httpx._utils import get_environment_proxies

READ_SIZE = 65_536
IDLE_PER_ORIGIN = 16  # ten members streaming at once each hold one; more are closed
HEAD_LIMIT = 100 * 1024  # a response head may be this long (httpcore's limit; h11's is 16 KiB)
# An idle connection older than this is closed, not reused (httpx's own default): a NAT
# or load balancer may have forgotten it without a word, and a request sent into such a
# connection waits for the whole silence timeout before it fails.
KEEPALIVE_S = 5.0

Origin = tuple[bytes, bytes, int]
Timeouts = dict[str, float | None]


class _Connection:
    __slots__ = ("h11", "idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
        self.idle_since = 0.0

    def alive(self, oldest: float) -> bool:
        """Worth a request: not closed by the server, not idle since before `oldest`."""
        reader = self.reader
        closed = reader.at_eof() or reader.exception() or self.writer.is_closing()
        return not closed and self.idle_since >= oldest

    def drop(self) -> None:
        self.writer.transport.abort()

    async def next_event(self, read_timeout: float | None) -> object:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            async with asyncio.timeout(read_timeout):
                data = await self.reader.read(READ_SIZE)
            self.h11.receive_data(data)  # b"" is the end of the stream: h11 judges it


@contextlib.contextmanager
def _mapped(
    request: httpx.Request,
    timeout: type[httpx.TimeoutException],
    failure: type[httpx.TransportError],
) -> Iterator[None]:
    """Network trouble as httpx's own errors, which the provider clients already read."""
    try:
        yield
    except TimeoutError as exc:
        raise timeout(str(exc) or "timed out", request=request) from exc
    except h11.RemoteProtocolError as exc:
        raise httpx.RemoteProtocolError(str(exc), request=request) from exc
    except h11.LocalProtocolError as exc:
        raise httpx.LocalProtocolError(str(exc), request=request) from exc
    except OSError as exc:  # ssl.SSLError (a certificate not trusted) is one too
        raise failure(str(exc) or type(exc).__name__, request=request) from exc


class _Body(httpx.AsyncByteStream):
    """A response's body; back in the pool only when read to its end."""

    def __init__(
        self,
        pool: ModelTransport,
        origin: Origin,
        conn: _Connection,
        request: httpx.Request,
        read_timeout: float | None,
    ) -> None:
        self._pool = pool
        self._origin = origin
        self._conn: _Connection | None = conn
        self._request = request
        self._read_timeout = read_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            raise httpx.StreamClosed()
        with _mapped(self._request, httpx.ReadTimeout, httpx.ReadError):
            while True:
                event = await conn.next_event(self._read_timeout)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.release(self._origin, conn)


class ModelTransport(httpx.AsyncBaseTransport):
    """Kept-alive HTTP/1.1 connections per origin, one request at a time on each."""

    def __init__(
        self, ssl_context: ssl.SSLContext | None = None, *, keepalive_s: float = KEEPALIVE_S
    ) -> None:
        self._ssl = ssl_context
        self._keepalive_s = keepalive_s
        self._idle: dict[Origin, list[_Connection]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: Timeouts = request.extensions.get("timeout", {})
        url = request.url
        origin = (url.raw_scheme, url.raw_host, url.port or (443 if url.scheme == "https" else 80))
        conn = self._reuse(origin) or await self._connect(origin, request, timeouts)
        try:
            head = await self._exchange(conn, request, timeouts)
        except BaseException:
            conn.drop()
            raise
        return httpx.Response(
            status_code=head.status_code,
            headers=head.headers.raw_items(),
            stream=_Body(self, origin, conn, request, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )

    def release(self, origin: Origin, conn: _Connection) -> None:
        # h11 says DONE on both sides only for a body read to its end on a connection
        # neither side asked to close.
        state = conn.h11
        idle = self._idle.setdefault(origin, [])
        done = state.our_state is h11.DONE and state.their_state is h11.DONE
        if done and len(idle) < IDLE_PER_ORIGIN:
            state.start_next_cycle()
            conn.idle_since = asyncio.get_running_loop().time()
            idle.append(conn)
            return
        conn.drop()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.drop()

    def _reuse(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        oldest = asyncio.get_running_loop().time() - self._keepalive_s
        while idle:
            conn = idle.pop()  # the most recently used first: the likeliest to be alive
            if conn.alive(oldest):
                return conn
            conn.drop()
        return None

    async def _connect(
        self, origin: Origin, request: httpx.Request, timeouts: Timeouts
    ) -> _Connection:
        scheme, raw_host, port = origin
        host = raw_host.decode("ascii")
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{scheme.decode()}://'.",
                request=request,
            )
        tls = await self._tls() if scheme == b"https" else None
        with _mapped(request, httpx.ConnectTimeout, httpx.ConnectError):
            async with asyncio.timeout(timeouts.get("connect")):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None, limit=READ_SIZE
                )
        return _Connection(reader, writer)

    async def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = await asyncio.to_thread(httpx.create_ssl_context)
        return self._ssl

    async def _exchange(
        self, conn: _Connection, request: httpx.Request, timeouts: Timeouts
    ) -> h11.Response:
        state, writer = conn.h11, conn.writer
        head = h11.Request(
            method=request.method, target=request.url.raw_path, headers=request.headers.raw
        )
        with _mapped(request, httpx.WriteTimeout, httpx.WriteError):
            writer.write(state.send(head) or b"")
            assert isinstance(request.stream, httpx.AsyncByteStream)
            async for chunk in request.stream:
                writer.write(state.send(h11.Data(data=chunk)) or b"")
            writer.write(state.send(h11.EndOfMessage()) or b"")
            async with asyncio.timeout(timeouts.get("write")):
                await writer.drain()
        with _mapped(request, httpx.ReadTimeout, httpx.ReadError):
            while True:
                event = await conn.next_event(timeouts.get("read"))
                if isinstance(event, h11.Response):
                    return event
                if not isinstance(event, h11.InformationalResponse):
                    raise httpx.RemoteProtocolError(
                        f"unexpected {type(event).__name__} before the response", request=request
                    )


def model_http_client(timeout: httpx.Timeout) -> httpx.AsyncClient:
    """The client the provider clients share: `ModelTransport` for every origin the
    environment sends direct, httpx's own proxy transport where a proxy is set."""
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else httpx.AsyncHTTPTransport(proxy=proxy)
        for pattern, proxy in get_environment_proxies().items()
    }
    return httpx.AsyncClient(timeout=timeout, transport=ModelTransport(), mounts=mounts)
