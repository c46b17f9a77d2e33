"""An owner database: one member's private data (encrypted unless their role says not)."""

from __future__ import annotations

from typing import Any

from skald.store import notes
from skald.store.json_values import JsonValues
from skald.store.notes import PRIVATE_NOTES, NoteHit, NoteInfo, NoteQueries
from skald.store.registry import now_iso

__all__ = ["NoteHit", "NoteInfo", "OwnerStore"]

_KV = JsonValues("kv", stamp=now_iso)


class OwnerStore(NoteQueries):
    """Queries on one member's owner database."""

    _tables = PRIVATE_NOTES
    _missing = "no note at"

    # -- key/value ---------------------------------------------------------------

    async def kv_get(self, key: str) -> Any:
        return await _KV.get(self.db, key)

    async def kv_set(self, key: str, value: Any) -> None:
        await _KV.put(self.db, key, value)

    # -- memory notes ------------------------------------------------------------
    # Paths are relative to the store (`people/ada.md`); the agent-facing `user-memory/`
    # prefix and its rules live in `skald.store.note_paths`.

    async def note_put(self, path: str, content: str) -> None:
        stamp = now_iso()
        await self.db.transaction(lambda c: notes.put(c, PRIVATE_NOTES, path, content, stamp))
