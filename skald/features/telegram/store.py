"""What the bridge keeps in the registry: its settings (the token sealed), the update
offset, the inbox of updates not yet answered, pairing codes, links and group settings.

Rules:
- A pairing code is written before it is sent, and a chat's pending code is reused
  until it expires (24 h): the code a member reads is always the one stored.
- The update offset moves in the same transaction that stores the updates it skips, so
  a crash can neither lose an update (offset ahead of the inbox) nor see it twice
  (inbox rows are keyed by Telegram's update id).

Trap: a read that fails (a damaged table) raises; nothing here answers "not paired"
or makes a fresh table instead, so a broken pairing store never silently unlinks
anyone: the bridge reports it to administrators.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import apsw
import msgspec

from skald.store.columns import Columns
from skald.store.database import Database
from skald.store.migrations import Feature, Migration

__all__ = ["CODE_TTL_S", "TELEGRAM_REGISTRY", "Link", "Settings", "TelegramStore"]

CODE_TTL_S = 24 * 3600
DEFAULT_BASE_URL = "https://api.telegram.org"
_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a phone

_V1 = f"""
CREATE TABLE telegram_settings(
    id INTEGER PRIMARY KEY CHECK (id = 1),
    enabled INTEGER NOT NULL DEFAULT 0,
    base_url TEXT NOT NULL DEFAULT '{DEFAULT_BASE_URL}',
    token_sealed TEXT,
    bot_username TEXT NOT NULL DEFAULT '',
    web_url TEXT NOT NULL DEFAULT '',
    update_offset INTEGER NOT NULL DEFAULT 0
);
INSERT INTO telegram_settings(id) VALUES (1);
CREATE TABLE telegram_links(
    tg_user_id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    linked_at REAL NOT NULL,
    home_chat_id INTEGER
);
CREATE INDEX telegram_links_user ON telegram_links(user_id);
CREATE TABLE telegram_chats(
    chat_id INTEGER NOT NULL,
    tg_user_id INTEGER NOT NULL,
    conversation_id TEXT NOT NULL,
    PRIMARY KEY (chat_id, tg_user_id)
);
CREATE TABLE telegram_codes(
    code TEXT PRIMARY KEY,
    tg_user_id INTEGER UNIQUE,
    user_id TEXT UNIQUE,
    expires_at REAL NOT NULL
);
CREATE TABLE telegram_groups(
    chat_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    prefix TEXT NOT NULL DEFAULT '',
    media INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE telegram_updates(
    update_id INTEGER PRIMARY KEY,
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'new' CHECK (state IN ('new', 'sent')),
    conversation_id TEXT,
    base_seq INTEGER,
    reply_message_id INTEGER
);
"""
TELEGRAM_REGISTRY = Feature(
    "telegram", (Migration(1, "bridge settings, pairing and inbox", _V1),), after=("accounts",)
)


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    enabled: bool
    base_url: str
    token_sealed: str | None
    bot_username: str
    web_url: str  # where "see details" buttons point ('' = no such button)
    update_offset: int


@dataclass(frozen=True)
class Link:
    tg_user_id: int
    user_id: str
    linked_at: float
    home_chat_id: int | None


@dataclass(frozen=True)
class Pending:
    """An update in the inbox: `sent` once it was handed to the member's conversation."""

    update_id: int
    payload: dict[str, Any]
    state: str
    conversation_id: str | None
    base_seq: int | None
    reply_message_id: int | None  # the answer's message, once its first words went out


# The column types (INTEGER, TEXT, REAL) give each field its Python type.
_LINK = Columns(Link, "tg_user_id", "user_id", "linked_at", "home_chat_id")


def new_code() -> str:
    return "".join(secrets.choice(_CODE_ALPHABET) for _ in range(8))


def normal_code(text: str) -> str:
    return "".join(text.upper().split()).replace("-", "")


class TelegramStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- settings -----------------------------------------------------------------------

    async def settings(self) -> Settings:
        def read(c: apsw.Connection) -> Settings:
            row = c.execute(
                "SELECT enabled, base_url, token_sealed, bot_username, web_url, update_offset "
                "FROM telegram_settings WHERE id = 1"
            ).fetchone()
            assert row is not None  # migration 1 inserts it; nothing deletes it
            return Settings(
                enabled=bool(row[0]),
                base_url=row[1],
                token_sealed=row[2],
                bot_username=row[3],
                web_url=row[4],
                update_offset=row[5],
            )

        return await self.db.call(read)

    async def save_settings(
        self,
        *,
        enabled: bool,
        base_url: str,
        web_url: str,
        token_sealed: str | None,
        keep_token: bool,
    ) -> None:
        def write(c: apsw.Connection) -> None:
            c.execute(
                "UPDATE telegram_settings SET enabled=?, base_url=?, web_url=? WHERE id=1",
                (int(enabled), base_url, web_url),
            )
            if not keep_token:
                # A new bot: its updates are numbered afresh, its name is learnt again.
                c.execute(
                    "UPDATE telegram_settings SET token_sealed=?, update_offset=0, "
                    "bot_username='' WHERE id=1",
                    (token_sealed,),
                )

        await self.db.transaction(write)

    async def set_bot_username(self, name: str) -> None:
        await self.db.execute("UPDATE telegram_settings SET bot_username=? WHERE id=1", (name,))

    # -- the inbox ----------------------------------------------------------------------

    async def take_updates(self, updates: list[dict[str, Any]]) -> None:
        """Keep these updates and move the offset past them, in one transaction."""
        if not updates:
            return

        def write(c: apsw.Connection) -> None:
            for update in updates:
                c.execute(
                    "INSERT OR IGNORE INTO telegram_updates(update_id, payload) VALUES (?, ?)",
                    (int(update["update_id"]), msgspec.json.encode(update).decode()),
                )
            last = max(int(u["update_id"]) for u in updates)
            c.execute(
                "UPDATE telegram_settings SET update_offset=max(update_offset, ?) WHERE id=1",
                (last + 1,),
            )

        await self.db.transaction(write)

    async def pending(self) -> list[Pending]:
        rows: list[Any] = await self.db.fetch_all(
            "SELECT update_id, payload, state, conversation_id, base_seq, reply_message_id "
            "FROM telegram_updates ORDER BY update_id"
        )
        return [
            Pending(
                int(r[0]),
                msgspec.json.decode(str(r[1])),
                str(r[2]),
                None if r[3] is None else str(r[3]),
                None if r[4] is None else int(r[4]),
                None if r[5] is None else int(r[5]),
            )
            for r in rows
        ]

    async def replying_in(self, update_id: int, message_id: int) -> None:
        """The answer to this update is being written into that Telegram message."""
        await self.db.execute(
            "UPDATE telegram_updates SET reply_message_id=? WHERE update_id=?",
            (message_id, update_id),
        )

    async def mark_sent(self, update_id: int, conversation_id: str, base_seq: int) -> None:
        await self.db.execute(
            "UPDATE telegram_updates SET state='sent', conversation_id=?, base_seq=? "
            "WHERE update_id=?",
            (conversation_id, base_seq, update_id),
        )

    async def done(self, update_id: int) -> None:
        await self.db.execute("DELETE FROM telegram_updates WHERE update_id=?", (update_id,))

    # -- pairing ------------------------------------------------------------------------

    async def code_for_chat(self, tg_user_id: int, now: float | None = None) -> str:
        """The pending code of this Telegram user, or a new one, stored before returned."""
        at = time.time() if now is None else now

        def write(c: apsw.Connection) -> str:
            c.execute("DELETE FROM telegram_codes WHERE expires_at <= ?", (at,))
            row = c.execute(
                "SELECT code FROM telegram_codes WHERE tg_user_id=?", (tg_user_id,)
            ).fetchone()
            if row is not None:
                return str(row[0])
            code = new_code()
            c.execute(
                "INSERT INTO telegram_codes(code, tg_user_id, expires_at) VALUES (?, ?, ?)",
                (code, tg_user_id, at + CODE_TTL_S),
            )
            return code

        return await self.db.transaction(write)

    async def code_for_member(self, user_id: str, now: float | None = None) -> tuple[str, float]:
        """A code the member types into the bot (their pending one, or a new one)."""
        at = time.time() if now is None else now

        def write(c: apsw.Connection) -> tuple[str, float]:
            c.execute("DELETE FROM telegram_codes WHERE expires_at <= ?", (at,))
            row = c.execute(
                "SELECT code, expires_at FROM telegram_codes WHERE user_id=?", (user_id,)
            ).fetchone()
            if row is not None:
                return str(row[0]), float(row[1])
            code = new_code()
            c.execute(
                "INSERT INTO telegram_codes(code, user_id, expires_at) VALUES (?, ?, ?)",
                (code, user_id, at + CODE_TTL_S),
            )
            return code, at + CODE_TTL_S

        return await self.db.transaction(write)

    async def redeem_chat_code(
        self, code: str, user_id: str, now: float | None = None
    ) -> int | None:
        """The member typed a code the bot gave: link that Telegram user to them."""
        found = await self._redeem(normal_code(code), "tg_user_id", user_id, None, now)
        return None if found is None else int(found)

    async def redeem_member_code(
        self, code: str, tg_user_id: int, now: float | None = None
    ) -> str | None:
        """The Telegram user typed a code the web page gave: link them to its member."""
        found = await self._redeem(normal_code(code), "user_id", None, tg_user_id, now)
        return None if found is None else str(found)

    async def _redeem(
        self,
        code: str,
        column: str,
        user_id: str | None,
        tg_user_id: int | None,
        now: float | None,
    ) -> Any:
        at = time.time() if now is None else now

        def write(c: apsw.Connection) -> Any:
            row = c.execute(
                f"SELECT {column} FROM telegram_codes WHERE code=? AND expires_at > ? "
                f"AND {column} IS NOT NULL",
                (code, at),
            ).fetchone()
            if row is None:
                return None
            c.execute("DELETE FROM telegram_codes WHERE code=?", (code,))
            tg = tg_user_id if tg_user_id is not None else int(row[0])
            member = user_id if user_id is not None else str(row[0])
            c.execute(
                "INSERT OR REPLACE INTO telegram_links(tg_user_id, user_id, linked_at) "
                "VALUES (?, ?, ?)",
                (tg, member, at),
            )
            return row[0]

        return await self.db.transaction(write)

    async def link(self, tg_user_id: int) -> Link | None:
        return await _LINK.find(self.db, "FROM telegram_links WHERE tg_user_id=?", (tg_user_id,))

    async def links_of(self, user_id: str) -> list[Link]:
        rest = "FROM telegram_links WHERE user_id=? ORDER BY linked_at"
        return await _LINK.many(self.db, rest, (user_id,))

    async def unlink(self, *, tg_user_id: int | None = None, user_id: str | None = None) -> int:
        def write(c: apsw.Connection) -> int:
            if tg_user_id is not None:
                c.execute("DELETE FROM telegram_chats WHERE tg_user_id=?", (tg_user_id,))
                c.execute("DELETE FROM telegram_links WHERE tg_user_id=?", (tg_user_id,))
            else:
                c.execute(
                    "DELETE FROM telegram_chats WHERE tg_user_id IN "
                    "(SELECT tg_user_id FROM telegram_links WHERE user_id=?)",
                    (user_id,),
                )
                c.execute("DELETE FROM telegram_links WHERE user_id=?", (user_id,))
            return c.changes()

        return await self.db.transaction(write)

    async def set_home(self, tg_user_id: int, chat_id: int) -> None:
        await self.db.execute(
            "UPDATE telegram_links SET home_chat_id=? WHERE tg_user_id=?", (chat_id, tg_user_id)
        )

    async def home_of(self, user_id: str) -> int | None:
        """The chat notifications go to: the one `/sethome` chose, else the private chat."""
        links = await self.links_of(user_id)
        for link in links:
            if link.home_chat_id is not None:
                return link.home_chat_id
        return links[0].tg_user_id if links else None

    # -- conversations and groups -------------------------------------------------------

    async def conversation(self, chat_id: int, tg_user_id: int) -> str | None:
        return await self.db.fetch_text(
            "SELECT conversation_id FROM telegram_chats WHERE chat_id=? AND tg_user_id=?",
            (chat_id, tg_user_id),
        )

    async def set_conversation(self, chat_id: int, tg_user_id: int, conversation_id: str) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO telegram_chats(chat_id, tg_user_id, conversation_id) "
            "VALUES (?, ?, ?)",
            (chat_id, tg_user_id, conversation_id),
        )

    async def chat_of(self, user_id: str, conversation_id: str) -> int | None:
        """The chat a conversation is carried on (one of this member's links), if any."""
        row = await self.db.fetch_one(
            "SELECT k.chat_id FROM telegram_chats k JOIN telegram_links l "
            "ON l.tg_user_id = k.tg_user_id WHERE k.conversation_id=? AND l.user_id=?",
            (conversation_id, user_id),
        )
        return None if row is None else int(row[0])

    async def group(self, chat_id: int, title: str = "") -> tuple[str, bool]:
        """A group's prefix ('' = none) and whether media are taken there; a group seen
        for the first time is listed for the administrator (its title kept fresh)."""

        def write(c: apsw.Connection) -> tuple[str, bool]:
            c.execute(
                "INSERT INTO telegram_groups(chat_id, title) VALUES (?, ?) "
                "ON CONFLICT(chat_id) DO UPDATE SET title=excluded.title "
                "WHERE excluded.title != '' AND excluded.title != telegram_groups.title",
                (chat_id, title),
            )
            row = c.execute(
                "SELECT prefix, media FROM telegram_groups WHERE chat_id=?", (chat_id,)
            ).fetchall()[0]
            return str(row[0]), bool(row[1])

        return await self.db.transaction(write)

    async def groups(self) -> list[tuple[int, str, str, bool]]:
        """Every group the bot has seen: (chat id, title, prefix, media)."""
        rows: list[Any] = await self.db.fetch_all(
            "SELECT chat_id, title, prefix, media FROM telegram_groups ORDER BY title, chat_id"
        )
        return [(int(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]

    async def set_group(self, chat_id: int, prefix: str, media: bool) -> None:
        await self.db.execute(
            "INSERT INTO telegram_groups(chat_id, prefix, media) VALUES (?, ?, ?) "
            "ON CONFLICT(chat_id) DO UPDATE SET prefix=excluded.prefix, media=excluded.media",
            (chat_id, prefix, int(media)),
        )

    async def counts(self) -> dict[str, int]:
        def read(c: apsw.Connection) -> dict[str, int]:
            links: Any = c.execute("SELECT count(*) FROM telegram_links").fetchall()[0][0]
            waiting: Any = c.execute("SELECT count(*) FROM telegram_updates").fetchall()[0][0]
            return {"links": int(links), "pending_updates": int(waiting)}

        return await self.db.call(read)
