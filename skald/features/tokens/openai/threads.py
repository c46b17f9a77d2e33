"""Which Skald conversation an OpenAI client's request continues (the owner database).

Rule: a client names its conversation (`X-Skald-Conversation`, else the request's
`user` field): that key, per token, maps to one Skald conversation, and only the user
messages after the client's last assistant message are new (a client that re-sends the
whole history each time adds nothing twice). A client that names nothing is matched by
its history: after each answer the fingerprint of the whole exchange (every user and
assistant text, the answer included) is kept, so the next request whose earlier
messages have that fingerprint continues the same conversation.

Trap: the fingerprint is over what the client holds, so the answer goes in exactly as
it was sent (all streamed deltas joined, the pending-result prefix and the approval
note included); system messages are left out (clients rewrite them each time, with the
date or the states of devices).
"""

from __future__ import annotations

import hashlib
import time

import apsw
import msgspec

from skald.store.database import Database
from skald.store.migrations import Feature, Migration

_V1 = """
CREATE TABLE openai_threads(
    key TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    seen_seq INTEGER NOT NULL DEFAULT 0,
    used_at REAL NOT NULL
);
CREATE INDEX openai_threads_used ON openai_threads(used_at);
"""

FEATURE = Feature("openai_api", (Migration(1, "client threads", _V1),), after=("chat",))
KEEP_S = 90 * 86400  # a thread not used for this long is forgotten


class Thread(msgspec.Struct, frozen=True, kw_only=True):
    conversation_id: str
    seen_seq: int


def fingerprint(turns: list[tuple[str, str]]) -> str:
    """A digest of (role, text) pairs, texts with their outer whitespace stripped."""
    canonical = msgspec.json.encode([[r, " ".join(t.split())] for r, t in turns])
    return hashlib.sha256(canonical).hexdigest()


class Threads:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def find(self, key: str) -> Thread | None:
        found = await self.db.fetch_one(
            "SELECT conversation_id, seen_seq FROM openai_threads WHERE key=?", (key,)
        )
        return None if found is None else Thread(conversation_id=found[0], seen_seq=found[1])

    async def keep(self, keys: list[str], conversation_id: str, seen_seq: int) -> None:
        now = time.time()

        def q(c: apsw.Connection) -> None:
            for key in keys:
                c.execute(
                    "INSERT INTO openai_threads(key, conversation_id, seen_seq, used_at) "
                    "VALUES (?,?,?,?) ON CONFLICT(key) DO UPDATE SET "
                    "conversation_id=excluded.conversation_id, seen_seq=excluded.seen_seq, "
                    "used_at=excluded.used_at",
                    (key, conversation_id, seen_seq, now),
                )
            c.execute("DELETE FROM openai_threads WHERE used_at < ?", (now - KEEP_S,))

        await self.db.transaction(q)
