"""The household's shared memory notes (`shared-memory/…`), kept in the registry.

Same operations as a member's private notes in `OwnerStore`, plus who changed a note last.
Who may read or write is decided above this layer (capabilities and approval rules); this
class only stores. Paths are relative to the store (`recipes/bread.md`); the agent-facing
`shared-memory/` prefix and its rules live in `skald.store.note_paths`.
"""

from __future__ import annotations

from skald.store import notes
from skald.store.notes import SHARED_NOTES, NoteHit, NoteInfo, NoteQueries
from skald.store.registry import now_iso

__all__ = ["NoteHit", "NoteInfo", "SharedMemoryStore"]


class SharedMemoryStore(NoteQueries):
    """Queries on the shared notes of the registry database `db`."""

    _tables = SHARED_NOTES
    _missing = "no shared note at"

    async def note_put(self, path: str, content: str, user_id: str | None) -> None:
        """Create or replace a note; `user_id` is the member making the change."""
        stamp = now_iso()
        await self.db.transaction(
            lambda c: notes.put(c, SHARED_NOTES, path, content, stamp, user_id)
        )
