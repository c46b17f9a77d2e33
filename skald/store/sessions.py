"""Login sessions in the registry. Tokens are stored only as SHA-256 hashes.

Every request looks its session up (`get_with_member`), so that read is kept
(`skald/store/kept.py`): a kept answer is used while nothing in this process has written
a row of the tables it came from (`READS`) and for at most `KEPT_S` seconds. Revocation
stays synchronous: a logout, a deactivation, a role edit or a deletion moves the count
before the writer's `await` returns, so the next request reads again. Trap: another
process's write is not counted; the age bound is what covers it (the CLI changes
accounts through a running server, never behind it; what it may write directly, a
password or a plugin switch, revokes nothing). A query here that reads another table
must add it to `READS`.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable

import apsw
import msgspec

from skald.store.database import Database, fetch_all, fetch_one
from skald.store.kept import KEPT_MAX, KeptReads
from skald.store.registry import insert_while_active, role_in, user_in
from skald.store.rows import Role, User


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    token_hash: str
    user_id: str
    created_at: float
    last_seen_at: float
    expires_at: float
    user_agent: str
    client: str


_COLUMNS = "token_hash, user_id, created_at, last_seen_at, expires_at, user_agent, client"


def _row(r: tuple[object, ...]) -> SessionRow:
    return SessionRow(**dict(zip(SessionRow.__struct_fields__, r, strict=True)))  # type: ignore[arg-type]


# The tables `get_with_member` reads (`user_in`, `role_in` included).
READS = frozenset({"sessions", "users", "roles", "role_capabilities", "role_attributes"})

Found = tuple[SessionRow, User | None, Role | None]


class SessionStore:
    def __init__(self, db: Database, clock: Callable[[], float] = time.monotonic) -> None:
        self.db = db
        # An unknown token is never kept (a guesser would fill the table). `KEPT_MAX` is
        # read here, at construction (a test lowers it).
        self.kept: KeptReads[str, Found | None] = KeptReads(
            db, READS, max_entries=KEPT_MAX, clock=clock, keep=lambda f: f is not None
        )

    async def insert(self, row: SessionRow) -> bool:
        """Store a new session, only while its user exists and is active (one statement:
        a deactivation that commits during the sign-in leaves no session behind).
        Returns whether it was stored."""
        values = (
            row.token_hash,
            row.user_id,
            row.created_at,
            row.last_seen_at,
            row.expires_at,
            row.user_agent,
            row.client,
        )
        return await insert_while_active(self.db, "sessions", _COLUMNS, values, row.user_id)

    async def device_key(self) -> bytes:
        """The key that signs device cookies (`skald.core.devices`), made on first use.

        In the registry, not in memory: devices stay trusted across restarts. A copy of
        the registry lets someone forge a device's sign-in budget, nothing more."""

        def q(c: apsw.Connection) -> bytes:
            c.execute(
                "INSERT INTO config(key, value) VALUES ('device_cookie_key', ?) "
                "ON CONFLICT(key) DO NOTHING",
                (json.dumps(secrets.token_hex(32)),),
            )
            r = fetch_one(c, "SELECT value FROM config WHERE key='device_cookie_key'")
            assert r is not None
            return bytes.fromhex(json.loads(r[0]))

        return await self.db.transaction(q)

    async def get_with_member(self, token_hash: str) -> Found | None:
        """The session, its user and the user's role: kept from an earlier read while
        still good (see the module's rule), else in one trip to the database thread
        (this runs on every request)."""

        def q(c: apsw.Connection) -> Found | None:
            r = fetch_one(c, f"SELECT {_COLUMNS} FROM sessions WHERE token_hash=?", (token_hash,))
            if r is None:
                return None
            session = _row(r)
            user = user_in(c, session.user_id)
            return session, user, None if user is None else role_in(c, user.role)

        return await self.kept.get(token_hash, q)

    async def get(self, token_hash: str) -> SessionRow | None:
        r = await self.db.fetch_one(
            f"SELECT {_COLUMNS} FROM sessions WHERE token_hash=?", (token_hash,)
        )
        return None if r is None else _row(r)

    async def touch(self, token_hash: str, now: float) -> None:
        await self.db.transaction(
            lambda c: c.execute(
                "UPDATE sessions SET last_seen_at=? WHERE token_hash=?", (now, token_hash)
            )
        )

    async def delete(self, token_hash: str) -> None:
        await self.db.transaction(
            lambda c: c.execute("DELETE FROM sessions WHERE token_hash=?", (token_hash,))
        )

    async def delete_for_user(self, user_id: str, keep: str | None = None) -> list[str]:
        """Delete every session of a user (but `keep`); return the hashes removed."""

        def q(c: apsw.Connection) -> list[str]:
            rows = fetch_all(
                c,
                "SELECT token_hash FROM sessions WHERE user_id=? AND token_hash IS NOT ?",
                (user_id, keep),
            )
            c.execute(
                "DELETE FROM sessions WHERE user_id=? AND token_hash IS NOT ?", (user_id, keep)
            )
            return [str(r[0]) for r in rows]

        return await self.db.transaction(q)

    async def count_for_user(self, user_id: str) -> int:
        r = await self.db.fetch_one("SELECT count(*) FROM sessions WHERE user_id=?", (user_id,))
        return int(r[0]) if r else 0

    async def purge(self, now: float, idle_s: float) -> int:
        """Remove sessions past their absolute or idle expiry; return how many."""

        def q(c: apsw.Connection) -> int:
            c.execute(
                "DELETE FROM sessions WHERE expires_at <= ? OR last_seen_at <= ?",
                (now, now - idle_s),
            )
            return c.changes()

        return await self.db.transaction(q)

    async def delete_for_encrypted_users(self) -> int:
        """At boot no encrypted member's key is in memory, so their sessions cannot work."""

        def q(c: apsw.Connection) -> int:
            c.execute(
                "DELETE FROM sessions WHERE user_id IN (SELECT id FROM users WHERE encrypted = 1)"
            )
            return c.changes()

        return await self.db.transaction(q)
