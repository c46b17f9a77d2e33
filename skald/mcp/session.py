"""One MCP session: the handshake, requests with timeouts, and what the server asks of us.

Rule: `connect()` returns a ready `McpSession` or raises `Disconnected`; from then on
every request has a timeout, and the first sign of a broken server (garbage, EOF, a
malformed answer, a failed handshake) closes the transport (kills and reaps a process)
and fails every waiting call with "connector '<name>' disconnected: <reason>".

How calls end:
- answered: the result struct (or `RemoteError` for a JSON-RPC error answer);
- timed out: `notifications/cancelled` goes to the server, `RequestTimeout` is raised,
  the session lives on;
- the awaiting task is cancelled (the member pressed Stop): `notifications/cancelled`
  goes to the server and the `CancelledError` propagates;
- the server goes away: `Disconnected`.

Server-to-client requests run in tasks of their own (an elicitation may wait for a
member for minutes) and are cancelled if the server cancels them or the session ends:
`elicitation/create` goes to `Handlers.elicit` (no handler: declined), `roots/list` is
answered from `Handlers.roots`, `ping` is answered, `sampling/createMessage` and
anything else are refused with a JSON-RPC error.

Which call asked: `Handlers.elicit` gets a `Related` naming the `context` of the
request the elicitation came with (`call_tool(context=...)`), where the transport can
tell (streamable HTTP: the request's POST stream; the GET stream relates to none).
stdio cannot tell (`known=False`): the caller decides, and must not guess between
several calls in flight.

Traps:
- Never await a server request's handler in the reader task: the server may need our
  answer to finish the very call we wait for (elicitation inside `tools/call`).
- Notifications from the server must not be able to grow memory: log records live in a
  bounded deque and are truncated; callbacks are the caller's to keep cheap.
- Lists are bounded across pages too (`Limits`: 512 entries, 4 MiB of JSON), checked on
  each page before it joins the list: the page limit alone (100 pages of up to 16 MiB)
  let a server make us keep gigabytes.
- Progress tokens are ours (never reused in one session) and unknown tokens are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from skald.mcp.errors import (
    Disconnected,
    ListTooLarge,
    RemoteError,
    RequestTimeout,
    SessionExpired,
    TransportClosed,
)
from skald.mcp.transport import Origin, Transport
from skald.mcp.wire import (
    INVALID_PARAMS,
    LATEST_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSIONS,
    CallToolResult,
    CancelledParams,
    ClientCapabilities,
    ElicitationCompleteParams,
    ElicitRequestParams,
    ElicitResult,
    GetPromptResult,
    Implementation,
    InitializeParams,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsResult,
    ListToolsResult,
    LoggingMessageParams,
    LogLevel,
    ProgressParams,
    Prompt,
    ReadResourceResult,
    RequestId,
    Resource,
    ResourceTemplate,
    ResourceUpdatedParams,
    Root,
    RpcError,
    RpcMessage,
    ServerCapabilities,
    Tool,
    to_builtins,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

CLIENT_INFO = Implementation(name="skald", version="1")
MAX_LOG_RECORDS = 200
MAX_LOG_CHARS = 4000
# A server that pages forever (or loops its cursor) is broken, not large.
MAX_PAGES = 100
# What one list (tools, resources, prompts) may hold, across its pages: a connector's
# files may be a member's (personal connectors), and what we keep of its lists stays in
# the server's memory while it runs (issue 20, item 5: 150 000 tools kept 205 MiB).
MAX_LIST_ITEMS = 512
MAX_LIST_BYTES = 4 * 1024 * 1024

ProgressCallback = Callable[[float, float | None, str | None], Any]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. `handshake` covers starting and `initialize`; `request` every other
    request; `tool_call` the default for `call_tool` (tools may run long)."""

    handshake: float = 30.0
    request: float = 60.0
    tool_call: float = 300.0


@dataclass(frozen=True, slots=True)
class Limits:
    """What a list may hold across its pages: `list_items` entries and `list_bytes` of
    JSON (its entries as the server sent them). Past either: `ListTooLarge`."""

    list_items: int = MAX_LIST_ITEMS
    list_bytes: int = MAX_LIST_BYTES


@dataclass(frozen=True, slots=True)
class LogRecord:
    level: LogLevel
    logger: str | None
    text: str  # the data, as JSON text when it is not a string, truncated


# The protocol's own bookkeeping, never a connector's news (and every `*/list_changed`).
# `notifications/resources/updated` is news, with a callback of its own.
BOOKKEEPING = frozenset(
    {
        "notifications/initialized",
        "notifications/progress",
        "notifications/message",
        "notifications/cancelled",
        "notifications/elicitation/complete",
        "notifications/tasks/status",
    }
)


def is_news(method: str) -> bool:
    """Whether a notification the session does not handle itself is a server's own news
    (`Handlers.on_event`): a `notifications/…` name that is no protocol bookkeeping."""
    return (
        method.startswith("notifications/")
        and method not in BOOKKEEPING
        and not method.endswith("/list_changed")
    )


@dataclass(slots=True)
class Handlers:
    """What the caller does when the server asks or tells something. All optional.

    - `elicit(params, related) -> ElicitResult`: form or URL elicitation (route it to
      the person whose call `related` names); None declines every elicitation.
      Cancelled when the server cancels the request.
    - `roots() -> list[Root]`: the roots offered; None answers an empty list.
    - `on_tools_changed()`: after `notifications/tools/list_changed` (refetch with
      `list_tools`); `on_resources_changed`/`on_prompts_changed` likewise.
    - `on_resource_updated(uri)`: a resource we subscribed to changed (read it again).
    - `on_log(record)`: each log notification (also kept in `McpSession.logs`).
    - `on_elicitation_complete(elicitation_id)`: a URL elicitation finished server-side.
    - `on_event(method, params)`: any other `notifications/*` the server sends (a
      connector's own news: a mail arrived, an event changed); `params` is its object.
    Callbacks may be plain functions or coroutine functions.
    """

    elicit: Callable[[ElicitRequestParams, Related], Awaitable[ElicitResult]] | None = None
    roots: Callable[[], Awaitable[list[Root]]] | None = None
    on_tools_changed: Callable[[], Any] | None = None
    on_resources_changed: Callable[[], Any] | None = None
    on_prompts_changed: Callable[[], Any] | None = None
    on_resource_updated: Callable[[str], Any] | None = None
    on_log: Callable[[LogRecord], Any] | None = None
    on_elicitation_complete: Callable[[str], Any] | None = None
    on_event: Callable[[str, dict[str, Any]], Any] | None = None


@dataclass(frozen=True, slots=True)
class Related:
    """The request of ours a server request came with, as far as the transport knows.

    `known` False (stdio): nothing tells. `known` True: `context` is what that request
    was given (`call_tool(context=...)`), None when it came with none of our requests
    (the GET stream) or with one given no context."""

    known: bool
    context: object | None = None


@dataclass(slots=True)
class _Pending:
    method: str
    future: asyncio.Future[dict[str, Any]]
    progress: ProgressCallback | None = None
    context: object | None = None
    token: RequestId | None = None


@dataclass(slots=True)
class _State:
    pending: dict[RequestId, _Pending] = field(default_factory=dict)
    progress: dict[RequestId, ProgressCallback] = field(default_factory=dict)
    serving: dict[RequestId, asyncio.Task[None]] = field(default_factory=dict)


async def connect(
    transport: Transport,
    *,
    name: str,
    handlers: Handlers | None = None,
    timeouts: Timeouts | None = None,
    client_info: Implementation = CLIENT_INFO,
    limits: Limits | None = None,
) -> McpSession:
    """Open the transport and do the handshake; `Disconnected` if either fails (the
    transport is then closed: a process is killed and reaped)."""
    session = McpSession(transport, name=name, handlers=handlers, timeouts=timeouts, limits=limits)
    try:
        await session._start(client_info)
    except BaseException:
        # A failed handshake: the server is broken (or we were cancelled): no grace.
        with contextlib.suppress(Exception):
            await session.transport.close(grace=False)
        await session.close()
        raise
    return session


class McpSession:
    """A live session with one server. Build it with `connect()`."""

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        handlers: Handlers | None = None,
        timeouts: Timeouts | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.name = name
        self.transport = transport
        self.handlers = handlers or Handlers()
        self.timeouts = timeouts or Timeouts()
        self.limits = limits or Limits()
        # Per list method, the last complete listing: (entries, bytes of JSON). What a
        # caller keeps of it is its own; this is the figure to account it by.
        self.listed: dict[str, tuple[int, int]] = {}
        self.logs: deque[LogRecord] = deque(maxlen=MAX_LOG_RECORDS)
        self.server_info: Implementation | None = None
        self.server_capabilities = ServerCapabilities()
        self.protocol_version: str | None = None
        self.instructions: str | None = None
        self._ids = itertools.count(1)
        self._state = _State()
        self._reader: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failure: Disconnected | None = None
        self._closed = False
        self._ended = asyncio.Event()

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the session is over (closed by us, or the server went away)."""
        return self._closed or self._failure is not None

    async def wait_closed(self) -> Disconnected | None:
        """Wait until the session is over (the server went away or `close()` was
        called); returns why when the server ended it. For supervisors."""
        await self._ended.wait()
        return self._failure

    @property
    def failure(self) -> Disconnected | None:
        """Why the session ended, when the server ended it."""
        return self._failure

    async def _start(self, client_info: Implementation) -> None:
        try:
            async with asyncio.timeout(self.timeouts.handshake):
                try:
                    await self.transport.open()
                except TransportClosed as exc:
                    raise Disconnected(self.name, exc.reason) from None
                self._reader = asyncio.create_task(self._read_loop(), name=f"mcp-{self.name}")
                params = InitializeParams(
                    protocol_version=LATEST_PROTOCOL_VERSION,
                    capabilities=self._capabilities(),
                    client_info=client_info,
                )
                raw = await self._request("initialize", to_builtins(params), timeout=None)
        except TimeoutError:
            reason = f"no answer to initialize within {self.timeouts.handshake:g} s"
            raise self._fail(reason) from None
        except RemoteError as exc:
            # connect() promises a session or Disconnected, whatever the refusal was.
            raise self._fail(f"the server refused to start a session: {exc.message}") from None
        try:
            result = msgspec.convert(raw, InitializeResult)
        except msgspec.ValidationError as exc:
            raise self._fail(f"protocol error: a malformed initialize answer ({exc})") from None
        if result.protocol_version not in PROTOCOL_VERSIONS:
            raise self._fail(
                f"protocol error: the server speaks protocol version "
                f"{result.protocol_version!r}, this client {', '.join(PROTOCOL_VERSIONS)}"
            )
        self.protocol_version = result.protocol_version
        self.server_info = result.server_info
        self.server_capabilities = result.capabilities
        self.instructions = result.instructions or None
        await self.transport.initialized(result.protocol_version)
        await self._notify("notifications/initialized", None)

    def _capabilities(self) -> ClientCapabilities:
        caps = ClientCapabilities(roots={"listChanged": False})
        if self.handlers.elicit is not None:
            caps.elicitation = {"form": {}, "url": {}}
        return caps

    async def close(self) -> None:
        """End the session: the transport is closed (process group killed and reaped,
        HTTP session deleted), waiting calls fail with `Disconnected`."""
        if self._closed:
            return
        self._closed = True
        self._ended.set()
        self._fail_pending(self._failure or Disconnected(self.name, "the session was closed"))
        for task in [*self._state.serving.values(), *self._tasks]:
            if task is not asyncio.current_task():
                task.cancel()
        if self._reader is not None and self._reader is not asyncio.current_task():
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        await self.transport.close()

    async def __aenter__(self) -> McpSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _fail(self, reason: str) -> Disconnected:
        """Mark the session dead with this reason (the first reason wins)."""
        if self._failure is None:
            self._failure = Disconnected(self.name, reason)
            self._fail_pending(self._failure)
        self._ended.set()
        return self._failure

    def _fail_pending(self, error: Exception, not_run: RequestId | None = None) -> None:
        """Fail every waiting request; `not_run` (the request the server refused for an
        unknown session) gets `SessionExpired`: only it is known not to have run."""
        for request_id, pending in self._state.pending.items():
            if pending.future.done():
                continue
            if request_id == not_run and isinstance(error, Disconnected):
                pending.future.set_exception(SessionExpired(self.name, error.reason))
            else:
                pending.future.set_exception(error)
        self._state.pending.clear()

    # -- requests ----------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None,  # noqa: ASYNC109 - ends in a remote cancel + RequestTimeout
        on_progress: ProgressCallback | None = None,
        context: object | None = None,
    ) -> dict[str, Any]:
        if self._failure is not None:
            raise Disconnected(self.name, self._failure.reason)
        if self._closed:
            raise Disconnected(self.name, "the session was closed")
        request_id: RequestId = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pending = _Pending(method, future, context=context)
        if on_progress is not None:
            params = dict(params or {})
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = request_id
            params["_meta"] = meta
            pending.token = request_id
            self._state.progress[request_id] = on_progress
        self._state.pending[request_id] = pending
        message = RpcMessage(id=request_id, method=method)
        if params is not None:
            message.params = params
        try:
            try:
                await self.transport.send(message)
            except TransportClosed as exc:
                raise self._fail(exc.reason) from None
            if timeout is None:
                return await future
            try:
                async with asyncio.timeout(timeout):
                    return await asyncio.shield(future)
            except TimeoutError:
                await self._cancel_remote(request_id, f"no answer within {timeout:g} s")
                raise RequestTimeout(self.name, method, timeout) from None
        except asyncio.CancelledError:
            # The caller gave up (Stop): tell the server, unless the answer already came.
            if not future.done():
                await asyncio.shield(self._cancel_remote(request_id, "cancelled by the user"))
            raise
        finally:
            self._state.pending.pop(request_id, None)
            if pending.token is not None:
                self._state.progress.pop(pending.token, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved: no "exception never retrieved" warning

    async def _cancel_remote(self, request_id: RequestId, reason: str) -> None:
        self._state.pending.pop(request_id, None)
        self.transport.forget(request_id)
        if self.closed:
            return
        params = CancelledParams(request_id=request_id, reason=reason)
        with contextlib.suppress(TransportClosed):
            await self._notify("notifications/cancelled", to_builtins(params))

    async def _notify(self, method: str, params: dict[str, Any] | None) -> None:
        message = RpcMessage(method=method)
        if params is not None:
            message.params = params
        try:
            await self.transport.send(message)
        except TransportClosed as exc:
            raise self._fail(exc.reason) from None

    async def _decode(self, raw: dict[str, Any], kind: type[T], method: str) -> T:
        try:
            return msgspec.convert(raw, kind)
        except msgspec.ValidationError as exc:
            # A well-formed envelope with a broken payload: the server is broken.
            raise await self._abort(
                f"protocol error: a malformed {method} answer ({exc})"
            ) from None

    async def _abort(self, reason: str, not_run: RequestId | None = None) -> Disconnected:
        """The server is broken or gone: close the transport (kill and reap), then fail
        the waiting calls, so whoever hears of it finds the process already gone."""
        if self._failure is None:
            self._failure = Disconnected(self.name, reason)
        failure = self._failure
        with contextlib.suppress(Exception):
            await self.transport.close(grace=False)
        self._fail_pending(failure, not_run)
        self._ended.set()
        return failure

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - see _request
    ) -> dict[str, Any]:
        """Any request by name; the raw result. Prefer the typed methods below."""
        return await self._request(method, params, timeout=timeout or self.timeouts.request)

    async def ping(self) -> None:
        await self._request("ping", None, timeout=self.timeouts.request)

    async def list_tools(self) -> list[Tool]:
        """Every tool, following `nextCursor` to the last page (`ListTooLarge` past the
        limits)."""
        return await self._list_all("tools/list", ListToolsResult, "tools", "tools")

    async def _list_all(
        self, method: str, kind: type[Any], key: str, noun: str, wire_key: str | None = None
    ) -> list[Any]:
        """Every page of a list, counted and measured page by page, before a page joins
        what is kept: a server cannot make us hold more than `Limits` of it."""
        items: list[Any] = []
        size = 0
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = {"cursor": cursor} if cursor is not None else None
            raw = await self._request(method, params, timeout=self.timeouts.request)
            listed = raw.get(wire_key or key)  # the JSON's name (camelCase) is counted
            if isinstance(listed, list):
                size += len(msgspec.json.encode(listed))
                self._check_list(method, noun, len(items) + len(listed), size)
            page = await self._decode(raw, kind, method)
            items.extend(getattr(page, key))
            if not isinstance(page.next_cursor, str) or not page.next_cursor:
                self.listed[method] = (len(items), size)
                return items
            cursor = page.next_cursor
        raise await self._abort(f"protocol error: {method} still paging after {MAX_PAGES} pages")

    def _check_list(self, method: str, noun: str, count: int, size: int) -> None:
        limits = self.limits
        if count > limits.list_items:
            problem = f"it lists more than {limits.list_items} {noun} (the limit)"
        elif size > limits.list_bytes:
            problem = f"its {noun} list is over {limits.list_bytes // 1024} KiB (the limit)"
        else:
            return
        self.listed.pop(method, None)
        raise ListTooLarge(self.name, method, problem)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - see _request
        context: object | None = None,
    ) -> CallToolResult:
        """Call a tool. `on_progress(progress, total, message)` receives the server's
        progress notifications. A tool's own failure is a result with `is_error`; a
        refused request raises `RemoteError`. Cancel the awaiting task to stop it.
        `context` is handed to `Handlers.elicit` for what the server asks within it."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        raw = await self._request(
            "tools/call",
            params,
            timeout=timeout or self.timeouts.tool_call,
            on_progress=on_progress,
            context=context,
        )
        return await self._decode(raw, CallToolResult, "tools/call")

    async def list_resources(self) -> list[Resource]:
        return await self._list_all("resources/list", ListResourcesResult, "resources", "resources")

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        return await self._list_all(
            "resources/templates/list",
            ListResourceTemplatesResult,
            "resource_templates",
            "resource templates",
            wire_key="resourceTemplates",
        )

    async def read_resource(self, uri: str) -> ReadResourceResult:
        raw = await self._request("resources/read", {"uri": uri}, timeout=self.timeouts.request)
        return await self._decode(raw, ReadResourceResult, "resources/read")

    @property
    def can_subscribe(self) -> bool:
        """Whether the server announced `resources.subscribe`."""
        caps = self.server_capabilities.resources
        return isinstance(caps, dict) and caps.get("subscribe") is True

    async def subscribe(self, uri: str) -> None:
        """`notifications/resources/updated` for `uri` then reach `on_resource_updated`."""
        await self._request("resources/subscribe", {"uri": uri}, timeout=self.timeouts.request)

    async def unsubscribe(self, uri: str) -> None:
        await self._request("resources/unsubscribe", {"uri": uri}, timeout=self.timeouts.request)

    async def list_prompts(self) -> list[Prompt]:
        return await self._list_all("prompts/list", ListPromptsResult, "prompts", "prompts")

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> GetPromptResult:
        params = {"name": name, "arguments": arguments or {}}
        raw = await self._request("prompts/get", params, timeout=self.timeouts.request)
        return await self._decode(raw, GetPromptResult, "prompts/get")

    async def set_log_level(self, level: LogLevel) -> None:
        """Ask the server to send log notifications from `level` up."""
        await self._request("logging/setLevel", {"level": level}, timeout=self.timeouts.request)

    def stderr_tail(self, n: int = 20) -> list[str]:
        return self.transport.stderr_tail(n)

    # -- the reader --------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                message, origin = await self.transport.receive_with_origin()
                if message.is_response:
                    self._on_response(message)
                elif message.is_request:
                    self._on_request(message, self._related(origin))
                else:
                    self._on_notification(message)
        except TransportClosed as exc:
            reason, not_run = exc.reason, exc.not_run
        except Exception as exc:  # a bug here must not leave callers waiting forever
            log.exception("mcp reader for %s failed", self.name)
            reason, not_run = f"client error: {type(exc).__name__}: {exc}", None
        # The server is gone or broken: reap it now, not when someone calls close().
        await self._abort(reason, not_run)
        await self.close()

    def _on_response(self, message: RpcMessage) -> None:
        assert not isinstance(message.id, msgspec.UnsetType)
        pending = self._state.pending.pop(message.id, None)
        if pending is None or pending.future.done():
            return  # late answer to a cancelled or timed-out request
        if not isinstance(message.error, msgspec.UnsetType):
            err = message.error
            pending.future.set_exception(
                RemoteError(self.name, pending.method, err.code, err.message, err.data or None)
            )
        elif isinstance(message.result, dict):
            pending.future.set_result(message.result)
        else:
            # Valid JSON-RPC says a response has one of them; this one has neither.
            pending.future.set_exception(
                self._fail(f"protocol error: the answer to {pending.method} has no result")
            )
            self._spawn(self._abort("protocol error: an answer without a result"))

    def _on_notification(self, message: RpcMessage) -> None:
        method = message.method
        params = message.params if isinstance(message.params, dict) else {}
        try:
            if method == "notifications/progress":
                progress = msgspec.convert(params, ProgressParams)
                callback = self._state.progress.get(progress.progress_token)
                if callback is not None:
                    total = progress.total if isinstance(progress.total, float | int) else None
                    text = progress.message if isinstance(progress.message, str) else None
                    self._call(callback, progress.progress, total, text)
            elif method == "notifications/message":
                entry = msgspec.convert(params, LoggingMessageParams)
                data = entry.data
                text = data if isinstance(data, str) else msgspec.json.encode(data).decode()
                logger = entry.logger if isinstance(entry.logger, str) else None
                record = LogRecord(entry.level, logger, text[:MAX_LOG_CHARS])
                self.logs.append(record)
                if self.handlers.on_log is not None:
                    self._call(self.handlers.on_log, record)
            elif method == "notifications/cancelled":
                cancelled = msgspec.convert(params, CancelledParams)
                task = self._state.serving.pop(cancelled.request_id, None)
                if task is not None:
                    task.cancel()
            elif method == "notifications/tools/list_changed":
                if self.handlers.on_tools_changed is not None:
                    self._call(self.handlers.on_tools_changed)
            elif method == "notifications/resources/list_changed":
                if self.handlers.on_resources_changed is not None:
                    self._call(self.handlers.on_resources_changed)
            elif method == "notifications/prompts/list_changed":
                if self.handlers.on_prompts_changed is not None:
                    self._call(self.handlers.on_prompts_changed)
            elif method == "notifications/resources/updated":
                updated = msgspec.convert(params, ResourceUpdatedParams)
                if self.handlers.on_resource_updated is not None:
                    self._call(self.handlers.on_resource_updated, updated.uri)
            elif method == "notifications/elicitation/complete":
                done = msgspec.convert(params, ElicitationCompleteParams)
                if self.handlers.on_elicitation_complete is not None:
                    self._call(self.handlers.on_elicitation_complete, done.elicitation_id)
            elif isinstance(method, str) and is_news(method) and self.handlers.on_event:
                # A server's own news (not the protocol's bookkeeping): the caller's.
                self._call(self.handlers.on_event, method, params)
            # Anything else (not a notification name at all) is ignored.
        except msgspec.ValidationError as exc:
            log.warning("mcp %s: malformed %s notification: %s", self.name, method, exc)
        except Exception:
            log.exception("mcp %s: a %s callback failed", self.name, method)

    def _call(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run a caller's callback; a coroutine runs in a task of its own, since it may
        well send a request whose answer this reader has to deliver (list_changed ->
        list_tools)."""
        result = callback(*args)
        if asyncio.iscoroutine(result):
            self._spawn(result)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _related(self, origin: Origin) -> Related:
        """Looked up now, while the related request still waits for its answer."""
        if not origin.known:
            return Related(known=False)
        pending = None if origin.request_id is None else self._state.pending.get(origin.request_id)
        return Related(known=True, context=None if pending is None else pending.context)

    def _on_request(self, message: RpcMessage, related: Related) -> None:
        assert not isinstance(message.id, msgspec.UnsetType)
        request_id = message.id
        task = asyncio.create_task(self._serve(message, related), name=f"mcp-{self.name}-serve")
        self._state.serving[request_id] = task
        task.add_done_callback(lambda _t: self._state.serving.pop(request_id, None))

    async def _serve(self, message: RpcMessage, related: Related) -> None:
        method = message.method
        params = message.params if isinstance(message.params, dict) else {}
        answer = RpcMessage(id=message.id)
        try:
            if method == "ping":
                answer.result = {}
            elif method == "roots/list":
                roots = await self.handlers.roots() if self.handlers.roots else []
                answer.result = to_builtins(ListRootsResult(roots=roots))
            elif method == "elicitation/create":
                answer.result = to_builtins(await self._elicit(params, related))
            elif method == "sampling/createMessage":
                answer.error = RpcError(
                    code=METHOD_NOT_FOUND,
                    message="This client does not offer sampling: the household's "
                    "assistant does not lend its model to connectors.",
                )
            else:
                answer.error = RpcError(
                    code=METHOD_NOT_FOUND, message=f"Method not supported: {method}"
                )
        except msgspec.ValidationError as exc:
            answer.error = RpcError(code=INVALID_PARAMS, message=f"Invalid params: {exc}")
        except asyncio.CancelledError:
            return  # the server cancelled it (or we are closing): no answer is due
        except Exception as exc:
            log.exception("mcp %s: answering %s failed", self.name, method)
            answer.error = RpcError(code=-32603, message=f"Internal error: {type(exc).__name__}")
        with contextlib.suppress(TransportClosed, Disconnected):
            if not self.closed:
                await self.transport.send(answer)

    async def _elicit(self, params: dict[str, Any], related: Related) -> ElicitResult:
        request = msgspec.convert(params, ElicitRequestParams)
        if self.handlers.elicit is None:
            return ElicitResult(action="decline")
        result = await self.handlers.elicit(request, related)
        if result.action == "accept" and request.mode == "form":
            result = ElicitResult(
                action="accept", content=apply_defaults(request, result.content or {})
            )
        elif result.action != "accept" or request.mode == "url":
            result = ElicitResult(action=result.action)  # no content outside a form accept
        return result


def apply_defaults(request: ElicitRequestParams, content: dict[str, Any]) -> dict[str, Any]:
    """SEP-1034: fields the person left out take the schema's `default`."""
    schema = request.requested_schema if isinstance(request.requested_schema, dict) else {}
    props = schema.get("properties")
    filled = dict(content)
    if isinstance(props, dict):
        for key, prop in props.items():
            if key not in filled and isinstance(prop, dict) and "default" in prop:
                filled[key] = prop["default"]
    return filled
