"""Reports: what a system agent wrote about a stretch of time, for the people it is for.

Rule: a report is written once and never changed (the table refuses an UPDATE); the
only later writes are each reader's own "read" mark. Who may read it is decided when it
is read, never stored as a list: `owner` is the member whose run wrote it, `admins`
every admin, `supervisors` whoever supervises its subject *now*, so a second parent
linked later sees the past reports too and an unlinked one stops seeing them. A member
never reads a report about themselves unless it is their own (`owner`): the subject of
a review is not its audience, whatever role they hold.

Trap: the store lives in the registry (household-wide, not encrypted) because its
readers are other members; that is why a report is redacted before it is stored
(the review's fail-closed check) and why a subject's own words reach it only as quotes
the finding needs.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Literal

import apsw
import msgspec

from skald.errors import ConflictError, NotFoundError
from skald.plugins.specs import NewReport, Suggestion
from skald.store.columns import Col, Columns
from skald.store.database import Database, fetch_all, fetch_one
from skald.store.migrations import Feature, Migration
from skald.store.registry import now_iso

__all__ = ["REPORTS_FEATURE", "Reader", "Report", "ReportSummary", "Reports", "SuggestionOut"]

Severity = Literal["info", "notice", "alert"]
Audience = Literal["owner", "admins", "supervisors"]
SEVERITIES = ("info", "notice", "alert")
AUDIENCES = ("owner", "admins", "supervisors")

_V1 = """
CREATE TABLE reports(
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    body TEXT NOT NULL,
    severity TEXT NOT NULL CHECK (severity IN ('info', 'notice', 'alert')),
    audience TEXT NOT NULL CHECK (audience IN ('owner', 'admins', 'supervisors')),
    owner_id TEXT NOT NULL,
    subject_id TEXT,
    subject_name TEXT,
    period_start TEXT,
    period_end TEXT,
    producer TEXT NOT NULL,
    run_id TEXT NOT NULL,
    created_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX reports_by_time ON reports(created_at);
CREATE TRIGGER reports_immutable BEFORE UPDATE ON reports BEGIN
    SELECT RAISE(ABORT, 'a report is never changed once written');
END;
CREATE TABLE report_reads(
    report_id TEXT NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    read_at TEXT NOT NULL,
    PRIMARY KEY(report_id, user_id)
) WITHOUT ROWID;
"""

# The changes a report proposes (memory upkeep), written with it and never changed, and
# who accepted each (once: the first click wins, the second is told it was accepted).
_V2 = """
CREATE TABLE report_suggestions(
    report_id TEXT NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    kind TEXT NOT NULL,
    note TEXT NOT NULL,
    text TEXT NOT NULL,
    old_text TEXT NOT NULL,
    new_text TEXT NOT NULL,
    PRIMARY KEY(report_id, n)
) WITHOUT ROWID;
CREATE TRIGGER report_suggestions_immutable BEFORE UPDATE ON report_suggestions BEGIN
    SELECT RAISE(ABORT, 'a suggestion is never changed once written');
END;
CREATE TABLE report_accepts(
    report_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    conversation_id TEXT,
    accepted_at TEXT NOT NULL,
    PRIMARY KEY(report_id, n),
    FOREIGN KEY(report_id, n) REFERENCES report_suggestions(report_id, n) ON DELETE CASCADE
) WITHOUT ROWID;
"""

REPORTS_FEATURE = Feature(
    "reports",
    (
        Migration(1, "reports and their readers", _V1),
        Migration(2, "the changes a report suggests, and who accepted them", _V2),
    ),
)


class ReportSummary(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    title: str
    summary: str
    severity: str
    audience: str
    subject_id: str | None
    subject_name: str | None
    period_start: str | None
    period_end: str | None
    producer: str
    created_at: str
    read: bool


class SuggestionOut(msgspec.Struct, frozen=True, kw_only=True):
    """A suggestion as its readers see it: which note, what kind, in plain words. The
    edit itself is shown by the approval request accepting it makes (its diff)."""

    n: int
    kind: str
    note: str
    text: str
    accepted: bool
    # The caller's own conversation holding the approval request, when they accepted it.
    conversation_id: str | None = None


class Report(ReportSummary, frozen=True, kw_only=True):
    body: str
    suggestions: list[SuggestionOut] = []


class Reader(msgspec.Struct, frozen=True, kw_only=True):
    """Who is asking: their id, whether they are an admin, whom they supervise now."""

    user_id: str
    admin: bool
    supervises: frozenset[str]

    def may_read(self, audience: str, owner_id: str, subject_id: str | None) -> bool:
        if audience == "owner":
            return owner_id == self.user_id
        if subject_id == self.user_id:
            return False  # never about yourself, unless it is your own
        if audience == "admins":
            return self.admin
        return subject_id is not None and subject_id in self.supervises


# A summary as `reader` (a named parameter) sees it; a query selects `owner_id` after it.
_SUMMARY = Columns(
    ReportSummary,
    "id",
    "title",
    "summary",
    "severity",
    "audience",
    "subject_id",
    "subject_name",
    "period_start",
    "period_end",
    "producer",
    "created_at",
    Col(
        "read",
        sql="EXISTS(SELECT 1 FROM report_reads r WHERE r.report_id = reports.id "
        "AND r.user_id = :reader)",
        read=bool,
    ),
)
# A suggestion as `reader` sees it: their own acceptance names their conversation.
_SUGGESTION = Columns(
    SuggestionOut,
    Col("n", sql="s.n"),
    Col("kind", sql="s.kind"),
    Col("note", sql="s.note"),
    Col("text", sql="s.text"),
    Col("accepted", sql="a.user_id IS NOT NULL", read=bool),
    Col("conversation_id", sql="CASE WHEN a.user_id = :reader THEN a.conversation_id END"),
)


class Reports:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(
        self,
        report: NewReport,
        *,
        owner_id: str,
        subject_name: str | None,
        producer: str,
        run_id: str,
    ) -> str:
        if report.severity not in SEVERITIES or report.audience not in AUDIENCES:
            raise ValueError("a report's severity or audience is not one the store knows")
        report_id = secrets.token_hex(8)
        row = (
            report_id,
            report.title,
            report.summary,
            report.body,
            report.severity,
            report.audience,
            owner_id,
            report.subject_id,
            subject_name,
            report.period_start,
            report.period_end,
            producer,
            run_id,
            now_iso(),
        )
        suggestions = [
            (report_id, n, x.kind, x.note, x.text, x.old_text, x.new_text)
            for n, x in enumerate(report.suggestions, start=1)
        ]

        def q(c: apsw.Connection) -> None:
            c.execute(
                "INSERT INTO reports(id, title, summary, body, severity, audience, owner_id, "
                "subject_id, subject_name, period_start, period_end, producer, run_id, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            c.executemany(
                "INSERT INTO report_suggestions(report_id, n, kind, note, text, old_text, "
                "new_text) VALUES (?,?,?,?,?,?,?)",
                suggestions,
            )

        await self.db.transaction(q)
        return report_id

    async def readable(self, reader: Reader) -> list[ReportSummary]:
        def q(c: apsw.Connection) -> list[ReportSummary]:
            rows = fetch_all(
                c,
                f"SELECT {_SUMMARY.names}, owner_id FROM reports ORDER BY created_at DESC, id DESC",
                {"reader": reader.user_id},
            )
            found = [(_SUMMARY.row(r), r[len(_SUMMARY)]) for r in rows]
            return [s for s, owner in found if reader.may_read(s.audience, owner, s.subject_id)]

        return await self.db.call(q)

    async def unread(self, reader: Reader) -> int:
        return sum(not r.read for r in await self.readable(reader))

    async def open(self, reader: Reader, report_id: str) -> Report:
        """The report with its body, marked read for this reader (NotFound when they may
        not read it: the same answer as for one that does not exist)."""

        def q(c: apsw.Connection) -> Report:
            row = fetch_one(
                c,
                f"SELECT {_SUMMARY.names}, owner_id, body FROM reports WHERE id=:id",
                {"reader": reader.user_id, "id": report_id},
            )
            if row is None:
                raise NotFoundError("no such report")
            summary, (owner_id, body) = _SUMMARY.row(row), row[len(_SUMMARY) :]
            if not reader.may_read(summary.audience, owner_id, summary.subject_id):
                raise NotFoundError("no such report")
            c.execute(
                "INSERT OR IGNORE INTO report_reads(report_id, user_id, read_at) VALUES (?,?,?)",
                (report_id, reader.user_id, now_iso()),
            )
            return Report(
                **(msgspec.structs.asdict(summary) | {"read": True}),  # read from now on
                body=body,
                suggestions=_suggestions(c, report_id, reader.user_id),
            )

        return await self.db.transaction(q)

    async def suggestion(self, reader: Reader, report_id: str, n: int) -> Suggestion:
        """One suggestion of a report this reader may read (NotFound otherwise)."""

        def q(c: apsw.Connection) -> Suggestion:
            row = fetch_one(
                c, "SELECT audience, owner_id, subject_id FROM reports WHERE id=?", (report_id,)
            )
            if row is None or not reader.may_read(row[0], row[1], row[2]):
                raise NotFoundError("no such report")
            found = fetch_one(
                c,
                "SELECT kind, note, text, old_text, new_text FROM report_suggestions "
                "WHERE report_id=? AND n=?",
                (report_id, n),
            )
            if found is None:
                raise NotFoundError("the report has no such suggestion")
            return Suggestion(
                kind=found[0], note=found[1], text=found[2], old_text=found[3], new_text=found[4]
            )

        return await self.db.call(q)

    async def claim(self, report_id: str, n: int, user_id: str) -> None:
        """Mark the suggestion accepted by this reader, once (ConflictError the second
        time, whoever clicks: two admins' clicks never make two requests)."""

        def q(c: apsw.Connection) -> None:
            c.execute(
                "INSERT OR IGNORE INTO report_accepts(report_id, n, user_id, accepted_at) "
                "VALUES (?,?,?,?)",
                (report_id, n, user_id, now_iso()),
            )
            if c.changes() == 0:
                raise ConflictError("this suggestion was already accepted")

        await self.db.transaction(q)

    async def accepted(self, report_id: str, n: int, conversation_id: str | None) -> None:
        """Record where the approval request waits; None: making it failed, so the
        suggestion can be accepted again."""
        if conversation_id is None:
            sql, args = "DELETE FROM report_accepts WHERE report_id=? AND n=?", (report_id, n)
        else:
            sql = "UPDATE report_accepts SET conversation_id=? WHERE report_id=? AND n=?"
            args = (conversation_id, report_id, n)  # type: ignore[assignment]
        await self.db.execute(sql, args)

    async def audience_of(
        self, report: NewReport, owner_id: str, readers: Callable[[], Awaitable[list[Reader]]]
    ) -> list[str]:
        """The members who may read this report now (whom an alert notifies)."""
        return [
            r.user_id
            for r in await readers()
            if r.may_read(report.audience, owner_id, report.subject_id)
        ]


def _suggestions(c: apsw.Connection, report_id: str, user_id: str) -> list[SuggestionOut]:
    rows = fetch_all(
        c,
        f"SELECT {_SUGGESTION.names} FROM report_suggestions s LEFT JOIN report_accepts a "
        "ON a.report_id = s.report_id AND a.n = s.n WHERE s.report_id=:report ORDER BY s.n",
        {"reader": user_id, "report": report_id},
    )
    return [_SUGGESTION.row(r) for r in rows]
