"""The member's Inbox in their owner database: requests that wait for them, durably.

An item's id is the tool call's id. A row is written when the gate first asks about a
call and stays `pending` until a person decides (`approved`/`rejected`/`answered`) or the
call is settled some other way (`settled`). Listing shows only pending rows whose call is
still open in the history, so a row can never outlive its call on screen.

A helper's (sub-agent's) request is stored under the conversation the helper works for,
with `parent_call` = the call there that started it: the helper's own call is never in
`chat_calls`, so such a row is open while its parent call is.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import apsw
import msgspec

from skald.store.database import Database, changed
from skald.store.registry import now_iso

__all__ = ["InboxItem", "InboxStore"]

Kind = Literal["approval", "question"]
Outcome = Literal["approved", "rejected", "answered", "settled"]

_OPEN = (
    "i.status='pending' AND EXISTS (SELECT 1 FROM chat_calls k "
    "WHERE k.id=coalesce(i.parent_call, i.id) "
    "AND k.state IN ('pending', 'running', 'awaiting_approval'))"
)


class InboxItem(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: Kind
    conversation_id: str
    conversation_title: str
    tool: str
    arguments: dict[str, Any]
    preview: str | None
    reason: str
    created_at: str
    choices: list[str] | None
    # A helper's request: the call of `conversation_id` that started the helper.
    parent_call_id: str | None = None
    # Background work's request: 'scheduled' | 'task', the job's or task's title (the
    # label "Scheduled: <title>" / "Task: <title>") and when it expires unanswered.
    origin: str | None = None
    origin_title: str | None = None
    expires_at: str | None = None


def _item(r: tuple[Any, ...]) -> InboxItem:
    return InboxItem(
        id=r[0],
        kind=r[1],
        conversation_id=r[2],
        conversation_title=r[3] or "",
        tool=r[4],
        arguments=json.loads(r[5]),
        preview=r[6],
        reason=r[7],
        created_at=r[8],
        choices=None if r[9] is None else json.loads(r[9]),
        parent_call_id=r[10],
        origin=r[11],
        origin_title=r[12],
        expires_at=r[13],
    )


_SELECT = (
    "SELECT i.id, i.kind, i.conversation_id, c.title, i.tool, i.arguments, i.preview, i.reason, "
    "i.created_at, i.choices, i.parent_call, i.origin, i.origin_title, i.expires_at "
    "FROM inbox_items i JOIN conversations c ON c.id=i.conversation_id"
)


class InboxStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(
        self,
        *,
        call_id: str,
        conversation_id: str,
        kind: Kind,
        tool: str,
        arguments: dict[str, Any],
        reason: str,
        preview: str | None = None,
        choices: list[str] | None = None,
        parent_call: str | None = None,
        origin: tuple[str, str, str] | None = None,
    ) -> bool:
        """Record a request; False when it was already recorded (asked again on recovery).

        `parent_call`: for a helper's request, the call of `conversation_id` that started
        the helper. `origin`: (kind, title, expires_at) of background work's request; a
        re-request without one keeps the stored origin (recovery may ask before the
        scheduler has taken the run back)."""
        kind_of, title, expires = origin if origin is not None else (None, None, None)

        def q(c: apsw.Connection) -> bool:
            c.execute(
                "INSERT INTO inbox_items(id, conversation_id, kind, tool, arguments, preview, "
                "reason, choices, created_at, parent_call, origin, origin_title, expires_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET status='pending', decided_at=NULL "
                "WHERE status != 'pending'",
                (
                    call_id,
                    conversation_id,
                    kind,
                    tool,
                    json.dumps(arguments),
                    preview,
                    reason,
                    None if choices is None else json.dumps(choices),
                    now_iso(),
                    parent_call,
                    kind_of,
                    title,
                    expires,
                ),
            )
            added = c.changes() > 0
            if origin is not None:
                c.execute(
                    "UPDATE inbox_items SET origin=?, origin_title=?, expires_at=? "
                    "WHERE id=? AND origin IS NULL",
                    (kind_of, title, expires, call_id),
                )
            return added

        return await self.db.transaction(q)

    async def close(self, item_id: str, outcome: Outcome) -> bool:
        """Mark a pending item decided; False when no such pending item exists."""

        sql = "UPDATE inbox_items SET status=?, decided_at=? WHERE id=? AND status='pending'"
        return await self.db.transaction(lambda c: changed(c, sql, (outcome, now_iso(), item_id)))

    async def pending(self) -> list[InboxItem]:
        rows = await self.db.fetch_all(f"{_SELECT} WHERE {_OPEN} ORDER BY i.created_at, i.id")
        return [_item(r) for r in rows]

    async def get(self, item_id: str) -> InboxItem | None:
        row = await self.db.fetch_one(f"{_SELECT} WHERE i.id=? AND {_OPEN}", (item_id,))
        return None if row is None else _item(row)

    async def status(self, item_id: str) -> str | None:
        """The item's status as stored (pending, approved, rejected...), None if none."""
        return await self.db.fetch_text("SELECT status FROM inbox_items WHERE id=?", (item_id,))

    async def count(self) -> int:
        row = await self.db.fetch_one(f"SELECT count(*) FROM inbox_items i WHERE {_OPEN}")
        return 0 if row is None else int(row[0])

    # -- "approve for this conversation" ---------------------------------------------

    async def add_bypass(self, conversation_id: str, tool: str) -> None:
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO conversation_bypass VALUES (?,?,?) ON CONFLICT DO NOTHING",
                (conversation_id, tool, now_iso()),
            )
        )

    async def bypassed(self, conversation_id: str, tool: str) -> bool:
        row = await self.db.fetch_one(
            "SELECT 1 FROM conversation_bypass WHERE conversation_id=? AND tool=?",
            (conversation_id, tool),
        )
        return row is not None
