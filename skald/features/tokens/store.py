"""API tokens in the registry: one row per token, the secret only as a keyed hash.

Rule: the secret part of a token is never stored or logged; the row holds
HMAC-SHA256(key, token) where the key is derived from the instance key
(`data/instance.key`, outside the database). A fast keyed hash is enough: the secret
is 256 random bits, so no dictionary or brute force applies (a slow password hash
would cost every API request tens of milliseconds for nothing), and without the
instance key a copied database cannot even check a guess.

Trap: revocation deletes the row (nothing is cached), so the next request is 401;
streams still open poll `exists` (`skald/features/tokens/service.py`).
"""

from __future__ import annotations

import json

import apsw
import msgspec

from skald.store.database import Database
from skald.store.migrations import Feature, Migration
from skald.store.registry import insert_while_active

_V1 = """
CREATE TABLE api_tokens(
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    scopes TEXT NOT NULL,
    hash TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_used_at REAL,
    expires_at REAL
);
CREATE INDEX api_tokens_user ON api_tokens(user_id);
"""

FEATURE = Feature("tokens", (Migration(1, "API tokens", _V1),), after=("accounts",))


class TokenRow(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    user_id: str
    name: str
    scopes: list[str]
    hash: str
    created_at: float
    last_used_at: float | None
    expires_at: float | None


_COLUMNS = "id, user_id, name, scopes, hash, created_at, last_used_at, expires_at"


def _row(r: tuple[object, ...]) -> TokenRow:
    values = dict(zip(TokenRow.__struct_fields__, r, strict=True))
    values["scopes"] = json.loads(str(values["scopes"]))
    return TokenRow(**values)  # type: ignore[arg-type]


class TokenStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert(self, row: TokenRow, fewer_than: int) -> bool:
        """Store a new token while its member exists and is active and holds fewer than
        `fewer_than` tokens (one statement)."""
        values = (
            row.id,
            row.user_id,
            row.name,
            json.dumps(row.scopes),
            row.hash,
            row.created_at,
            row.last_used_at,
            row.expires_at,
        )
        return await insert_while_active(
            self.db, "api_tokens", _COLUMNS, values, row.user_id, fewer_than=fewer_than
        )

    async def get(self, token_id: str) -> TokenRow | None:
        found = await self.db.fetch_one(
            f"SELECT {_COLUMNS} FROM api_tokens WHERE id=?", (token_id,)
        )
        return None if found is None else _row(found)

    async def for_user(self, user_id: str) -> list[TokenRow]:
        rows = await self.db.fetch_all(
            f"SELECT {_COLUMNS} FROM api_tokens WHERE user_id=? ORDER BY created_at, id", (user_id,)
        )
        return [_row(r) for r in rows]

    async def delete(self, user_id: str, token_id: str) -> bool:
        def q(c: apsw.Connection) -> bool:
            c.execute("DELETE FROM api_tokens WHERE id=? AND user_id=?", (token_id, user_id))
            return c.changes() == 1

        return await self.db.transaction(q)

    async def touch(self, token_id: str, now: float) -> None:
        await self.db.transaction(
            lambda c: c.execute("UPDATE api_tokens SET last_used_at=? WHERE id=?", (now, token_id))
        )

    async def counts(self) -> list[tuple[str, str, int]]:
        """(user id, username, number of tokens) for every member holding one."""
        rows = await self.db.fetch_all(
            "SELECT u.id, u.username, count(*) FROM api_tokens t JOIN users u "
            "ON u.id = t.user_id GROUP BY u.id ORDER BY u.username"
        )
        return [(str(a), str(b), int(n)) for a, b, n in rows]
