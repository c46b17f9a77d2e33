"""The review's household-wide tables (the registry): how far each subject's
conversations have been reviewed, and the audit of every read of them.

Rule: coverage only moves forward (`MAX(old, new)`) and only after a completed pass, so
a pass that dies halfway leaves the mark where it was and the same window is reviewed
again (a duplicate is a nuisance, a gap a blind spot). Clearing it ("review again from
the beginning") is an admin's act. Every read of a subject's messages writes one audit
line (who read, which window, when, how many messages) before the model sees them.

Trap: the window's end is the time the pass *read*, never the time it finished: a
message written during the model's answer falls after the window and is in the next.
"""

from __future__ import annotations

import msgspec

from skald.store.columns import Columns
from skald.store.database import Database, changed
from skald.store.migrations import Feature, Migration
from skald.store.registry import now_iso

__all__ = ["REVIEW_FEATURE", "AuditLine", "ReviewStore"]

_V1 = """
CREATE TABLE review_coverage(
    subject_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    covered_through TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE review_audit(
    id INTEGER PRIMARY KEY,
    subject_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    reader_id TEXT NOT NULL,
    window_start TEXT,
    window_end TEXT NOT NULL,
    messages INTEGER NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX review_audit_by_subject ON review_audit(subject_id, at);
"""

REVIEW_FEATURE = Feature(
    "review", (Migration(1, "review coverage and audit", _V1),), after=("accounts",)
)


class AuditLine(msgspec.Struct, frozen=True, kw_only=True):
    subject_id: str
    reader_id: str
    window_start: str | None  # None: from their first message
    window_end: str
    messages: int
    at: str


_AUDIT = Columns(
    AuditLine, "subject_id", "reader_id", "window_start", "window_end", "messages", "at"
)


class ReviewStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def covered_through(self, subject_id: str) -> str | None:
        return await self.db.fetch_text(
            "SELECT covered_through FROM review_coverage WHERE subject_id=?", (subject_id,)
        )

    async def advance(self, subject_id: str, through: str) -> None:
        await self.db.execute(
            "INSERT INTO review_coverage(subject_id, covered_through, updated_at) "
            "VALUES (?, ?, ?) ON CONFLICT(subject_id) DO UPDATE SET covered_through = "
            "MAX(review_coverage.covered_through, excluded.covered_through), "
            "updated_at = excluded.updated_at",
            (subject_id, through, now_iso()),
        )

    async def clear(self, subject_id: str) -> bool:
        sql = "DELETE FROM review_coverage WHERE subject_id=?"
        return await self.db.call(lambda c: changed(c, sql, (subject_id,)))

    async def audit(self, line: AuditLine) -> None:
        await self.db.execute(
            "INSERT INTO review_audit(subject_id, reader_id, window_start, window_end, "
            "messages, at) VALUES (?,?,?,?,?,?)",
            (
                line.subject_id,
                line.reader_id,
                line.window_start,
                line.window_end,
                line.messages,
                line.at,
            ),
        )

    async def audit_lines(self, subject_id: str | None = None, limit: int = 100) -> list[AuditLine]:
        where, args = ("WHERE subject_id=?", (subject_id,)) if subject_id else ("", ())
        rest = f"FROM review_audit {where} ORDER BY id DESC LIMIT ?"
        return await _AUDIT.many(self.db, rest, (*args, limit))
