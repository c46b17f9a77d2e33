"""The transcript a review reads: what a member and their assistant said to each other
in a window `[since, until)`, across their conversations.

Rule: a line is a message of role user or assistant, not a compaction summary, not cut
short (`interrupted`: not what was said in the end), not empty once its harness blocks
and attachment notes are gone, not synthetic (a message the machinery wrote as if it
were the member: a background task's result, which carries a harness block), and in a
top-level conversation (not one a scheduled job or a background task runs in: nobody
typed those). Tool calls and their results are never here: they are not messages.

When the window holds more than the budget (characters), the newest lines are kept: the
rows are read newest first and reading stops at the budget, so a month of messages
costs the memory of what fits, not of the month.

Trap: times are the stored `YYYY-MM-DDTHH:MM:SSZ` strings and compare as strings; the
window is half-open so consecutive windows tile without a gap or an overlap.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import apsw
import msgspec

from skald.agent.prompts import HARNESS_TAG
from skald.llm.types import Message
from skald.store.conversations import display_text
from skald.store.database import Database, fetch_all

__all__ = ["Line", "Transcript", "read_window", "render"]

_decode = msgspec.json.Decoder(Message).decode
_OPEN = f"<{HARNESS_TAG}>"


@dataclass(frozen=True, slots=True)
class Line:
    conversation_id: str
    title: str
    role: str
    text: str
    at: str


@dataclass(frozen=True)
class Transcript:
    lines: list[Line]  # oldest first
    truncated: bool  # older lines of the window were left out (over budget)


def _job_conversations(c: apsw.Connection) -> str:
    """SQL excluding the conversations scheduled jobs and background tasks run in (when
    the schedule feature's tables exist in this database)."""
    tables = {str(r[0]) for r in fetch_all(c, "SELECT name FROM sqlite_master WHERE type='table'")}
    parts = []
    if "schedule_jobs" in tables:
        parts.append("SELECT conversation_id FROM schedule_jobs")
    if "schedule_tasks" in tables:
        parts.append("SELECT conversation_id FROM schedule_tasks")
    return f"AND m.conversation_id NOT IN ({' UNION '.join(parts)})" if parts else ""


def _rows(c: apsw.Connection, since: str | None, until: str) -> Iterator[tuple[str, ...]]:
    sql = (
        "SELECT m.conversation_id, c.title, m.role, m.body, m.created_at "
        "FROM chat_messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE m.created_at >= ? AND m.created_at < ? AND m.role IN ('user', 'assistant') "
        f"AND m.summary = 0 {_job_conversations(c)} ORDER BY m.created_at DESC, m.seq DESC"
    )
    yield from c.execute(sql, (since or "", until))


def _line(row: tuple[str, ...]) -> Line | None:
    message = _decode(row[3])
    if message.interrupted is not None:
        return None
    if message.role == "user" and any(
        _OPEN in t and not t.startswith(_OPEN) for t in _texts(message)
    ):
        return None  # a harness block inside the text (not the view context): machine-written
    text = display_text(message).strip()
    if not text:
        return None
    return Line(conversation_id=row[0], title=row[1], role=row[2], text=text, at=row[4])


def _texts(message: Message) -> list[str]:
    return [getattr(p, "text", "") for p in message.content]


def read_window_sync(
    c: apsw.Connection, since: str | None, until: str, budget_chars: int
) -> Transcript:
    kept: list[Line] = []
    used = 0
    truncated = False
    for row in _rows(c, since, until):
        line = _line(row)
        if line is None:
            continue
        cost = len(line.text) + 40  # the line's time and role
        if used + cost > budget_chars:
            truncated = True
            break
        kept.append(line)
        used += cost
    kept.reverse()
    return Transcript(lines=kept, truncated=truncated)


async def read_window(db: Database, since: str | None, until: str, budget_chars: int) -> Transcript:
    return await db.call(lambda c: read_window_sync(c, since, until, budget_chars))


async def has_lines(db: Database, since: str | None, until: str) -> bool:
    """Whether the window holds at least one line (the cheap look before a pass)."""

    def q(c: apsw.Connection) -> bool:
        return any(_line(row) is not None for row in _rows(c, since, until))

    return await db.call(q)


def render(transcript: Transcript) -> str:
    """Grouped by conversation (in the order each first spoke), each line timestamped."""
    groups: dict[str, list[Line]] = {}
    for line in transcript.lines:
        groups.setdefault(line.conversation_id, []).append(line)
    out: list[str] = []
    if transcript.truncated:
        out.append("(The window held more than fits: its oldest messages are left out.)\n")
    for lines in groups.values():
        out.append(f"### Conversation: {lines[0].title or '(untitled)'}")
        for line in lines:
            who = "Them" if line.role == "user" else "Assistant"
            stamp = line.at.replace("T", " ").removesuffix("Z")
            out.append(f"[{stamp} UTC] {who}: {line.text}")
        out.append("")
    return "\n".join(out)
