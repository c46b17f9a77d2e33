"""An owner database: one member's private data (encrypted unless their role says not)."""

from __future__ import annotations

import json
from typing import Any

import apsw

from skald.errors import NotFoundError
from skald.store import notes
from skald.store.database import Database, fetch_one
from skald.store.notes import PRIVATE_NOTES, NoteHit, NoteInfo
from skald.store.registry import now_iso

__all__ = ["NoteHit", "NoteInfo", "OwnerStore"]


class OwnerStore:
    """Queries on one member's owner database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- key/value ---------------------------------------------------------------

    async def kv_get(self, key: str) -> Any:
        row = await self.db.call(lambda c: fetch_one(c, "SELECT value FROM kv WHERE key=?", (key,)))
        return None if row is None else json.loads(row[0])

    async def kv_set(self, key: str, value: Any) -> None:
        encoded = json.dumps(value)
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO kv(key, value, updated_at) VALUES (?,?,?) ON CONFLICT(key) "
                "DO UPDATE SET value=excluded.value, updated_at=excluded.updated_at",
                (key, encoded, now_iso()),
            )
        )

    # -- memory notes ------------------------------------------------------------
    # Paths are relative to the store (`people/ada.md`); the agent-facing `user-memory/`
    # prefix and its rules live in `skald.store.note_paths`.

    async def note_put(self, path: str, content: str) -> None:
        stamp = now_iso()
        await self.db.transaction(lambda c: notes.put(c, PRIVATE_NOTES, path, content, stamp))

    async def note_get(self, path: str) -> str:
        content = await self.db.call(lambda c: notes.get(c, PRIVATE_NOTES, path))
        if content is None:
            raise NotFoundError(f"no note at {path}")
        return content

    async def note_delete(self, path: str) -> None:
        def q(c: apsw.Connection) -> None:
            if not notes.delete(c, PRIVATE_NOTES, path):
                raise NotFoundError(f"no note at {path}")

        await self.db.transaction(q)

    async def note_list(self, prefix: str = "") -> list[NoteInfo]:
        """Notes whose path starts with `prefix` (plain text, not a pattern), by path."""
        return await self.db.call(lambda c: notes.list_notes(c, PRIVATE_NOTES, prefix))

    async def note_search(self, query: str, limit: int = 20) -> list[NoteHit]:
        """Full-text search; the query is matched as plain words, never as FTS syntax."""
        return await self.db.call(lambda c: notes.search(c, PRIVATE_NOTES, query, limit))
