"""Health (public) and the per-user WebSocket event stream."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Annotated, Any

import msgspec
from litestar import WebSocket, get, websocket
from litestar.di import NamedDependency
from litestar.exceptions import WebSocketDisconnect
from litestar.params import QueryParameter

from skald import __version__
from skald.api.deps import AnyRequest, AuthSocket
from skald.api.schemas import Health
from skald.api.security import SESSION_COOKIE
from skald.core.events import (
    ClientMessage,
    Connection,
    DirChanged,
    Hello,
    Ping,
    Unwatch,
    Watch,
    Watching,
    WatchRefused,
)
from skald.core.sessions import SessionManager
from skald.errors import SkaldError
from skald.files.tools import FILES
from skald.files.watch import DirWatcher
from skald.permissions import ADMIN_SYSTEM
from skald.plugins.facade import Server  # Litestar reads the annotations

# A client that has not answered two heartbeats (`server.heartbeat_s`) is gone
# (sleeping laptop, lost Wi-Fi).
DEAD_AFTER_BEATS = 2.5
CLOSE_REVOKED = 4401
# "Service restart": the client should reconnect shortly.
CLOSE_RESTART = 1012
# The client answered no ping for too long (a "timeout", as HTTP's 408): it may
# reconnect at once; nothing is wrong with the server.
CLOSE_MISSED_PINGS = 4408

_encode = msgspec.json.Encoder().encode
_decode_client = msgspec.json.Decoder(ClientMessage).decode


@get("/api/health", opt={"public": True})
async def health(
    server: NamedDependency[Server],
    request: AnyRequest,
    details: Annotated[bool, QueryParameter()] = False,
) -> Health:
    """Public: status, version, reasons (counts only). `?details=true` from a signed-in
    administrator adds the features' figures; the session is only looked at then, so
    the page's polling never touches (and so never keeps alive) an idle session."""
    status, reasons = server.health()
    admin = await _admin_details(server, request) if details else None
    return Health(
        status="ok" if status == "ok" else "degraded",
        version=__version__,
        uptime_s=round(time.time() - server.started_at, 1),
        started_at=server.started_at,
        reasons=reasons,
        docker=server.docker_state,
        admin=admin,
    )


async def _admin_details(server: Server, request: AnyRequest) -> dict[str, Any] | None:
    token = request.cookies.get(SESSION_COOKIE)
    principal = await server.state(SessionManager).resolve(token) if token else None
    if principal is None or not principal.can(ADMIN_SYSTEM):
        return None  # the public answer, as without `details`
    return server.plugins.health_details(server)


async def _pump_out(socket: WebSocket[Any, Any, Any], conn: Connection) -> None:
    while True:
        event = await conn.queue.get()
        if event is None:
            return
        await socket.send_text(_encode(event).decode())


async def _pump_in(
    socket: WebSocket[Any, Any, Any],
    last_seen: list[float],
    conn: Connection,
    watcher: DirWatcher | None,
) -> None:
    while True:
        text = await socket.receive_text()
        last_seen[0] = time.monotonic()
        try:
            message = _decode_client(text)
        except msgspec.DecodeError:  # also covers ValidationError
            continue  # unknown or malformed client messages are ignored, not fatal
        if isinstance(message, Watch):
            conn.offer(await _watch(watcher, message.path))
        elif isinstance(message, Unwatch) and watcher is not None:
            watcher.unwatch(message.path)


async def _watch(watcher: DirWatcher | None, path: str) -> Watching | WatchRefused:
    if watcher is None:
        return WatchRefused(path=path, code="forbidden", message="your role has no Files access")
    try:
        await watcher.watch(path)
    except SkaldError as exc:
        return WatchRefused(path=path, code=exc.code, message=str(exc))
    return Watching(path=path)


async def _heartbeat(conn: Connection, last_seen: list[float], every_s: float) -> bool:
    """Ping every `every_s`; returns True when the client stopped answering."""
    while True:
        await asyncio.sleep(every_s)
        if time.monotonic() - last_seen[0] > DEAD_AFTER_BEATS * every_s:
            conn.close()
            return True
        conn.offer(Ping(t=time.time()))


@websocket("/api/ws")
async def events(socket: AuthSocket, server: NamedDependency[Server]) -> None:
    principal = socket.user
    await socket.accept()
    conn = server.events.connect(principal.user.id, principal.token_hash)
    conn.offer(Hello(user_id=principal.user.id, version=__version__))
    last_seen = [time.monotonic()]
    # Folder watches of the Files page, polled while the socket is open.
    watcher = None
    if principal.can(FILES):
        router = server.router(principal.user, principal.role)
        watcher = DirWatcher(router, lambda path: conn.offer(DirChanged(path=path)))
    tasks = [
        asyncio.create_task(_pump_out(socket, conn)),
        asyncio.create_task(_pump_in(socket, last_seen, conn, watcher)),
        heartbeat := asyncio.create_task(
            _heartbeat(conn, last_seen, server.config.server.heartbeat_s)
        ),
    ]
    if watcher is not None:
        tasks.append(asyncio.create_task(watcher.run()))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if watcher is not None:
            watcher.clear()
        server.events.disconnect(conn)
        missed = heartbeat.done() and not heartbeat.cancelled() and heartbeat.result() is True
        code = CLOSE_REVOKED if conn.revoked else CLOSE_MISSED_PINGS if missed else CLOSE_RESTART
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
            await socket.close(code=code)


ROUTES = [health, events]
