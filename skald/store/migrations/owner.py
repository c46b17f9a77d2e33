"""Schema of an owner database `database/users/<id>.db` (encrypted unless the role says not)."""

from __future__ import annotations

from skald.store.migrations import Migration, Schema

_V1_KV = """
CREATE TABLE kv(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL CHECK (json_valid(value)),
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
"""

# Private memory notes, searched with FTS5. The index is external-content so the text is
# stored once; triggers keep it in step with every insert, update and delete.
_V2_NOTES = """
CREATE TABLE memory_notes(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE VIRTUAL TABLE memory_notes_fts USING fts5(
    path, content, content='memory_notes', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER memory_notes_ai AFTER INSERT ON memory_notes BEGIN
    INSERT INTO memory_notes_fts(rowid, path, content) VALUES (new.id, new.path, new.content);
END;
CREATE TRIGGER memory_notes_ad AFTER DELETE ON memory_notes BEGIN
    INSERT INTO memory_notes_fts(memory_notes_fts, rowid, path, content)
        VALUES ('delete', old.id, old.path, old.content);
END;
CREATE TRIGGER memory_notes_au AFTER UPDATE ON memory_notes BEGIN
    INSERT INTO memory_notes_fts(memory_notes_fts, rowid, path, content)
        VALUES ('delete', old.id, old.path, old.content);
    INSERT INTO memory_notes_fts(rowid, path, content) VALUES (new.id, new.path, new.content);
END;
"""

OWNER = Schema(
    "owner",
    (
        Migration(1, "key/value", _V1_KV),
        Migration(2, "memory notes with full-text search", _V2_NOTES),
    ),
)
