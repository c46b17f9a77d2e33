"""Connector events: what a connector's server tells us on its own (a mail arrived, an
event moved), kept in the member's OWN owner database until event triage reads it; and
the structured notifications triage sent about them (`read_notification`).

Rule: an event is one MCP notification the server emitted that is news, not protocol
bookkeeping (`skald.mcp.session.is_news`), or a `notifications/resources/updated` for a
resource we subscribed to. It is stored in the database of the member the instance
works for (a personal connector: its owner; a household one: every unlocked member who
switched it on, each their own copy), never in the registry, and never in memory only.
Rows are bounded: `KEEP_EVENTS` per member (oldest first), `MAX_AGE_DAYS` old at most,
each field cut to its limit; an instance sending more than `RATE_PER_MINUTE` in a minute
has the rest dropped (a diagnostics line says so).

Rule: `triaged_at` NULL is pending. Triage marks a batch triaged after the model saw it,
whatever it decided; a failed model call leaves the batch pending for the next pass.

Trap: everything in an event comes from outside (a mail's subject is whatever its
sender wrote). It is data for the triage model, never instructions: the prompt says so,
and `detail` is JSON text, cut, never rendered as markup.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import apsw
import msgspec

from skald.store.columns import Col, Columns
from skald.store.database import Database
from skald.store.migrations import Migration

__all__ = [
    "EVENTS_MIGRATION",
    "EventNotification",
    "EventStore",
    "NewEvent",
    "PendingEvent",
    "event_from",
]

KEEP_EVENTS = 1000
MAX_AGE_DAYS = 14
KEEP_NOTIFICATIONS = 500
RATE_PER_MINUTE = 120
MAX_SUMMARY = 500
MAX_DETAIL = 4000
MAX_KIND = 80
MAX_REFS = 12
MAX_REF = 300

_OWNER_V2 = """
CREATE TABLE connector_events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    server TEXT NOT NULL,
    kind TEXT NOT NULL,
    summary TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail)),
    refs TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(refs)),
    at TEXT NOT NULL,
    received_at TEXT NOT NULL,
    triaged_at TEXT
);
CREATE INDEX connector_events_pending ON connector_events(triaged_at, seq);
CREATE TABLE event_notifications(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    event_id TEXT,
    notification_id TEXT,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    summary TEXT NOT NULL,
    event_at TEXT,
    refs TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(refs)),
    created_at TEXT NOT NULL
);
"""

EVENTS_MIGRATION = Migration(2, "connector events and the notifications triage sent", _OWNER_V2)


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_stamp() -> str:
    return _stamp(datetime.now(UTC))


class NewEvent(msgspec.Struct, frozen=True, kw_only=True):
    server: str
    kind: str
    summary: str
    detail: str  # JSON text of what the server sent, cut to MAX_DETAIL
    refs: dict[str, str]
    at: str


class PendingEvent(NewEvent, frozen=True, kw_only=True):
    """A stored event triage has not read yet: the event and the id the store gave it."""

    id: str


class EventNotification(msgspec.Struct, frozen=True, kw_only=True):
    """A notification triage sent about an event, as `read_notification` returns it."""

    id: str
    source: str
    kind: str
    summary: str
    event_at: str | None
    refs: dict[str, str]
    created_at: str


_PENDING = Columns(
    PendingEvent,
    "id",
    "server",
    "kind",
    "summary",
    "detail",
    Col("refs", read=json.loads),
    "at",
)
_NOTIFICATIONS = Columns(
    EventNotification,
    "id",
    "source",
    "kind",
    "summary",
    "event_at",
    Col("refs", read=json.loads),
    "created_at",
)


def clean_refs(raw: object) -> dict[str, str]:
    """At most `MAX_REFS` string refs (`message_id`, `thread_id`, `event_id`, `uri`…)."""
    out: dict[str, str] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        if len(out) >= MAX_REFS:
            break
        if isinstance(key, str) and isinstance(value, str | int) and not isinstance(value, bool):
            out[key[:60]] = str(value)[:MAX_REF]
    return out


def _refs_of(params: dict[str, Any]) -> dict[str, str]:
    """`refs` when the server sent an object of them; else the fields named like ids."""
    if isinstance(params.get("refs"), dict):
        return clean_refs(params["refs"])
    return clean_refs(
        {
            k: v
            for k, v in params.items()
            if k in ("id", "uri", "url") or k.endswith("_id") or k.endswith("Id")
        }
    )


def _text(value: object) -> str | None:
    return " ".join(value.split()) if isinstance(value, str) and value.strip() else None


def _event_time(params: dict[str, Any], received: str) -> str:
    for key in ("at", "time", "date", "timestamp"):
        value = params.get(key)
        if isinstance(value, str) and value.strip():
            try:
                parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                continue
            return _stamp(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))
    return received


def event_from(server: str, method: str, params: dict[str, Any], received: str) -> NewEvent:
    """The event one notification of `server` makes: its kind is the method without
    `notifications/`; its summary the server's `summary` (or `title`, `subject`), else
    the params as JSON; `refs` the ids it names; `at` its own time when it gives one."""
    kind = method.removeprefix("notifications/")[:MAX_KIND] or "event"
    detail = msgspec.json.encode(params).decode()
    summary = next(
        (t for k in ("summary", "title", "subject", "text") if (t := _text(params.get(k)))),
        None,
    )
    if summary is None:
        summary = detail if detail != "{}" else kind
    if len(detail) > MAX_DETAIL:
        detail = json.dumps({"truncated": detail[:MAX_DETAIL]})
    return NewEvent(
        server=server,
        kind=kind,
        summary=summary[:MAX_SUMMARY],
        detail=detail,
        refs=_refs_of(params),
        at=_event_time(params, received),
    )


class RateGate:
    """At most `RATE_PER_MINUTE` events a minute from one instance (a flooding server
    cannot fill a member's database or their triage's budget)."""

    def __init__(self, per_minute: int = RATE_PER_MINUTE) -> None:
        self.per_minute = per_minute
        self.window = 0.0
        self.count = 0
        self.dropped = 0

    def admit(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        if now - self.window >= 60:
            self.window, self.count = now, 0
        if self.count >= self.per_minute:
            self.dropped += 1
            return False
        self.count += 1
        return True


class EventStore:
    """One member's connector events and triage notifications (their owner database)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, event: NewEvent, *, received: str | None = None) -> str:
        """Store one event (pending) and prune to the bounds; its id."""
        event_id = os.urandom(8).hex()
        stamp = received or now_stamp()
        cutoff = _stamp(datetime.now(UTC) - timedelta(days=MAX_AGE_DAYS))

        def q(c: apsw.Connection) -> None:
            c.execute(
                "INSERT INTO connector_events(id, server, kind, summary, detail, refs, at, "
                "received_at) VALUES (?,?,?,?,?,?,?,?)",
                (
                    event_id,
                    event.server,
                    event.kind,
                    event.summary,
                    event.detail,
                    json.dumps(event.refs),
                    event.at,
                    stamp,
                ),
            )
            c.execute("DELETE FROM connector_events WHERE received_at < ?", (cutoff,))
            c.execute(
                "DELETE FROM connector_events WHERE seq <= "
                "(SELECT seq FROM connector_events ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (KEEP_EVENTS,),
            )

        await self.db.transaction(q)
        return event_id

    async def has_pending(self) -> bool:
        row = await self.db.fetch_one("SELECT 1 FROM connector_events WHERE triaged_at IS NULL")
        return row is not None

    async def pending(self, limit: int) -> list[PendingEvent]:
        """The oldest pending events, at most `limit`."""
        return await _PENDING.many(
            self.db,
            "FROM connector_events WHERE triaged_at IS NULL ORDER BY seq LIMIT ?",
            (limit,),
        )

    async def mark_triaged(self, ids: list[str]) -> None:
        stamp = now_stamp()

        def q(c: apsw.Connection) -> None:
            c.executemany(
                "UPDATE connector_events SET triaged_at=? WHERE id=?", [(stamp, i) for i in ids]
            )

        await self.db.transaction(q)

    async def count(self) -> tuple[int, int]:
        """(all events kept, pending ones)."""
        kept, pending = await self.db.fetch_ints(
            "SELECT count(*), count(*) FILTER (WHERE triaged_at IS NULL) FROM connector_events"
        )
        return kept, pending

    async def add_notification(
        self,
        *,
        event_id: str | None,
        notification_id: str | None,
        source: str,
        kind: str,
        summary: str,
        event_at: str | None,
        refs: dict[str, str],
    ) -> str:
        note_id = os.urandom(8).hex()

        def q(c: apsw.Connection) -> None:
            c.execute(
                "INSERT INTO event_notifications(id, event_id, notification_id, source, kind, "
                "summary, event_at, refs, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    note_id,
                    event_id,
                    notification_id,
                    source,
                    kind,
                    summary,
                    event_at,
                    json.dumps(refs),
                    now_stamp(),
                ),
            )
            c.execute(
                "DELETE FROM event_notifications WHERE seq <= "
                "(SELECT seq FROM event_notifications ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (KEEP_NOTIFICATIONS,),
            )

        await self.db.transaction(q)
        return note_id

    async def notifications(self, limit: int) -> list[EventNotification]:
        """The newest notifications triage sent, newest first."""
        return await _NOTIFICATIONS.many(
            self.db, "FROM event_notifications ORDER BY seq DESC LIMIT ?", (limit,)
        )
