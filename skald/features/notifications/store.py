"""A member's notifications, their delivery preferences and their Web Push devices, in
the member's own owner database (so an encrypted member's are encrypted with the rest).

A notification row is written once and never rewritten except for `read_at` (the member
read it) and `delivered_at` (the delivery channels took it). A row with no
`delivered_at` is *held*: quiet hours, or a crash between writing and delivering; the
held-delivery loop finds it again, so nothing is lost and the in-app list always has it.

Trap: `delivered_at` is set only after the channels ran; two deliveries of one row are
kept apart by the caller's per-member lock, and `undelivered(ids)` re-reads inside it.
"""

from __future__ import annotations

import secrets
from typing import Any, Literal

import apsw
import msgspec

from skald.errors import InvalidInputError
from skald.store.columns import Col, Columns
from skald.store.database import Database, changed, fetch_all, fetch_one
from skald.store.migrations import Feature, Migration
from skald.store.registry import now_iso

__all__ = [
    "KEEP",
    "NOTIFICATIONS",
    "Notification",
    "NotificationPrefs",
    "NotificationStore",
    "PushDevice",
    "QuietHours",
    "Urgency",
]

Urgency = Literal["low", "normal", "high"]

# Rows kept per member: beyond this the oldest read ones go (then the oldest at all).
KEEP = 1000

_V1 = """
CREATE TABLE notifications(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    link TEXT,
    source TEXT NOT NULL,
    urgency TEXT NOT NULL CHECK (urgency IN ('low', 'normal', 'high')),
    read_at TEXT,
    delivered_at TEXT
);
CREATE INDEX notifications_held ON notifications(delivered_at) WHERE delivered_at IS NULL;
CREATE TABLE notification_prefs(
    id INTEGER PRIMARY KEY CHECK (id = 1),
    data TEXT NOT NULL
);
CREATE TABLE push_subscriptions(
    id TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL UNIQUE,
    p256dh TEXT NOT NULL,
    auth TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL
);
"""

NOTIFICATIONS = Feature(
    "notifications", (Migration(1, "notifications, preferences and push devices", _V1),)
)


class Notification(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    created_at: str
    title: str
    body: str
    link: str | None
    source: str
    urgency: Urgency
    read: bool
    delivered: bool


class QuietHours(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Deliveries wait from `start` to `end` (local "HH:MM"; over midnight when end < start)."""

    start: str
    end: str
    timezone: str | None = None  # IANA name; None: the household's


class NotificationPrefs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a member's notifications arrive, in order of preference, and when not."""

    channels: list[str] = msgspec.field(default_factory=lambda: ["web"])
    quiet: QuietHours | None = None


class PushDevice(msgspec.Struct, frozen=True, kw_only=True):
    """A browser's Web Push subscription (the keys are the browser's public ones)."""

    id: str
    endpoint: str
    p256dh: str
    auth: str
    label: str
    enabled: bool
    created_at: str


def _stamped(at: str | None) -> bool:
    """A `read_at` / `delivered_at` column: set once it happened."""
    return at is not None


_NOTE = Columns(
    Notification,
    "id",
    "created_at",
    "title",
    "body",
    "link",
    "source",
    "urgency",
    Col("read", sql="read_at", read=_stamped),
    Col("delivered", sql="delivered_at", read=_stamped),
)
_DEVICE = Columns(
    PushDevice,
    "id",
    "endpoint",
    "p256dh",
    "auth",
    "label",
    Col("enabled", read=bool),
    "created_at",
)


def _unread(c: apsw.Connection) -> int:
    row = fetch_one(c, "SELECT count(*) FROM notifications WHERE read_at IS NULL")
    return 0 if row is None else int(row[0])


class NotificationStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- notifications -----------------------------------------------------------------

    async def add(
        self, *, title: str, body: str, link: str | None, source: str, urgency: Urgency
    ) -> tuple[Notification, int]:
        """Write one notification (held until delivered); returns it and the unread count."""
        note_id = secrets.token_hex(8)

        def q(c: apsw.Connection) -> tuple[tuple[Any, ...], int]:
            c.execute(
                "INSERT INTO notifications(id, created_at, title, body, link, source, urgency) "
                "VALUES (?,?,?,?,?,?,?)",
                (note_id, now_iso(), title, body, link, source, urgency),
            )
            # Keep the newest KEEP rows: read ones go first, then the oldest at all.
            c.execute(
                "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications "
                "ORDER BY read_at IS NULL, seq DESC LIMIT -1 OFFSET ?)",
                (KEEP,),
            )
            row = fetch_one(c, f"SELECT {_NOTE.names} FROM notifications WHERE id=?", (note_id,))
            assert row is not None
            return row, _unread(c)

        row, unread = await self.db.transaction(q)
        return _NOTE.row(row), unread

    async def page(
        self, *, limit: int, before: str | None = None, unread_only: bool = False
    ) -> tuple[list[Notification], int]:
        """Newest first; `before`: an id of the last page (its older neighbours follow)."""

        def q(c: apsw.Connection) -> tuple[list[tuple[Any, ...]], int]:
            where, args = [], []
            if unread_only:
                where.append("read_at IS NULL")
            if before is not None:
                where.append("seq < (SELECT seq FROM notifications WHERE id=?)")
                args.append(before)
            sql = f"SELECT {_NOTE.names} FROM notifications"
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY seq DESC LIMIT ?"
            return fetch_all(c, sql, (*args, limit)), _unread(c)

        rows, unread = await self.db.call(q)
        return [_NOTE.row(r) for r in rows], unread

    async def get_many(self, ids: list[str]) -> list[Notification]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = await self.db.fetch_all(
            f"SELECT {_NOTE.names} FROM notifications WHERE id IN ({marks}) ORDER BY seq",
            tuple(ids),
        )
        return [_NOTE.row(r) for r in rows]

    async def unread(self) -> int:
        return await self.db.call(_unread)

    async def mark_read(self, ids: list[str]) -> tuple[int, int]:
        """Mark these read; returns (how many of them exist, unread count after)."""
        marks = ",".join("?" * len(ids))

        def q(c: apsw.Connection) -> tuple[int, int]:
            found = fetch_one(
                c, f"SELECT count(*) FROM notifications WHERE id IN ({marks})", tuple(ids)
            )
            c.execute(
                f"UPDATE notifications SET read_at=? WHERE read_at IS NULL AND id IN ({marks})",
                (now_iso(), *ids),
            )
            return (0 if found is None else int(found[0])), _unread(c)

        return await self.db.transaction(q)

    async def mark_all_read(self) -> int:
        def q(c: apsw.Connection) -> int:
            c.execute("UPDATE notifications SET read_at=? WHERE read_at IS NULL", (now_iso(),))
            return _unread(c)

        return await self.db.transaction(q)

    async def delete(self, note_id: str) -> tuple[bool, int]:
        def q(c: apsw.Connection) -> tuple[bool, int]:
            c.execute("DELETE FROM notifications WHERE id=?", (note_id,))
            return c.changes() > 0, _unread(c)

        return await self.db.transaction(q)

    async def held(self, *, before: str, limit: int = 200) -> list[str]:
        """Ids not delivered yet and created before `before` (ISO, UTC), oldest first."""
        rows = await self.db.fetch_all(
            "SELECT id FROM notifications WHERE delivered_at IS NULL AND created_at < ? "
            "ORDER BY seq LIMIT ?",
            (before, limit),
        )
        return [str(r[0]) for r in rows]

    async def undelivered(self, ids: list[str]) -> list[Notification]:
        """Those of `ids` still not delivered (read again: another delivery may have run)."""
        return [n for n in await self.get_many(ids) if not n.delivered]

    async def mark_delivered(self, ids: list[str]) -> None:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        await self.db.transaction(
            lambda c: c.execute(
                f"UPDATE notifications SET delivered_at=? WHERE delivered_at IS NULL "
                f"AND id IN ({marks})",
                (now_iso(), *ids),
            )
        )

    # -- preferences -------------------------------------------------------------------

    async def prefs(self) -> NotificationPrefs:
        row = await self.db.fetch_one("SELECT data FROM notification_prefs WHERE id=1")
        if row is None:
            return NotificationPrefs()
        return msgspec.json.decode(row[0], type=NotificationPrefs)

    async def save_prefs(self, prefs: NotificationPrefs) -> None:
        data = msgspec.json.encode(prefs).decode()
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO notification_prefs(id, data) VALUES (1, ?) "
                "ON CONFLICT(id) DO UPDATE SET data=excluded.data",
                (data,),
            )
        )

    # -- Web Push devices --------------------------------------------------------------

    async def add_device(
        self, *, endpoint: str, p256dh: str, auth: str, label: str, at_most: int
    ) -> PushDevice:
        """Subscribe a browser; the same endpoint again updates its keys and label. A new
        one past `at_most` devices is refused, counted in the write itself (parallel
        subscriptions cannot all pass a count read before)."""
        device_id = secrets.token_hex(8)

        def q(c: apsw.Connection) -> tuple[Any, ...]:
            known = fetch_one(c, "SELECT 1 FROM push_subscriptions WHERE endpoint=?", (endpoint,))
            count = fetch_one(c, "SELECT COUNT(*) FROM push_subscriptions")
            if known is None and count is not None and count[0] >= at_most:
                raise InvalidInputError(f"at most {at_most} devices receive notifications")
            c.execute(
                "INSERT INTO push_subscriptions(id, endpoint, p256dh, auth, label, enabled, "
                "created_at) VALUES (?,?,?,?,?,1,?) ON CONFLICT(endpoint) DO UPDATE SET "
                "p256dh=excluded.p256dh, auth=excluded.auth, label=excluded.label, enabled=1",
                (device_id, endpoint, p256dh, auth, label, now_iso()),
            )
            row = fetch_one(
                c,
                f"SELECT {_DEVICE.names} FROM push_subscriptions WHERE endpoint=?",
                (endpoint,),
            )
            assert row is not None
            return row

        return _DEVICE.row(await self.db.transaction(q))

    async def devices(self) -> list[PushDevice]:
        rows = await self.db.fetch_all(
            f"SELECT {_DEVICE.names} FROM push_subscriptions ORDER BY created_at, id"
        )
        return [_DEVICE.row(r) for r in rows]

    async def set_device_enabled(self, device_id: str, enabled: bool) -> bool:
        sql = "UPDATE push_subscriptions SET enabled=? WHERE id=?"
        return await self.db.transaction(lambda c: changed(c, sql, (int(enabled), device_id)))

    async def remove_device(self, device_id: str) -> bool:
        sql = "DELETE FROM push_subscriptions WHERE id=?"
        return await self.db.transaction(lambda c: changed(c, sql, (device_id,)))

    async def remove_endpoint(self, endpoint: str) -> bool:
        """The push service said the subscription is gone (404/410)."""
        sql = "DELETE FROM push_subscriptions WHERE endpoint=?"
        return await self.db.transaction(lambda c: changed(c, sql, (endpoint,)))
