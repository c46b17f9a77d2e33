"""HTTP plumbing shared by the provider clients: one streamed POST, SSE framing, errors.

Both wire formats stream Server-Sent Events over a plain POST, fail with a JSON error
body, and must turn network trouble into a retriable `LlmError` so the catalogue can
fall back to the next model.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

# The decoder itself (not `EventSource`, which insists on the content type and drops a
# last event without its blank line); pinned below 0.5 in pyproject.toml for that.
from httpx_sse._decoders import SSEDecoder

from skald.llm.errors import ErrorKind, LlmError, error_for_status
from skald.llm.transport import model_http_client
from skald.llm.types import StreamEvent

# Silence: how long a provider may send nothing (before the first token, or between
# two) before the request counts as failed. Local models may think for minutes before
# the first token (a long prompt on a CPU); hosted services answer quickly or are in
# trouble, and then the next model should get its turn. Each kind has its default
# (`ProviderType.silence_timeout_s`), each provider may set its own; connecting should
# be quick or it is not there.
SILENCE_LOCAL_S = 300
SILENCE_HOSTED_S = 120


def timeout_for(silence_s: float) -> httpx.Timeout:
    return httpx.Timeout(connect=10.0, read=silence_s, write=60.0, pool=30.0)


DEFAULT_TIMEOUT = timeout_for(SILENCE_LOCAL_S)


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str  # "message" when the server named none
    data: str


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[SseEvent]:
    """Frame lines into events with `httpx_sse`'s decoder (the one SSE reader of Skald,
    shared with the MCP client); events without data (only an `id:` or `retry:`) are
    skipped: no provider means anything by them."""
    decoder = SSEDecoder()
    async for line in lines:
        sse = decoder.decode(line)
        if sse is not None and sse.data:
            yield SseEvent(sse.event or "message", sse.data)
    # A server that closes without the final blank line still meant its last event.
    sse = decoder.decode("")
    if sse is not None and sse.data:
        yield SseEvent(sse.event or "message", sse.data)


async def drain(events: AsyncIterator[SseEvent], seconds: float = 1.0) -> None:
    """Read what follows the final event (normally just the end of the body), so the
    connection goes back to the pool instead of being dropped; a server that keeps the
    stream open after its last event is not waited for."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(seconds):
            async for _ in events:
                pass


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Some servers echo the key they rejected; it must not reach logs or users."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def error_detail(body: bytes) -> str:
    """The human part of an error body, whichever of the usual shapes it has."""
    try:
        data: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body.decode("utf-8", "replace").strip()[:300] or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, str):  # Ollama, llama.cpp: {"error": "..."}
            return err
        if isinstance(err, dict):
            for key in ("message", "detail"):
                if isinstance(err.get(key), str):
                    return str(err[key])
        if isinstance(data.get("detail"), str):  # FastAPI-based servers (vLLM)
            return str(data["detail"])
    return body.decode("utf-8", "replace").strip()[:300]


def network_error(provider: str, exc: httpx.HTTPError, secrets: Iterable[str | None]) -> LlmError:
    # A URL with no scheme or an unknown one will not get better by trying again.
    retriable = not isinstance(exc, httpx.UnsupportedProtocol)
    detail = redact(str(exc) or type(exc).__name__, secrets)
    kind: ErrorKind = (
        "timeout"
        if isinstance(exc, httpx.TimeoutException)
        else "interrupted"
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError)
        else "unreachable"
    )
    return LlmError(f"{provider}: {type(exc).__name__}: {detail}", retriable=retriable, kind=kind)


@asynccontextmanager
async def post_stream(
    http: httpx.AsyncClient,
    url: str,
    *,
    headers: dict[str, str],
    body: bytes,
    http_timeout: httpx.Timeout | float,
    provider: str,
    secrets: tuple[str | None, ...],
) -> AsyncIterator[httpx.Response]:
    """POST and hand over a 2xx streaming response; every failure becomes an `LlmError`.

    Leaving the block (normally, by an error or by cancellation) closes the response,
    which drops the connection if the body was not read to the end: that is what stops
    the provider generating (and billing) tokens nobody will read.

    The request goes straight to the client's transport for `url`: what `http.stream`
    adds around that call (an auth flow, a redirect loop, and a cookie jar that parses
    every response's headers through `http.cookiejar`) does nothing for a model request
    but cost the turn about a tenth of the event loop's time before the request left
    (bench/README.md, goal 4). The request is built as `http.stream` builds it: the
    client's default headers under ours, and the timeouts. Trap: no cookie a provider
    sets is kept or sent back (no model API needs one), and redirects are not followed
    (httpx's default too: a 3xx is an error below).
    """
    if http.is_closed:  # as `http.stream` says it
        raise RuntimeError("Cannot send a request, as the client has been closed.")
    merged = httpx.Headers(http.headers)
    merged.update({"content-type": "application/json", "accept": "text/event-stream"})
    merged.update(headers)
    timeouts = {"timeout": httpx.Timeout(http_timeout).as_dict()}
    try:
        request = httpx.Request("POST", url, headers=merged, content=body, extensions=timeouts)
        # The mounts' choice (a proxy from the environment, or the model transport):
        # httpx keeps it private; taking it keeps one reading of the mounts.
        response = await http._transport_for_url(request.url).handle_async_request(request)
        response.request = request
        try:
            if not 200 <= response.status_code < 300:
                raw = await response.aread()
                detail = redact(error_detail(raw), secrets)
                whole = redact(raw.decode("utf-8", "replace")[:2000], secrets)
                raise error_for_status(response.status_code, provider, detail, whole)
            if response.headers.get("content-type", "").startswith("application/json"):
                # The server ignored `stream: true` or wrapped an error in a 200.
                detail = error_detail(await response.aread())
                raise LlmError(
                    f"{provider} did not stream: {redact(detail, secrets)}", retriable=False
                )
            yield response
        finally:
            await response.aclose()
    except httpx.HTTPError as exc:
        raise network_error(provider, exc, secrets) from exc
    except httpx.InvalidURL as exc:
        raise LlmError(
            f"{provider}: invalid URL: {exc}", retriable=False, kind="unreachable"
        ) from exc


class StreamingClient(abc.ABC):
    """What both provider clients share: the HTTP client (their own, made on first use,
    or the caller's, which they never close), the key kept out of `repr`, and one
    streamed POST whose body `_events` parses into typed events."""

    provider_name: str

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        http: httpx.AsyncClient | None,
        timeout: httpx.Timeout | float,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
        self._http = http
        self._owns_http = http is None
        self._timeout = timeout

    async def aclose(self) -> None:
        """Close the HTTP client if this object made it (a shared one belongs to the caller)."""
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _post(
        self, path: str, headers: dict[str, str], body: bytes
    ) -> AsyncIterator[StreamEvent]:
        if self._http is None:
            self._http = model_http_client(DEFAULT_TIMEOUT)
        async with post_stream(
            self._http,
            f"{self.base_url}{path}",
            headers=headers,
            body=body,
            http_timeout=self._timeout,
            provider=self.provider_name,
            secrets=(self._api_key,),
        ) as response:
            async for event in self._events(response):
                yield event

    @abc.abstractmethod
    def _events(self, response: httpx.Response) -> AsyncIterator[StreamEvent]:
        """The provider's own reading of its event stream (each client has one)."""

    # A stream garbled or cut off mid-answer is worth another try (`interrupted`).
    def _malformed(self) -> LlmError:
        message = f"{self.provider_name} sent a malformed stream event"
        return LlmError(message, retriable=True, kind="interrupted")

    def _ended_early(self) -> LlmError:
        message = f"{self.provider_name}: the stream ended before the model finished"
        return LlmError(message, retriable=True, kind="interrupted")

    def _in_stream(self, what: str, status: int | None) -> LlmError:
        """An error event in the stream (`what` it says, the key redacted): as the HTTP
        `status` it names, else the provider's trouble, not the request's, worth another
        try."""
        detail = redact(f"error in the stream: {what}", (self._api_key,))
        if status is None:
            return LlmError(f"{self.provider_name}: {detail}", retriable=True)
        return error_for_status(status, self.provider_name, detail)


def decode_arguments(text: str) -> dict[str, Any]:
    """Tool arguments as the model wrote them; broken JSON is handed on, not fatal.

    Models do emit truncated or invalid JSON; the agent loop reports `_raw` back to the
    model as a tool error so it can try again, instead of the whole turn crashing.
    """
    if not text.strip():
        return {}  # a tool without parameters: several servers send ""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}
