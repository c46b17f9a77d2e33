"""Per-user event streams: every open tab or device of a member gets every event.

Events are msgspec tagged unions; the WebSocket layer only serialises them. Revocation
does not ride the stream as an ordinary event that might be dropped: `revoke_*` marks
each affected connection closed right away, before the caller responds.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict

import msgspec

QUEUE_LIMIT = 512


class Hello(msgspec.Struct, tag="hello", kw_only=True):
    user_id: str
    version: str


class Ping(msgspec.Struct, tag="ping"):
    t: float


class SessionRevoked(msgspec.Struct, tag="session_revoked"):
    reason: str


class UserUpdated(msgspec.Struct, tag="user_updated", kw_only=True):
    """The member's own account changed (name, locale, role): clients refresh `me`."""

    user_id: str


ServerEvent = Hello | Ping | SessionRevoked | UserUpdated


class Pong(msgspec.Struct, tag="pong"):
    t: float = 0.0


class Subscribe(msgspec.Struct, tag="subscribe"):
    pass


ClientMessage = Pong | Subscribe


class Connection:
    """One open client. `queue` yields events; None means: close now."""

    _ids = itertools.count(1)

    def __init__(self, user_id: str, token_hash: str) -> None:
        self.id = next(self._ids)
        self.user_id = user_id
        self.token_hash = token_hash
        self.queue: asyncio.Queue[ServerEvent | None] = asyncio.Queue(QUEUE_LIMIT)
        self.closed = False
        self.revoked: str | None = None

    def offer(self, event: ServerEvent) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            # A client this far behind is gone or stuck; it will catch up on reconnect.
            self.close()

    def close(self, reason: str | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        self.revoked = reason
        # Make room so the goodbye always fits, then the sentinel.
        while self.queue.qsize() >= QUEUE_LIMIT - 1:
            self.queue.get_nowait()
        if reason is not None:
            self.queue.put_nowait(SessionRevoked(reason=reason))
        self.queue.put_nowait(None)


class EventHub:
    def __init__(self) -> None:
        self._by_user: dict[str, set[Connection]] = defaultdict(set)

    def connect(self, user_id: str, token_hash: str) -> Connection:
        conn = Connection(user_id, token_hash)
        self._by_user[user_id].add(conn)
        return conn

    def disconnect(self, conn: Connection) -> None:
        conns = self._by_user.get(conn.user_id)
        if conns is not None:
            conns.discard(conn)
            if not conns:
                del self._by_user[conn.user_id]

    def publish(self, user_id: str, event: ServerEvent) -> None:
        for conn in list(self._by_user.get(user_id, ())):
            conn.offer(event)

    def connections(self, user_id: str) -> list[Connection]:
        return list(self._by_user.get(user_id, ()))

    def revoke_sessions(self, token_hashes: set[str], reason: str) -> None:
        for conns in list(self._by_user.values()):
            for conn in list(conns):
                if conn.token_hash in token_hashes:
                    conn.close(reason)
                    self.disconnect(conn)

    def revoke_user(self, user_id: str, reason: str) -> None:
        for conn in self.connections(user_id):
            conn.close(reason)
            self.disconnect(conn)

    def close_all(self, reason: str) -> None:
        for user_id in list(self._by_user):
            self.revoke_user(user_id, reason)

    @property
    def count(self) -> int:
        return sum(len(c) for c in self._by_user.values())
