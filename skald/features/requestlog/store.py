"""The request log's reads of `llm_requests` (the registry's request metadata).

Rule: a member reads only rows whose `user_id` is theirs; another member's request is
"not found", exactly like one that does not exist. Rows are metadata (time, model,
tokens, cost, duration, outcome, origin), never content; the `error` column may name a
provider's address, so it is not given to members (the outcome is).
Trap: `llm_requests` has no index of its own on the member; this feature adds one
(`llm_requests_by_user`), without it a member's page scanned every row.
"""

from __future__ import annotations

import msgspec

from skald.errors import NotFoundError
from skald.store.database import Database
from skald.store.migrations import Feature, Migration

SCHEMA = Feature(
    "requestlog",
    (
        Migration(
            1,
            "a member's requests, newest first, by index",
            "CREATE INDEX llm_requests_by_user ON llm_requests(user_id, id)",
        ),
    ),
    after=("models",),
)


class RequestItem(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    at: float  # epoch seconds
    model: str  # the model's name ("(removed)" once deleted)
    provider: str
    input_tokens: int
    output_tokens: int
    estimated: bool
    cost_usd: float | None
    duration_ms: float
    outcome: str  # finished | stopped | failed
    origin: str | None  # the conversation (a chat's, a job's, a task's)


class ProviderCount(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    requests: int
    failures: int
    last_failure_at: float | None


_SELECT = (
    "SELECT r.id, r.at, coalesce(m.name, '(removed)'), coalesce(p.name, '(removed)'), "
    "r.input_tokens, r.output_tokens, r.estimated, r.cost_usd, r.latency_ms, r.status, "
    "r.origin FROM llm_requests r LEFT JOIN llm_models m ON m.id = r.model_id "
    "LEFT JOIN llm_providers p ON p.id = m.provider_id"
)


def _item(r: tuple[object, ...]) -> RequestItem:
    return RequestItem(
        id=int(r[0]),  # type: ignore[call-overload]
        at=float(r[1]),  # type: ignore[arg-type]
        model=str(r[2]),
        provider=str(r[3]),
        input_tokens=int(r[4]),  # type: ignore[call-overload]
        output_tokens=int(r[5]),  # type: ignore[call-overload]
        estimated=bool(r[6]),
        cost_usd=None if r[7] is None else float(r[7]),  # type: ignore[arg-type]
        duration_ms=float(r[8]),  # type: ignore[arg-type]
        outcome=str(r[9]),
        origin=None if r[10] is None else str(r[10]),
    )


class RequestLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def mine(self, user_id: str, before: int | None, limit: int) -> list[RequestItem]:
        sql = f"{_SELECT} WHERE r.user_id = ? AND r.id < ? ORDER BY r.id DESC LIMIT ?"
        params = (user_id, before if before is not None else 2**62, limit)
        rows = await self.db.fetch_all(sql, params)
        return [_item(r) for r in rows]

    async def one(self, user_id: str, request_id: int) -> RequestItem:
        sql = f"{_SELECT} WHERE r.id = ? AND r.user_id = ?"
        row = await self.db.fetch_one(sql, (request_id, user_id))
        if row is None:
            raise NotFoundError("no such request")
        return _item(row)

    async def providers(self, since: float) -> list[ProviderCount]:
        """Per provider since `since`: requests, failures, the last failure's time."""
        sql = (
            "SELECT coalesce(p.name, '(removed)'), count(*), sum(r.status = 'failed'), "
            "max(CASE WHEN r.status = 'failed' THEN r.at END) FROM llm_requests r "
            "LEFT JOIN llm_models m ON m.id = r.model_id "
            "LEFT JOIN llm_providers p ON p.id = m.provider_id WHERE r.at >= ? GROUP BY 1 "
            "ORDER BY 2 DESC"
        )
        rows = await self.db.fetch_all(sql, (since,))
        return [
            ProviderCount(
                provider=str(r[0]),
                requests=int(r[1]),
                failures=int(r[2] or 0),
                last_failure_at=None if r[3] is None else float(r[3]),
            )
            for r in rows
        ]
