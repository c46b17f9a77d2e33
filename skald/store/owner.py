"""An owner database: one member's private data (encrypted unless their role says not)."""

from __future__ import annotations

import json
from typing import Any

import apsw
import msgspec

from skald.errors import NotFoundError
from skald.store.database import Database, fetch_all, fetch_one
from skald.store.registry import now_iso


class NoteHit(msgspec.Struct, frozen=True):
    path: str
    snippet: str
    rank: float


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

    async def note_put(self, path: str, content: str) -> None:
        stamp = now_iso()
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO memory_notes(path, content, created_at, updated_at) VALUES (?,?,?,?) "
                "ON CONFLICT(path) DO UPDATE SET content=excluded.content, updated_at=excluded.updated_at",
                (path, content, stamp, stamp),
            )
        )

    async def note_get(self, path: str) -> str:
        row = await self.db.call(
            lambda c: fetch_one(c, "SELECT content FROM memory_notes WHERE path=?", (path,))
        )
        if row is None:
            raise NotFoundError(f"no note at {path}")
        return str(row[0])

    async def note_delete(self, path: str) -> None:
        def q(c: apsw.Connection) -> None:
            c.execute("DELETE FROM memory_notes WHERE path=?", (path,))
            if c.changes() == 0:
                raise NotFoundError(f"no note at {path}")

        await self.db.transaction(q)

    async def note_search(self, query: str, limit: int = 20) -> list[NoteHit]:
        """Full-text search; the query is matched as plain words, never as FTS syntax."""
        words = [w for w in query.split() if w]
        if not words:
            return []
        match = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = await self.db.call(
            lambda c: fetch_all(
                c,
                "SELECT path, snippet(memory_notes_fts, 1, '[', ']', '…', 12), bm25(memory_notes_fts) "
                "FROM memory_notes_fts WHERE memory_notes_fts MATCH ? ORDER BY bm25(memory_notes_fts) LIMIT ?",
                (match, limit),
            )
        )
        return [NoteHit(path=r[0], snippet=r[1], rank=float(r[2])) for r in rows]
