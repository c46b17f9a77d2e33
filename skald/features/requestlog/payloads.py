"""Request payloads: on the member's opt-in, what was sent to a model and what came back,
kept in the member's own encrypted database only, pruned by age and total size.

Rule: off by default; nothing is written anywhere until the member turns it on, and
then only into `member.db` (their SQLCipher file): never the registry, a log or another
file. Turning it off deletes what was kept. The headers kept are the ones Skald can
state without a secret (the API key is never stored). The request is Skald's request as
handed to the provider's client (messages, tools, limits), not the wire bytes.
Trap: the pruning runs in the same transaction as the insert, so the total stays under
`max_bytes` after every write (the newest row alone may exceed it: it is kept).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import apsw
import msgspec

from skald.store.database import Database
from skald.store.migrations import Feature, Migration

OWNER_SCHEMA = Feature(
    "requestlog",
    (
        Migration(
            1,
            "opt-in request payloads, in the member's own database",
            """
CREATE TABLE request_log_settings(
    id INTEGER PRIMARY KEY CHECK (id = 1),
    keep_payloads INTEGER NOT NULL DEFAULT 0 CHECK (keep_payloads IN (0, 1)),
    max_days INTEGER NOT NULL DEFAULT 30,
    max_bytes INTEGER NOT NULL DEFAULT 20000000
);
CREATE TABLE request_payloads(
    request_id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    headers TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    bytes INTEGER NOT NULL
);
CREATE INDEX request_payloads_by_time ON request_payloads(at);
""",
        ),
    ),
)


class PayloadSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    keep_payloads: bool = False
    max_days: Annotated[int, msgspec.Meta(ge=1, le=365)] = 30
    max_bytes: Annotated[int, msgspec.Meta(ge=100_000, le=1_000_000_000)] = 20_000_000


class Payload(msgspec.Struct, frozen=True, kw_only=True):
    request_id: int
    headers: dict[str, str]
    request: Any
    response: Any


def _settings(c: apsw.Connection) -> PayloadSettings:
    row = c.execute(
        "SELECT keep_payloads, max_days, max_bytes FROM request_log_settings WHERE id = 1"
    ).fetchone()
    if row is None:
        return PayloadSettings()
    return PayloadSettings(keep_payloads=bool(row[0]), max_days=int(row[1]), max_bytes=int(row[2]))


def prune(c: apsw.Connection, settings: PayloadSettings, now: float) -> None:
    c.execute("DELETE FROM request_payloads WHERE at < ?", (now - settings.max_days * 86400,))
    total = c.execute("SELECT coalesce(sum(bytes), 0) FROM request_payloads").fetchone()[0]  # type: ignore[index]
    if total <= settings.max_bytes:
        return
    # Newest first, summing: the first row that does not fit goes, with every older one
    # (the newest row is always kept).
    rows = c.execute("SELECT request_id, bytes FROM request_payloads ORDER BY at DESC").fetchall()
    kept = 0
    for i, (request_id, size) in enumerate(rows):
        kept += int(size)  # type: ignore[arg-type]
        if kept > settings.max_bytes and i > 0:
            c.execute(
                "DELETE FROM request_payloads WHERE at <= (SELECT at FROM request_payloads WHERE request_id = ?)",
                (request_id,),
            )
            return


class Payloads:
    """A member's payload store (their own database)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def settings(self) -> PayloadSettings:
        return await self.db.call(_settings)

    async def save_settings(self, settings: PayloadSettings) -> PayloadSettings:
        def q(c: apsw.Connection) -> None:
            c.execute(
                "INSERT INTO request_log_settings(id, keep_payloads, max_days, max_bytes) "
                "VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "keep_payloads = excluded.keep_payloads, max_days = excluded.max_days, "
                "max_bytes = excluded.max_bytes",
                (int(settings.keep_payloads), settings.max_days, settings.max_bytes),
            )
            if settings.keep_payloads:
                prune(c, settings, time.time())
            else:
                c.execute("DELETE FROM request_payloads")  # off: what was kept goes too

        await self.db.transaction(q)
        return settings

    async def keep(
        self, request_id: int, headers: dict[str, str], request: Any, response: Any
    ) -> bool:
        """Write one payload if the member keeps them; False when they do not."""
        now = time.time()

        def q(c: apsw.Connection) -> bool:
            settings = _settings(c)
            if not settings.keep_payloads:
                return False
            body = msgspec.json.encode(request).decode()
            answer = msgspec.json.encode(response).decode()
            head = msgspec.json.encode(headers).decode()
            size = len(body) + len(answer) + len(head)
            c.execute(
                "INSERT OR REPLACE INTO request_payloads(request_id, at, headers, request, "
                "response, bytes) VALUES (?,?,?,?,?,?)",
                (request_id, now, head, body, answer, size),
            )
            prune(c, settings, now)
            return True

        return await self.db.transaction(q)

    async def get(self, request_id: int) -> Payload | None:
        row = await self.db.call(
            lambda c: c.execute(
                "SELECT headers, request, response FROM request_payloads WHERE request_id = ?",
                (request_id,),
            ).fetchone()
        )
        if row is None:
            return None
        return Payload(
            request_id=request_id,
            headers=msgspec.json.decode(row[0]),
            request=msgspec.json.decode(row[1]),
            response=msgspec.json.decode(row[2]),
        )
