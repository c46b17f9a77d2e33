"""An owner database: one member's private data (encrypted unless their role says not)."""

from __future__ import annotations

import json
from typing import Any

from skald.store import notes
from skald.store.notes import PRIVATE_NOTES, NoteHit, NoteInfo, NoteQueries
from skald.store.registry import now_iso

__all__ = ["NoteHit", "NoteInfo", "OwnerStore"]


class OwnerStore(NoteQueries):
    """Queries on one member's owner database."""

    _tables = PRIVATE_NOTES
    _missing = "no note at"

    # -- key/value ---------------------------------------------------------------

    async def kv_get(self, key: str) -> Any:
        row = await self.db.fetch_one("SELECT value FROM kv WHERE key=?", (key,))
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
