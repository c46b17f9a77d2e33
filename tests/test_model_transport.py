"""The model requests' transport (`skald/llm/transport.py`) against servers that misbehave.

Each server here is a few lines of asyncio on 127.0.0.1 speaking HTTP/1.1 by hand, so a
test can close, stall, cut or refuse exactly where a real provider (or the network in
between) does. The client is always `model_http_client`, the one the provider clients
share in the server.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from certs import self_signed
from cryptography import x509

from skald.llm.discovery import list_models
from skald.llm.errors import LlmError
from skald.llm.transport import IDLE_PER_ORIGIN, ModelTransport, model_http_client
from skald.llm.wire import post_stream

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
# Generous, so a loaded CI machine never times a test out; SILENT is for the one test
# about silence.
WAIT = httpx.Timeout(30.0)
SILENT = httpx.Timeout(30.0, read=0.3)


def sse(*events: str, close: bool = False) -> bytes:
    """A whole streamed answer in chunked encoding; `close` adds `connection: close`."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    if close:
        head += b"connection: close\r\n"
    body = b""
    for event in events:
        data = f"data: {event}\n\n".encode()
        body += b"%x\r\n%s\r\n" % (len(data), data)
    return head + b"\r\n" + body + b"0\r\n\r\n"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """The request line; the head and a content-length body are read and dropped."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return head.split(b"\r\n", 1)[0]


class Server:
    """Calls `answer` for every request on every connection until it returns False."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.request_lines: list[bytes] = []
        self.hung_up = asyncio.Event()  # a client closed a connection the server held
        self._open: dict[asyncio.StreamWriter, asyncio.Task[object]] = {}

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._open[writer] = task
        try:
            while True:
                self.request_lines.append(await read_request(reader))
                if not await self.answer(reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            self.hung_up.set()
        finally:
            self._open.pop(writer, None)
            writer.close()

    async def close(self) -> None:
        """End the connections still open (kept alive by a client), each by its EOF."""
        open_now = dict(self._open)
        for writer in open_now:
            writer.close()
        if open_now:
            await asyncio.wait(open_now.values(), timeout=5)


@asynccontextmanager
async def serving(
    answer: Answer, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[Server, str]]:
    server = Server(answer)
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0, ssl=tls)
    port = listener.sockets[0].getsockname()[1]
    scheme = "https" if tls else "http"
    try:
        yield server, f"{scheme}://127.0.0.1:{port}/v1/chat/completions"
    finally:
        listener.close()
        await server.close()


def answering(*replies: bytes) -> Answer:
    """Each request gets the next reply (the last one repeats); the connection stays."""
    sent = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        nonlocal sent
        writer.write(replies[min(sent, len(replies) - 1)])
        sent += 1
        await writer.drain()
        return True

    return answer


async def lines_of(http: httpx.AsyncClient, url: str) -> list[str]:
    async with http.stream("POST", url, content=b'{"stream":true}') as response:
        response.raise_for_status()
        return [line async for line in response.aiter_lines() if line]


async def model_lines(http: httpx.AsyncClient, url: str, limits: httpx.Timeout = WAIT) -> list[str]:
    """The lines of an answer asked for as a provider client asks (`wire.post_stream`,
    which hands the request to the client's transport for the URL itself)."""
    body = b'{"stream":true}'
    async with post_stream(
        http, url, headers={}, body=body, http_timeout=limits, provider="p", secrets=()
    ) as response:
        return [line async for line in response.aiter_lines() if line]


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


async def test_answers_read_to_their_end_share_one_kept_alive_connection(
    no_proxies: object,
) -> None:
    async with (
        serving(answering(sse("one", "two"))) as (server, url),
        model_http_client(WAIT) as http,
    ):
        for _ in range(3):
            assert await lines_of(http, url) == ["data: one", "data: two"]
    assert server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_never_sent_a_request(
    no_proxies: object,
) -> None:
    async def answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(sse("hello"))  # no `connection: close`: the client believes it may reuse
        await writer.drain()
        return False

    async with serving(answer_then_close) as (server, url), model_http_client(WAIT) as http:
        assert await lines_of(http, url) == ["data: hello"]
        await asyncio.sleep(0.1)  # the server's FIN reaches the idle connection
        assert await lines_of(http, url) == ["data: hello"]
    assert server.connections == 2


async def test_an_answer_left_unread_drops_its_connection(no_proxies: object) -> None:
    first = True

    async def stream_forever_once(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        nonlocal first
        if not first:
            return await answering(sse("fresh"))(reader, writer)
        first = False
        writer.write(sse("thinking")[: -len(b"0\r\n\r\n")])  # the body never ends
        await writer.drain()
        await reader.read(1)  # until the client hangs up
        raise ConnectionResetError

    async with serving(stream_forever_once) as (server, url), model_http_client(WAIT) as http:
        async with http.stream("POST", url, content=b"{}") as response:
            async for line in response.aiter_lines():
                assert line == "data: thinking"
                break
        await asyncio.wait_for(server.hung_up.wait(), 5)  # what stops a provider's tokens
        assert await lines_of(http, url) == ["data: fresh"]
    assert server.connections == 2


async def test_a_connection_idle_past_the_keep_alive_is_closed_not_reused(
    no_proxies: object,
) -> None:
    # A NAT or load balancer may forget an idle connection without a word; sending into
    # it would wait out the silence timeout. httpx's own pool closes them after 5 s.
    async with (
        serving(answering(sse("hi"))) as (server, url),
        httpx.AsyncClient(transport=ModelTransport(keepalive_s=1.0), timeout=WAIT) as http,
    ):
        assert await lines_of(http, url) == ["data: hi"]
        assert await lines_of(http, url) == ["data: hi"]  # at once: the same connection
        assert server.connections == 1
        await asyncio.sleep(1.5)
        assert await lines_of(http, url) == ["data: hi"]
        await asyncio.wait_for(server.hung_up.wait(), 5)  # the stale one was closed
    assert server.connections == 2


async def test_an_answer_saying_connection_close_is_not_reused(no_proxies: object) -> None:
    async with (
        serving(answering(sse("bye", close=True))) as (server, url),
        model_http_client(WAIT) as http,
    ):
        assert await lines_of(http, url) == ["data: bye"]
        assert await lines_of(http, url) == ["data: bye"]
    assert server.connections == 2


async def test_ten_answers_at_once_take_ten_connections_and_the_next_ten_reuse_them(
    no_proxies: object,
) -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)  # all ten are in flight together
        return await answering(sse("a", "b"))(reader, writer)

    async with serving(slow) as (server, url), model_http_client(WAIT) as http:
        for _ in range(2):
            results = await asyncio.gather(*(lines_of(http, url) for _ in range(10)))
            assert results == [["data: a", "data: b"]] * 10
    assert server.connections == 10


async def test_the_pool_keeps_at_most_its_share_of_idle_connections(no_proxies: object) -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        return await answering(sse("a"))(reader, writer)

    many = IDLE_PER_ORIGIN + 4
    async with serving(slow) as (server, url), model_http_client(WAIT) as http:
        await asyncio.gather(*(lines_of(http, url) for _ in range(many)))
        await asyncio.gather(*(lines_of(http, url) for _ in range(many)))
    # The first round opened `many`; the second reused the ones kept and opened the rest.
    assert server.connections == many + (many - IDLE_PER_ORIGIN)


@pytest.mark.parametrize("before", [b"", sse()[: -len(b"0\r\n\r\n")]], ids=["no head", "head"])
async def test_silence_before_or_after_the_head_is_a_read_timeout(
    no_proxies: object, before: bytes
) -> None:
    async def then_silence(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(before)
        await writer.drain()
        await reader.read(1)
        return False

    async with serving(then_silence) as (_, url), model_http_client(SILENT) as http:
        with pytest.raises(httpx.ReadTimeout):
            await lines_of(http, url)
    # A provider client's request carries its own timeouts to the transport.
    async with serving(then_silence) as (_, url), model_http_client(WAIT) as http:
        with pytest.raises(LlmError) as failed:
            async with asyncio.timeout(10):  # not the request's: the test's own limit
                await model_lines(http, url, SILENT)
        assert failed.value.kind == "timeout"


async def test_a_body_cut_short_is_a_protocol_error_not_a_short_answer(no_proxies: object) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\ndata: partial\n\n")
        await writer.drain()
        return False

    async with serving(cut) as (_, url), model_http_client(WAIT) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await lines_of(http, url)


async def test_a_closed_port_is_a_connect_error(no_proxies: object) -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    async with model_http_client(WAIT) as http:
        with pytest.raises(httpx.ConnectError):
            await lines_of(http, f"http://127.0.0.1:{port}/v1/chat/completions")


async def test_garbage_instead_of_http_is_a_protocol_error(no_proxies: object) -> None:
    async with (
        serving(answering(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")) as (_, url),
        model_http_client(WAIT) as http,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await lines_of(http, url)


async def test_an_environment_proxy_still_carries_the_request_and_no_proxy_goes_direct(
    no_proxies: pytest.MonkeyPatch,
) -> None:
    async with (
        serving(answering(sse("direct"))) as (origin, url),
        serving(answering(sse("proxied"))) as (proxy, proxy_url),
    ):
        no_proxies.setenv("HTTP_PROXY", proxy_url.rsplit("/v1", 1)[0])
        async with model_http_client(WAIT) as http:
            assert await lines_of(http, url) == ["data: proxied"]
            assert await model_lines(http, url) == ["data: proxied"]
        # A proxy is asked for the whole URL: the request went through httpx's proxy.
        assert proxy.request_lines == [f"POST {url} HTTP/1.1".encode()] * 2
        assert origin.connections == 0

        no_proxies.setenv("NO_PROXY", "127.0.0.1")
        async with model_http_client(WAIT) as http:
            assert isinstance(http._transport_for_url(httpx.URL(url)), ModelTransport)
            assert await lines_of(http, url) == ["data: direct"]
            assert await model_lines(http, url) == ["data: direct"]
        assert origin.request_lines == [b"POST /v1/chat/completions HTTP/1.1"] * 2


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    folder = tmp_path_factory.mktemp("model-tls")
    cert, key = self_signed(folder, "model", alt=x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return cert, server


async def test_https_trusts_the_authority_the_environment_names_and_no_other(
    no_proxies: pytest.MonkeyPatch, certificate: tuple[Path, ssl.SSLContext]
) -> None:
    cert, server_tls = certificate
    async with serving(answering(sse("secret")), tls=server_tls) as (server, url):
        no_proxies.delenv("SSL_CERT_FILE", raising=False)
        no_proxies.delenv("SSL_CERT_DIR", raising=False)
        async with model_http_client(WAIT) as http:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await lines_of(http, url)
        assert server.request_lines == []  # nothing was sent to a server not trusted

        no_proxies.setenv("SSL_CERT_FILE", str(cert))
        async with model_http_client(WAIT) as http:
            assert await lines_of(http, url) == ["data: secret"]
            assert await lines_of(http, url) == ["data: secret"]
        # One kept-alive connection: the refused handshake never became one.
        assert server.connections == 1


async def test_a_provider_check_names_an_untrusted_certificate_not_a_missing_server(
    no_proxies: pytest.MonkeyPatch, certificate: tuple[Path, ssl.SSLContext]
) -> None:
    no_proxies.delenv("SSL_CERT_FILE", raising=False)
    no_proxies.delenv("SSL_CERT_DIR", raising=False)
    async with (
        serving(answering(sse()), tls=certificate[1]) as (_, url),
        model_http_client(WAIT) as http,
    ):
        base = url.removesuffix("/chat/completions")
        check = await list_models("openai_compatible", base, None, http)
    assert check.ok is False
    assert "certificate this computer does not trust" in check.message
    assert "SSL_CERT_FILE" in check.message


async def test_a_long_response_head_is_read_as_httpcore_read_it(no_proxies: object) -> None:
    # Some gateways send many or long headers; h11's own limit is 16 KiB.
    cookie = b"set-cookie: " + b"x" * 40_000 + b"\r\n"
    long_head = sse("fine").replace(b"\r\n\r\n", b"\r\n" + cookie + b"\r\n", 1)

    async def in_two_parts(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(long_head[:30_000])  # the client holds an incomplete head of 30 KB
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(long_head[30_000:])
        await writer.drain()
        return True

    async with serving(in_two_parts) as (_, url), model_http_client(WAIT) as http:
        assert await lines_of(http, url) == ["data: fine"]
