"""Per-user event streams: every open tab or device of a member gets every event.

Events are tagged msgspec Structs; the WebSocket layer only serialises them. The ones
here are the server's own; a feature registers its own types (`skald_event_types`,
e.g. the notifications' and the tasks'), so this module imports no feature. Revocation
does not ride the stream as an ordinary event that might be dropped: `revoke_*` marks
each affected connection closed right away, before the caller responds.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Iterable
from typing import Annotated, Literal

import msgspec

from skald.agent.events import Event as AgentEventUnion
from skald.errors import ConfigError
from skald.store.conversations import Conversation, HistoryItem

QUEUE_LIMIT = 512


class Hello(msgspec.Struct, tag="hello", kw_only=True):
    user_id: str
    version: str


class Ping(msgspec.Struct, tag="ping"):
    t: float


RevokeCode = Literal[
    "signed_out", "signed_out_everywhere", "password_changed", "deactivated", "deleted"
]

# English for logs and API clients; the web UI translates by `code`.
REVOKE_REASONS: dict[str, str] = {
    "signed_out": "you signed out",
    "signed_out_everywhere": "you signed out everywhere",
    "password_changed": "your password was changed",
    "deactivated": "your account was deactivated",
    "deleted": "your account was deleted",
}


class SessionRevoked(msgspec.Struct, tag="session_revoked", kw_only=True):
    """This session is over for good: the client must go to the sign-in page."""

    code: RevokeCode
    reason: str


class UserUpdated(msgspec.Struct, tag="user_updated", kw_only=True):
    """The member's own account changed (name, locale, role): clients refresh `me`."""

    user_id: str


class ChatEvent(msgspec.Struct, tag="chat", kw_only=True):
    """A live event of the agent loop (token, tool call, approval, turn done...)."""

    event: AgentEventUnion


class UserMessage(msgspec.Struct, tag="user_message", kw_only=True):
    """A message the member sent, so their other tabs and devices show it too."""

    conversation_id: str
    item: HistoryItem


class ConversationUpdated(msgspec.Struct, tag="conversation_updated", kw_only=True):
    conversation: Conversation


class _WatchedFolder(msgspec.Struct, kw_only=True):
    """An event about the folder of a `watch`: `path` as the client sent it."""

    path: str


class Watching(_WatchedFolder, tag="watching"):
    """A `watch` was accepted: changes of the folder from now on are reported."""


class WatchRefused(_WatchedFolder, tag="watch_refused", kw_only=True):
    """A `watch` was refused (outside the member's places, missing, not a folder, too
    many watches, or no Files access); `code` is the error code the Files API would give."""

    code: str
    message: str


class DirChanged(_WatchedFolder, tag="dir_changed"):
    """A watched folder's listing changed (or it is gone)."""


class InboxChanged(msgspec.Struct, tag="inbox_changed", kw_only=True):
    """The member's Inbox gained or lost an item; `count` is how many wait now."""

    count: int


# Any event a member's stream carries: the built-in ones below, and those the features
# register (`skald_event_types`); the socket encodes each by its tag.
ServerEvent = msgspec.Struct

# The server's own events: the socket's, the chat's, the Files page's watches, the Inbox.
CORE_EVENTS: tuple[type[msgspec.Struct], ...] = (
    Hello,
    Ping,
    SessionRevoked,
    UserUpdated,
    ChatEvent,
    UserMessage,
    ConversationUpdated,
    Watching,
    WatchRefused,
    DirChanged,
    InboxChanged,
)


def event_kinds(registered: Iterable[type[msgspec.Struct]]) -> frozenset[type[msgspec.Struct]]:
    """The built-in events and the features' ones: each a tagged Struct, each tag once."""
    tags: dict[str, type[msgspec.Struct]] = {}
    for kind in (*CORE_EVENTS, *registered):
        tag = kind.__struct_config__.tag
        if not isinstance(tag, str):
            raise ConfigError(f"the event type {kind.__name__} has no tag")
        if tags.setdefault(tag, kind) is not kind:
            raise ConfigError(f"two event types are tagged {tag!r}")
    return frozenset(tags.values())


class Pong(msgspec.Struct, tag="pong"):
    t: float = 0.0


class Subscribe(msgspec.Struct, tag="subscribe"):
    pass


WatchPath = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]


class Watch(msgspec.Struct, tag="watch"):
    """Tell me when this folder's entries change (Files page; a few per connection)."""

    path: WatchPath


class Unwatch(msgspec.Struct, tag="unwatch"):
    path: WatchPath


ClientMessage = Pong | Subscribe | Watch | Unwatch


class Connection:
    """One open client. `queue` yields events; None means: close now."""

    _ids = itertools.count(1)

    def __init__(self, user_id: str, token_hash: str) -> None:
        self.id = next(self._ids)
        self.user_id = user_id
        self.token_hash = token_hash
        self.queue: asyncio.Queue[ServerEvent | None] = asyncio.Queue(QUEUE_LIMIT)
        self.closed = False
        self.revoked: RevokeCode | None = None

    def offer(self, event: ServerEvent) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            # A client this far behind is gone or stuck; it will catch up on reconnect.
            self.close()

    def close(self, revoked: RevokeCode | None = None) -> None:
        """Close; with `revoked`, tell the client its session is over (not a restart)."""
        if self.closed:
            return
        self.closed = True
        self.revoked = revoked
        # Make room so the goodbye always fits, then the sentinel.
        while self.queue.qsize() >= QUEUE_LIMIT - 1:
            self.queue.get_nowait()
        if revoked is not None:
            self.queue.put_nowait(SessionRevoked(code=revoked, reason=REVOKE_REASONS[revoked]))
        self.queue.put_nowait(None)


class EventHub:
    def __init__(self, kinds: Iterable[type[msgspec.Struct]] = ()) -> None:
        self._by_user: dict[str, set[Connection]] = defaultdict(set)
        # What may be published: a type nobody registered is a bug, found at its first use.
        self._kinds = event_kinds(kinds)

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
        if type(event) not in self._kinds:
            raise TypeError(
                f"{type(event).__name__} is not a registered event type (skald_event_types)"
            )
        for conn in list(self._by_user.get(user_id, ())):
            conn.offer(event)

    def connections(self, user_id: str) -> list[Connection]:
        return list(self._by_user.get(user_id, ()))

    def revoke_sessions(self, token_hashes: set[str], code: RevokeCode) -> None:
        for conns in list(self._by_user.values()):
            for conn in list(conns):
                if conn.token_hash in token_hashes:
                    conn.close(code)
                    self.disconnect(conn)

    def revoke_user(self, user_id: str, code: RevokeCode) -> None:
        for conn in self.connections(user_id):
            conn.close(code)
            self.disconnect(conn)

    def close_all(self) -> None:
        """Close every socket without revoking anything: clients reconnect after a restart
        and find out then whether their session survived it."""
        for user_id in list(self._by_user):
            for conn in self.connections(user_id):
                conn.close()
                self.disconnect(conn)

    @property
    def count(self) -> int:
        return sum(len(c) for c in self._by_user.values())
