"""Memory-note queries shared by the private store (owner database) and the household one.

Both stores have the same shape: a table of Markdown notes keyed by a store-relative path,
and an external-content FTS5 index kept in step by triggers. The household table also
records who last changed each note. These functions run on the database's own thread
(inside `db.call` / `db.transaction`); the table names come only from the two constants
below, never from input. `NoteQueries` is the awaitable side both stores share.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import apsw
import msgspec

from skald.errors import NotFoundError
from skald.store.columns import Col, Columns
from skald.store.database import Database, fetch_all, fetch_one
from skald.store.kept import KeptReads

_IDENT = re.compile(r"[a-z][a-z0-9_]*")

# Characters around a match in a snippet, and its length in tokens.
SNIPPET_OPEN = "["
SNIPPET_CLOSE = "]"
SNIPPET_ELLIPSIS = "…"
SNIPPET_TOKENS = 12


@dataclass(frozen=True)
class NoteTables:
    """Where one note store lives: its table, its FTS5 index, and whether it has authors."""

    table: str
    fts: str
    has_author: bool

    def __post_init__(self) -> None:
        for name in (self.table, self.fts):
            if not _IDENT.fullmatch(name):
                raise ValueError(f"bad table name {name!r}")


PRIVATE_NOTES = NoteTables("memory_notes", "memory_notes_fts", has_author=False)
SHARED_NOTES = NoteTables("shared_memory_notes", "shared_memory_notes_fts", has_author=True)


class NoteHit(msgspec.Struct, frozen=True):
    """One search result: the note, a highlighted excerpt and its BM25 rank (lower is better)."""

    path: str
    snippet: str
    rank: float


class NoteInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A note as a listing shows it. `updated_by` is a user id (household notes only)."""

    path: str
    size: int  # bytes of UTF-8
    created_at: str
    updated_at: str
    updated_by: str | None = None


def put(
    conn: apsw.Connection,
    t: NoteTables,
    path: str,
    content: str,
    stamp: str,
    user_id: str | None = None,
) -> None:
    """Create or replace a note (call inside a transaction)."""
    if t.has_author:
        conn.execute(
            f"INSERT INTO {t.table}(path, content, created_at, updated_at, updated_by) "
            "VALUES (?,?,?,?,?) ON CONFLICT(path) DO UPDATE SET content=excluded.content, "
            "updated_at=excluded.updated_at, updated_by=excluded.updated_by",
            (path, content, stamp, stamp, user_id),
        )
    else:
        conn.execute(
            f"INSERT INTO {t.table}(path, content, created_at, updated_at) VALUES (?,?,?,?) "
            "ON CONFLICT(path) DO UPDATE SET content=excluded.content, "
            "updated_at=excluded.updated_at",
            (path, content, stamp, stamp),
        )


def get(conn: apsw.Connection, t: NoteTables, path: str) -> str | None:
    row = fetch_one(conn, f"SELECT content FROM {t.table} WHERE path=?", (path,))
    return None if row is None else str(row[0])


def delete(conn: apsw.Connection, t: NoteTables, path: str) -> bool:
    """Remove a note; False when there was none (call inside a transaction)."""
    conn.execute(f"DELETE FROM {t.table} WHERE path=?", (path,))
    return bool(conn.changes())


def _after_prefix(prefix: str) -> str | None:
    """The smallest string greater than every string starting with `prefix`, if cheap.

    Text compares as UTF-8 bytes, which orders like code points, so bumping the last
    code point gives an exclusive upper bound and lets the path index stop the scan.
    """
    last = ord(prefix[-1])
    if last >= 0x10FFFF or 0xD7FF <= last <= 0xDFFF:
        return None
    return prefix[:-1] + chr(last + 1)


def list_notes(conn: apsw.Connection, t: NoteTables, prefix: str = "") -> list[NoteInfo]:
    """Every note whose path starts with `prefix` (plain text, no wildcards), by path."""
    info = Columns(
        NoteInfo,
        "path",
        Col("size", sql="length(CAST(content AS BLOB))"),
        "created_at",
        "updated_at",
        Col("updated_by", sql="updated_by" if t.has_author else "NULL"),
    )
    columns = f"SELECT {info.names} FROM {t.table}"
    if not prefix:
        rows = fetch_all(conn, f"{columns} ORDER BY path")
    else:
        # The range lets the index seek; the exact comparison keeps it correct anyway.
        upper = _after_prefix(prefix)
        bound = "" if upper is None else " AND path < :upper"
        rows = fetch_all(
            conn,
            f"{columns} WHERE path >= :prefix{bound} "
            "AND substr(path, 1, length(:prefix)) = :prefix ORDER BY path",
            {"prefix": prefix, "upper": upper} if upper is not None else {"prefix": prefix},
        )
    return [info.row(r) for r in rows]


def match_expression(query: str) -> str | None:
    """Turn free text into an FTS5 query of quoted words (all must match), or None.

    Quoting every word means operators, column filters and stray quotes in the text are
    searched for as words instead of being parsed as FTS5 syntax.
    """
    words = query.split()
    if not words:
        return None
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def search(conn: apsw.Connection, t: NoteTables, query: str, limit: int = 20) -> list[NoteHit]:
    """Full-text search over path and content, best match first."""
    match = match_expression(query)
    if match is None or limit <= 0:
        return []
    rows = fetch_all(
        conn,
        f"SELECT path, snippet({t.fts}, 1, ?, ?, ?, ?), bm25({t.fts}) FROM {t.fts} "
        f"WHERE {t.fts} MATCH ? ORDER BY bm25({t.fts}) LIMIT ?",
        (SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, SNIPPET_TOKENS, match, limit),
    )
    return [NoteHit(path=str(r[0]), snippet=str(r[1]), rank=float(r[2])) for r in rows]


class NoteQueries:
    """Reading, deleting, listing and searching one note store of `db`: the member's
    private notes (`OwnerStore`) or the household's (`SharedMemoryStore`). Each writes
    with its own `note_put` (the household's records who changed a note)."""

    _tables: ClassVar[NoteTables]
    _missing: ClassVar[str]  # the not-found message before the path: "no note at"

    def __init__(self, db: Database) -> None:
        self.db = db

    async def note_get(self, path: str) -> str:
        content = await self.db.call(lambda c: get(c, self._tables, path))
        if content is None:
            raise NotFoundError(f"{self._missing} {path}")
        return content

    async def note_delete(self, path: str) -> None:
        def q(c: apsw.Connection) -> None:
            if not delete(c, self._tables, path):
                raise NotFoundError(f"{self._missing} {path}")

        await self.db.transaction(q)

    async def note_list(self, prefix: str = "") -> list[NoteInfo]:
        """Notes whose path starts with `prefix` (plain text, not a pattern), by path."""
        return await self.db.call(lambda c: list_notes(c, self._tables, prefix))

    async def note_search(self, query: str, limit: int = 20) -> list[NoteHit]:
        """Full-text search; the query is matched as plain words, never as FTS syntax."""
        return await self.db.call(lambda c: search(c, self._tables, query, limit))


class KeptNotes:
    """Notes of one store read at every turn (the memory indexes the prompt shows), kept
    between turns while the store's table was not written (`skald/store/kept.py`): an
    index the assistant or the member just edited is read again by the next turn. A
    missing note reads as "" and is kept too (writing it moves the count)."""

    def __init__(
        self, db: Database, tables: NoteTables, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.tables = tables
        self.kept: KeptReads[str, str] = KeptReads(db, frozenset({tables.table}), clock=clock)

    async def text(self, path: str) -> str:
        return await self.kept.get(path, lambda c: get(c, self.tables, path) or "")

    def now(self, path: str) -> str | None:
        """The kept text while it is good, else None (then `text` reads it)."""
        kept = self.kept.kept(path)
        return None if kept is None else kept[0]
