"""Conversations and their history in a member's owner database.

`OwnerHistory` is the agent loop's `HistoryStore` for one conversation; every method is
one transaction, durable when it returns. `ConversationStore` is what the chat hub and
the API read and write about conversations (tabs, status, usage, the history for the UI).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import apsw
import msgspec

from skald.agent.history import (
    CallState,
    UnfinishedCall,
    check_append,
    check_mark,
    check_result,
)
from skald.errors import ConflictError, NotFoundError
from skald.llm.types import ContentPart, ImagePart, Message, TextPart, VideoPart
from skald.store.columns import Col, Columns
from skald.store.database import Database, change_one, fetch_all, fetch_one
from skald.store.registry import now_iso

_encode = msgspec.json.Encoder().encode
_decode_message = msgspec.json.Decoder(Message).decode

Status = Literal["idle", "running", "awaiting_approval"]


class Attachment(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    path: str  # agent path, e.g. uploads/<conversation>/photo.jpg
    mime: str
    size: int


class ConversationUsage(msgspec.Struct, frozen=True, kw_only=True):
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class Conversation(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    title: str
    agent_id: str
    model_id: str | None
    open: bool
    status: Status
    created_at: str
    updated_at: str
    usage: ConversationUsage
    security_group: str | None = None  # None: the member's role default


class CallView(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    arguments: dict[str, Any]
    status: str


class ViewItem(msgspec.Struct, frozen=True):
    """One fact of "share what I'm looking at" (label: value), shown as a chip."""

    label: str
    value: str


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """A conversation found by its title or the text of one of its messages."""

    conversation_id: str
    title: str
    open: bool
    updated_at: str
    snippet: str  # the matching text around the words, or "" for a title match
    seq: int | None  # the message that matched (None: the title)


class HistoryItem(msgspec.Struct, frozen=True, kw_only=True):
    """One message as the chat UI shows it."""

    seq: int
    role: Literal["system", "user", "assistant", "tool", "summary"]
    text: str
    attachments: list[Attachment]
    tool_calls: list[CallView]
    tool_call_id: str | None
    is_error: bool
    created_at: str
    # An answer cut short: "stopped", or the failure's code (the detail stays in the store).
    interrupted: str | None = None
    # What the member shared of their view with this message (chips, never typed text).
    view: list[ViewItem] = []
    # A picture was attached but not shown to the model (no model in use could see it).
    images_not_seen: bool = False
    # A video was attached but not shown to the model (the model in use cannot watch them).
    videos_not_seen: bool = False
    # A member's message: the answers "Answer again" replaced, oldest first (the UI's ‹1/2›).
    earlier_answers: list[str] = []


def _conversation(
    *, input_tokens: int, output_tokens: int, cost_usd: float | None, **fields: Any
) -> Conversation:
    usage = ConversationUsage(
        input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd
    )
    return Conversation(usage=usage, **fields)


_CONV = Columns(
    _conversation,
    "id",
    "title",
    "agent_id",
    "model_id",
    Col("open", read=bool),
    "status",
    "created_at",
    "updated_at",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "security_group",
)


def insert_conversation(
    c: apsw.Connection, conversation_id: str, agent_id: str, title: str
) -> None:
    """A new, empty conversation: inside a caller's transaction (a scheduled job's own
    conversation is written with the job, or neither is)."""
    stamp = now_iso()
    c.execute(
        "INSERT INTO conversations(id, title, agent_id, created_at, updated_at) VALUES (?,?,?,?,?)",
        (conversation_id, title, agent_id, stamp, stamp),
    )


class Claim(msgspec.Struct, frozen=True):
    """What `ConversationStore.claim` found and did: the conversation as written; when
    this claim marked it running, the conversations' write count right after (the runner
    takes that mark and copy as its own while the count has not moved); whether it
    named it."""

    conversation: Conversation
    marked_at: int | None
    named: bool


def _conversation_row(c: apsw.Connection, conversation_id: str) -> tuple[Any, ...] | None:
    """The conversation's row, inside a transaction that just wrote it."""
    return fetch_one(c, f"SELECT {_CONV.names} FROM conversations WHERE id=?", (conversation_id,))


class ConversationStore:
    """One per member's hub (it registers a write count with the database for its life)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._writes = db.count_writes(frozenset({"conversations"}))

    def unchanged_since(self, claim: Claim) -> bool:
        """Whether no conversation row was written since `claim` marked its own."""
        return claim.marked_at is not None and claim.marked_at == self._writes.value

    async def create(self, conversation_id: str, agent_id: str, title: str = "") -> Conversation:
        await self.db.transaction(
            lambda c: insert_conversation(c, conversation_id, agent_id, title)
        )
        return await self.get(conversation_id)

    async def get(self, conversation_id: str) -> Conversation:
        where = "FROM conversations WHERE id=?"
        return await _CONV.one(self.db, where, (conversation_id,), "no such conversation")

    async def all(self) -> list[Conversation]:
        return await _CONV.many(self.db, "FROM conversations ORDER BY created_at, id")

    async def update(self, conversation_id: str, **fields: Any) -> Conversation:
        """Set `title`, `open`, `model_id`, `status` or `security_group` (a `model_id` of
        None means AUTO; a `security_group` of None, the role's default)."""
        allowed = {"title", "open", "model_id", "status", "security_group"}
        if not set(fields) <= allowed:
            raise ValueError(f"cannot update {set(fields) - allowed}")
        if not fields:
            return await self.get(conversation_id)
        assignment = ", ".join(f"{k}=?" for k in fields)
        values = [int(v) if isinstance(v, bool) else v for v in fields.values()]

        def q(c: apsw.Connection) -> tuple[Any, ...]:
            # The row as written, in the same trip (this runs at least twice a turn).
            change_one(
                c,
                f"UPDATE conversations SET {assignment}, updated_at=? WHERE id=?",
                (*values, now_iso(), conversation_id),
                "no such conversation",
            )
            r = _conversation_row(c, conversation_id)
            assert r is not None
            return r

        return _CONV.row(await self.db.transaction(q))

    async def claim(self, conversation_id: str, title: str) -> Claim:
        """A message's turn about to start, in one trip: an idle conversation is marked
        running (others keep their status: a turn runs or waits for an approval), an
        untitled one is named `title`, and the row comes back as written. Raises
        NotFoundError like `get`, so it proves ownership as well."""

        def q(c: apsw.Connection) -> tuple[tuple[Any, ...], int | None, bool]:
            stamp = now_iso()
            c.execute(
                "UPDATE conversations SET status='running', updated_at=? "
                "WHERE id=? AND status='idle'",
                (stamp, conversation_id),
            )
            marked = c.changes() > 0
            c.execute(
                "UPDATE conversations SET title=?, updated_at=? WHERE id=? AND title=''",
                (title, stamp, conversation_id),
            )
            named = c.changes() > 0
            r = _conversation_row(c, conversation_id)
            if r is None:
                raise NotFoundError("no such conversation")
            # Read here, on the database thread right after the writes: a write that
            # lands after this transaction moves the count past it.
            return r, self._writes.value if marked else None, named

        row, marked_at, named = await self.db.transaction(q)
        return Claim(_CONV.row(row), marked_at, named)

    async def add_usage(
        self, conversation_id: str, input_tokens: int, output_tokens: int, cost: float | None
    ) -> None:
        await self.db.transaction(
            lambda c: c.execute(
                "UPDATE conversations SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                "cost_usd = CASE WHEN ? IS NULL THEN cost_usd ELSE coalesce(cost_usd, 0) + ? END WHERE id=?",
                (input_tokens, output_tokens, cost, cost, conversation_id),
            )
        )

    async def items(self, conversation_id: str) -> list[HistoryItem]:
        await self.get(conversation_id)

        def q(c: apsw.Connection) -> list[HistoryItem]:
            states = dict(
                fetch_all(
                    c,
                    "SELECT id, state FROM chat_calls WHERE conversation_id=?",
                    (conversation_id,),
                )
            )
            rows = fetch_all(
                c,
                "SELECT seq, role, body, attachments, summary, created_at FROM chat_messages "
                "WHERE conversation_id=? ORDER BY seq",
                (conversation_id,),
            )
            earlier: dict[int, list[str]] = {}
            for seq, text in fetch_all(
                c,
                "SELECT seq, text FROM chat_earlier_answers WHERE conversation_id=? "
                "AND seq IS NOT NULL ORDER BY id",
                (conversation_id,),
            ):
                earlier.setdefault(seq, []).append(text)
            items = [_item(r, states) for r in rows]
            return [
                msgspec.structs.replace(i, earlier_answers=earlier[i.seq])
                if i.seq in earlier
                else i
                for i in items
            ]

        return await self.db.call(q)

    async def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Conversations whose title or message text has every word of `query` (prefix
        match on the last), newest first, at most one hit each."""
        # Control and unprintable characters are no search words, and a NUL would end
        # the FTS5 query string early (an SQLite error, not an empty answer).
        printable = "".join(ch if ch.isprintable() else " " for ch in query)
        words = [w for w in printable.replace('"', " ").split() if w]
        if not words:
            return []
        # Each word quoted: the member's text is never FTS syntax ("AND", "*", "-x").
        match = " ".join(f'"{w}"' for w in words[:-1]) + f' "{words[-1]}"*'
        like = [f"%{_like_escape(w.lower())}%" for w in words]

        def q(c: apsw.Connection) -> list[SearchHit]:
            titled = fetch_all(
                c,
                "SELECT id, title, open, updated_at FROM conversations WHERE "
                + " AND ".join("lower(title) LIKE ? ESCAPE '\\'" for _ in like)
                + " ORDER BY updated_at DESC LIMIT ?",
                (*like, limit),
            )
            hits = {
                r[0]: SearchHit(
                    conversation_id=r[0],
                    title=r[1],
                    open=bool(r[2]),
                    updated_at=r[3],
                    snippet="",
                    seq=None,
                )
                for r in titled
            }
            rows = fetch_all(
                c,
                "SELECT f.conversation_id, f.rowid, snippet(chat_messages_fts, 0, '', '', '…', 12), "
                "k.title, k.open, k.updated_at FROM chat_messages_fts f "
                "JOIN conversations k ON k.id = f.conversation_id "
                "WHERE chat_messages_fts MATCH ? ORDER BY k.updated_at DESC, f.rowid DESC LIMIT ?",
                (match, limit * 5),
            )
            for r in rows:
                if r[0] not in hits:
                    hits[r[0]] = SearchHit(
                        conversation_id=r[0],
                        title=r[3],
                        open=bool(r[4]),
                        updated_at=r[5],
                        snippet=r[2],
                        seq=r[1],
                    )
            return sorted(hits.values(), key=lambda h: h.updated_at, reverse=True)[:limit]

        return await self.db.call(q)

    async def rewind(
        self, conversation_id: str, seq: int, keep_answers: bool = False
    ) -> tuple[Message, list[Attachment]]:
        """Take back a member's message and everything after it (to retry, regenerate or
        edit it): returns the message and its attachments; the rows are deleted. With
        `keep_answers` (Answer again) the answer's text and those it had replaced wait
        for the message sent again (`_insert` gives them its seq); else they go too.

        Only while nothing runs or waits, and only a message after the latest summary:
        what a summary stands for is no longer in the history the model sees."""

        def q(c: apsw.Connection) -> tuple[Message, list[Attachment]]:
            status = fetch_one(c, "SELECT status FROM conversations WHERE id=?", (conversation_id,))
            if status is None:
                raise NotFoundError("no such conversation")
            open_call = fetch_one(
                c,
                "SELECT 1 FROM chat_calls WHERE conversation_id=? "
                "AND state IN ('pending','awaiting_approval','running') LIMIT 1",
                (conversation_id,),
            )
            if status[0] != "idle" or open_call is not None:
                raise ConflictError("wait until the answer is finished, or stop it first")
            row = fetch_one(
                c,
                "SELECT role, body, attachments, summary, hidden FROM chat_messages "
                "WHERE conversation_id=? AND seq=?",
                (conversation_id, seq),
            )
            if row is None or row[0] != "user" or row[3]:
                raise NotFoundError("no such message of yours in this conversation")
            summarised = fetch_one(
                c,
                "SELECT 1 FROM chat_messages WHERE conversation_id=? AND summary=1 AND seq>? LIMIT 1",
                (conversation_id, seq),
            )
            if row[4] or summarised is not None:
                raise ConflictError(
                    "this message is part of a summary now and cannot be sent again"
                )
            kept = _answers_to_keep(c, conversation_id, seq) if keep_answers else []
            c.execute(
                "DELETE FROM chat_earlier_answers WHERE conversation_id=? AND (seq>=? OR seq IS NULL)",
                (conversation_id, seq),
            )
            c.executemany(
                "INSERT INTO chat_earlier_answers(conversation_id, seq, text, created_at) "
                "VALUES (?, NULL, ?, ?)",
                [(conversation_id, text, now_iso()) for text in kept],
            )
            c.execute(
                "DELETE FROM chat_calls WHERE conversation_id=? AND message_seq>=?",
                (conversation_id, seq),
            )
            c.execute(
                "DELETE FROM chat_messages WHERE conversation_id=? AND seq>=?",
                (conversation_id, seq),
            )
            return _decode_message(row[1]), msgspec.json.decode(row[2], type=list[Attachment])

        return await self.db.transaction(q)

    async def open_call(self, call_id: str) -> str | None:
        """The conversation of a call still waiting for its result, if there is one."""
        return await self.db.fetch_text(
            "SELECT conversation_id FROM chat_calls WHERE id=? AND state IN ('pending','awaiting_approval')",
            (call_id,),
        )

    async def needing_attention(self) -> list[str]:
        """Conversations whose last turn did not finish (crash, restart, pending approval)."""
        rows = await self.db.call(
            lambda c: fetch_all(
                c,
                "SELECT DISTINCT conversation_id FROM chat_calls WHERE state IN ('pending','running','awaiting_approval') "
                "UNION SELECT id FROM conversations WHERE status != 'idle'",
            )
        )
        return [str(r[0]) for r in rows]


# What Skald adds to a member's message for the model (what they were looking at, notes
# about attachments) is not what they typed: the UI shows only the latter.
_CONTEXT_BLOCK = re.compile(r"<skald-context>.*?</skald-context>\s*", re.DOTALL)
_VIEW_LINE = re.compile(r"^- ([^:\n]{1,120}):(?: (.*))?$")
ATTACHMENT_NOTE = "[attached: "


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def view_items(message: Message) -> list[ViewItem]:
    """The view context sent with a member's message, read back from its harness block."""
    if message.role != "user":
        return []
    for p in message.content:
        if isinstance(p, TextPart) and p.text.startswith("<skald-context>"):
            return _view_lines(p.text)
    return []


def _view_lines(block: str) -> list[ViewItem]:
    """`- label: value` lines, a value going on over lines indented by two spaces."""
    items: list[ViewItem] = []
    for line in block.split("\n"):
        found = _VIEW_LINE.match(line)
        if found:
            items.append(ViewItem(found[1], found[2] or ""))
        elif line.startswith("  ") and items:
            last = items[-1]
            value = f"{last.value}\n{line[2:]}" if last.value else line[2:]
            items[-1] = ViewItem(last.label, value)
    return items


def display_text(message: Message) -> str:
    if message.role != "user":
        return message.text
    typed = "".join(
        p.text
        for p in message.content
        if isinstance(p, TextPart) and not p.text.startswith(ATTACHMENT_NOTE)
    )
    return _CONTEXT_BLOCK.sub("", typed)


def _answers_to_keep(c: apsw.Connection, conversation_id: str, seq: int) -> list[str]:
    """The answers to message `seq` as shown: those it kept before, then the current
    one (its assistant texts up to the next message of the member), if it has text."""
    kept = [
        str(r[0])
        for r in fetch_all(
            c,
            "SELECT text FROM chat_earlier_answers WHERE conversation_id=? AND seq=? ORDER BY id",
            (conversation_id, seq),
        )
    ]
    texts = []
    for role, body in fetch_all(
        c,
        "SELECT role, body FROM chat_messages WHERE conversation_id=? AND seq>? AND summary=0 "
        "ORDER BY seq",
        (conversation_id, seq),
    ):
        if role == "user":
            break
        if role == "assistant":
            text = display_text(_decode_message(body)).strip()
            if text:
                texts.append(text)
    return [*kept, "\n\n".join(texts)] if texts else kept


def _item(r: tuple[Any, ...], states: Mapping[str, str]) -> HistoryItem:
    message = _decode_message(r[2])
    attachments = msgspec.json.decode(r[3], type=list[Attachment])
    return HistoryItem(
        view=view_items(message),
        images_not_seen=message.role == "user"
        and any(a.mime.startswith("image/") for a in attachments)
        and not any(isinstance(p, ImagePart) for p in message.content),
        videos_not_seen=message.role == "user"
        and any(a.mime.startswith("video/") for a in attachments)
        and not any(isinstance(p, VideoPart) for p in message.content),
        seq=r[0],
        role="summary" if r[4] else message.role,
        text=display_text(message),
        attachments=attachments,
        tool_calls=[
            CallView(
                id=call.id,
                name=call.name,
                arguments=call.arguments,
                status=states.get(call.id, "pending"),
            )
            for call in message.tool_calls
        ],
        tool_call_id=message.tool_call_id,
        is_error=message.is_error,
        created_at=r[5],
        interrupted=None if message.interrupted is None else message.interrupted.code,
    )


class OwnerHistory:
    """The agent loop's history store for one conversation, in the owner database."""

    def __init__(self, db: Database, conversation_id: str) -> None:
        self.db = db
        self._conversation_id = conversation_id
        # Set by the hub before a turn: attachments of the next user message.
        self.pending_attachments: list[Attachment] = []

    @property
    def conversation_id(self) -> str:
        return self._conversation_id

    async def append(self, message: Message) -> None:
        check_append(message)
        attachments = self.pending_attachments if message.role == "user" else []
        if message.role == "user":
            self.pending_attachments = []
        await self.db.transaction(lambda c: self._insert(c, message, attachments))

    def _insert(
        self,
        c: apsw.Connection,
        message: Message,
        attachments: list[Attachment],
        summary: bool = False,
    ) -> int:
        c.execute(
            "INSERT INTO chat_messages(conversation_id, role, body, attachments, summary, created_at) VALUES (?,?,?,?,?,?)",
            (
                self._conversation_id,
                message.role,
                _encode(message),
                _encode(attachments),
                int(summary),
                now_iso(),
            ),
        )
        seq = c.last_insert_rowid()
        if message.role == "user":  # a message sent again takes the answers kept for it
            c.execute(
                "UPDATE chat_earlier_answers SET seq=? WHERE conversation_id=? AND seq IS NULL",
                (seq, self._conversation_id),
            )
        stamp = now_iso()
        # The arguments live once, in the message body: a 10 MiB write_file stored twice
        # doubled the database. `chat_calls.arguments` stays '{}' for new rows.
        c.executemany(
            "INSERT INTO chat_calls(id, conversation_id, message_seq, ord, name, arguments, state, updated_at) "
            "VALUES (?,?,?,?,?,'{}','pending',?)",
            [
                (call.id, self._conversation_id, seq, i, call.name, stamp)
                for i, call in enumerate(message.tool_calls)
            ],
        )
        return seq

    async def revise_reply(self, text: str, attachments: list[Attachment]) -> None:
        """After a turn: the last answer says `text` instead ("" hides it) and carries
        `attachments` too (a plugin's after-turn hook)."""

        def q(c: apsw.Connection) -> None:
            row = fetch_one(
                c,
                "SELECT seq, body, attachments FROM chat_messages "
                "WHERE conversation_id=? AND role='assistant' ORDER BY seq DESC LIMIT 1",
                (self._conversation_id,),
            )
            if row is None:
                return
            message = _decode_message(row[1])
            content: list[ContentPart] = [TextPart(text=text)] if text else []
            revised = msgspec.structs.replace(message, content=content)
            kept = msgspec.json.decode(row[2], type=list[Attachment])
            c.execute(
                "UPDATE chat_messages SET body=?, attachments=? WHERE seq=?",
                (_encode(revised), _encode([*kept, *attachments]), row[0]),
            )

        await self.db.transaction(q)

    async def mark_call(self, call_id: str, state: CallState) -> None:
        check_mark(state)

        def q(c: apsw.Connection) -> None:
            self._require_open(c, call_id)
            c.execute(
                "UPDATE chat_calls SET state=?, updated_at=? WHERE id=?",
                (state.value, now_iso(), call_id),
            )

        await self.db.transaction(q)

    async def append_result(
        self, result: Message, state: CallState, metadata: Mapping[str, Any] | None = None
    ) -> None:
        call_id = check_result(result, state)

        def q(c: apsw.Connection) -> None:
            self._require_open(c, call_id)
            self._insert(c, result, [])
            c.execute(
                "UPDATE chat_calls SET state=?, metadata=?, updated_at=? WHERE id=?",
                (state.value, json.dumps(dict(metadata)) if metadata else None, now_iso(), call_id),
            )

        await self.db.transaction(q)

    def _require_open(self, c: apsw.Connection, call_id: str) -> None:
        row = fetch_one(
            c,
            "SELECT state FROM chat_calls WHERE id=? AND conversation_id=?",
            (call_id, self._conversation_id),
        )
        if row is None:
            raise ValueError(f"unknown tool call {call_id!r}")
        if CallState(row[0]).finished:
            raise ValueError(f"tool call {call_id!r} already has a result")

    def _load(self, c: apsw.Connection) -> list[Message]:
        rows = fetch_all(
            c,
            "SELECT body, summary FROM chat_messages WHERE conversation_id=? AND hidden=0 ORDER BY seq",
            (self._conversation_id,),
        )
        summaries = [r for r in rows if r[1]]
        rest = [r for r in rows if not r[1]]
        head = summaries[-1:]  # the latest summary stands for everything before it
        return [_decode_message(r[0]) for r in head + rest]

    async def load(self) -> list[Message]:
        return await self.db.call(self._load)

    async def start_turn(self, message: Message) -> list[Message] | None:
        attachments = self.pending_attachments

        def q(c: apsw.Connection) -> list[Message] | None:
            open_call = fetch_one(
                c,
                "SELECT 1 FROM chat_calls WHERE conversation_id=? "
                "AND state IN ('pending','awaiting_approval','running') LIMIT 1",
                (self._conversation_id,),
            )
            if open_call is not None:
                return None
            self._insert(c, message, attachments)
            return self._load(c)

        loaded = await self.db.transaction(q)
        if loaded is not None:
            self.pending_attachments = []
        return loaded

    async def unfinished_calls(self) -> list[UnfinishedCall]:
        rows = await self.db.call(
            lambda c: fetch_all(
                c,
                "SELECT k.state, k.ord, m.body FROM chat_calls k "
                "JOIN chat_messages m ON m.seq = k.message_seq WHERE k.conversation_id=? "
                "AND k.state IN ('pending','awaiting_approval','running') ORDER BY k.message_seq, k.ord",
                (self._conversation_id,),
            )
        )
        return [
            UnfinishedCall(_decode_message(r[2]).tool_calls[r[1]], CallState(r[0])) for r in rows
        ]

    async def replace_head(self, count: int, summary: Message) -> None:
        def q(c: apsw.Connection) -> None:
            visible = fetch_all(
                c,
                "SELECT seq, summary FROM chat_messages WHERE conversation_id=? AND hidden=0 ORDER BY summary DESC, seq",
                (self._conversation_id,),
            )
            # load() puts the latest summary first; older summaries are already superseded.
            ordered = [r for r in visible if r[1]][-1:] + [r for r in visible if not r[1]]
            hide = [r[0] for r in ordered[:count]] + [r[0] for r in visible if r[1]]
            c.executemany("UPDATE chat_messages SET hidden=1 WHERE seq=?", [(s,) for s in hide])
            self._insert(c, summary, [], summary=True)

        await self.db.transaction(q)
