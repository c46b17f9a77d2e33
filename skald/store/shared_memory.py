"""The household's shared memory notes (`shared-memory/…`), kept in the registry.

Same operations as a member's private notes in `OwnerStore`, plus who changed a note last.
Who may read or write is decided above this layer (capabilities and approval rules); this
class only stores. Paths are relative to the store (`recipes/bread.md`); the agent-facing
`shared-memory/` prefix and its rules live in `skald.store.note_paths`.
"""

from __future__ import annotations

import apsw

from skald.errors import NotFoundError
from skald.store import notes
from skald.store.database import Database
from skald.store.notes import SHARED_NOTES, NoteHit, NoteInfo
from skald.store.registry import now_iso

__all__ = ["NoteHit", "NoteInfo", "SharedMemoryStore"]


class SharedMemoryStore:
    """Queries on the shared notes of the registry database `db`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def note_put(self, path: str, content: str, user_id: str | None) -> None:
        """Create or replace a note; `user_id` is the member making the change."""
        stamp = now_iso()
        await self.db.transaction(
            lambda c: notes.put(c, SHARED_NOTES, path, content, stamp, user_id)
        )

    async def note_get(self, path: str) -> str:
        content = await self.db.call(lambda c: notes.get(c, SHARED_NOTES, path))
        if content is None:
            raise NotFoundError(f"no shared note at {path}")
        return content

    async def note_delete(self, path: str) -> None:
        def q(c: apsw.Connection) -> None:
            if not notes.delete(c, SHARED_NOTES, path):
                raise NotFoundError(f"no shared note at {path}")

        await self.db.transaction(q)

    async def note_list(self, prefix: str = "") -> list[NoteInfo]:
        """Notes whose path starts with `prefix` (plain text, not a pattern), by path."""
        return await self.db.call(lambda c: notes.list_notes(c, SHARED_NOTES, prefix))

    async def note_search(self, query: str, limit: int = 20) -> list[NoteHit]:
        """Full-text search; the query is matched as plain words, never as FTS syntax."""
        return await self.db.call(lambda c: notes.search(c, SHARED_NOTES, query, limit))
