"""The usage aggregate and the spending caps: registry tables of the feature `usage`.

Rule: `usage_hourly` holds one row per (member, UTC hour, model) with counts only
(turns, requests, failures, tokens, cost), kept up to date by a trigger on
`llm_requests` in the same transaction as the request row, so a view never scans the
request table. Turns are counted at turn start (`check_and_count`), under model '' (the
model is chosen after the count; per model the charts show requests).

Trap: the aggregate is by UTC hour; a day or month in a time zone whose offset is not
whole hours starts at the hour before its first minute (a few minutes counted early).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated

import apsw
import msgspec

from skald.store.database import Database
from skald.store.migrations import Feature, Migration

__all__ = ["SCHEMA", "Caps", "Totals", "UsageStore"]

_V1 = """
CREATE TABLE usage_hourly(
    user_id TEXT NOT NULL,
    hour INTEGER NOT NULL,
    model_id TEXT NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, hour, model_id)
) WITHOUT ROWID;
-- Everyone's figures read this index alone (it covers every column they sum).
CREATE INDEX usage_hourly_by_hour ON usage_hourly(
    hour, user_id, model_id, turns, requests, input_tokens, output_tokens, cost_usd);
CREATE TRIGGER usage_hourly_count AFTER INSERT ON llm_requests BEGIN
    INSERT INTO usage_hourly(user_id, hour, model_id, requests, failures, input_tokens,
                             output_tokens, cost_usd)
    VALUES (NEW.user_id, CAST(NEW.at / 3600 AS INTEGER), NEW.model_id, 1,
            NEW.status = 'failed', NEW.input_tokens, NEW.output_tokens,
            coalesce(NEW.cost_usd, 0))
    ON CONFLICT (user_id, hour, model_id) DO UPDATE SET
        requests = requests + 1,
        failures = failures + excluded.failures,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cost_usd = cost_usd + excluded.cost_usd;
END;
INSERT INTO usage_hourly(user_id, hour, model_id, requests, failures, input_tokens,
                         output_tokens, cost_usd)
SELECT user_id, CAST(at / 3600 AS INTEGER), model_id, count(*), sum(status = 'failed'),
       sum(input_tokens), sum(output_tokens), sum(coalesce(cost_usd, 0))
FROM llm_requests GROUP BY 1, 2, 3;
-- Spending caps: per role (scope 'role', target = role name) or per member (scope
-- 'user', target = user id; replaces the role's row). 0 = unlimited.
CREATE TABLE usage_caps(
    scope TEXT NOT NULL CHECK (scope IN ('role', 'user')),
    target TEXT NOT NULL,
    turns_day INTEGER NOT NULL DEFAULT 0 CHECK (turns_day >= 0),
    tokens_day INTEGER NOT NULL DEFAULT 0 CHECK (tokens_day >= 0),
    cost_day REAL NOT NULL DEFAULT 0 CHECK (cost_day >= 0),
    turns_month INTEGER NOT NULL DEFAULT 0 CHECK (turns_month >= 0),
    tokens_month INTEGER NOT NULL DEFAULT 0 CHECK (tokens_month >= 0),
    cost_month REAL NOT NULL DEFAULT 0 CHECK (cost_month >= 0),
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, target)
) WITHOUT ROWID;
-- The 80 % warnings given: one per member, period ('day:2026-12-02') and measure.
CREATE TABLE usage_warnings(
    user_id TEXT NOT NULL,
    period TEXT NOT NULL,
    measure TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (user_id, period, measure)
) WITHOUT ROWID;
"""

SCHEMA = Feature(
    "usage",
    (Migration(1, "hourly usage aggregate, spending caps, cap warnings", _V1),),
    after=("models",),
)

MEASURES = ("turns", "tokens", "cost")


Count = Annotated[int, msgspec.Meta(ge=0, le=10**12)]
Money = Annotated[float, msgspec.Meta(ge=0, le=10**9)]


class Caps(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Limits per day and per month; 0 means unlimited."""

    turns_day: Count = 0
    tokens_day: Count = 0
    cost_day: Money = 0.0
    turns_month: Count = 0
    tokens_month: Count = 0
    cost_month: Money = 0.0

    def limit(self, period: str, measure: str) -> float:
        return float(getattr(self, f"{measure}_{period}"))

    @property
    def unlimited(self) -> bool:
        return not any(msgspec.structs.astuple(self))


class Totals(msgspec.Struct, frozen=True):
    turns: int = 0
    tokens: int = 0
    cost: float = 0.0

    def of(self, measure: str) -> float:
        return float(getattr(self, measure))


_COUNT_TURN = (
    "INSERT INTO usage_hourly(user_id, hour, model_id, turns) VALUES (?,?,'',1) "
    "ON CONFLICT (user_id, hour, model_id) DO UPDATE SET turns = turns + 1"
)


def _count(c: apsw.Connection, user_id: str, at: float) -> None:
    c.execute(_COUNT_TURN, (user_id, int(at // 3600)))


# A cap check's verdict on (caps, used today, used this month): the refusal or None,
# and the warnings due as (period key, measure, text).
Decide = Callable[["Caps", "Totals", "Totals"], tuple[str | None, list[tuple[str, str, str]]]]

_CAP_COLS = "turns_day, tokens_day, cost_day, turns_month, tokens_month, cost_month"


def _caps(row: Sequence[object] | None) -> Caps | None:
    if row is None:
        return None
    return Caps(**dict(zip(_CAP_COLS.split(", "), row, strict=True)))  # type: ignore[arg-type]


def _totals(c: apsw.Connection, user_id: str, since: float) -> Totals:
    row = c.execute(
        "SELECT coalesce(sum(turns), 0), coalesce(sum(input_tokens + output_tokens), 0), "
        "coalesce(sum(cost_usd), 0) FROM usage_hourly WHERE user_id=? AND hour>=?",
        (user_id, int(since // 3600)),
    ).fetchone()
    assert row is not None  # an aggregate always answers one row
    return Totals(int(row[0]), int(row[1]), float(row[2]))


class UsageStore:
    """Queries of the usage tables in the registry (one database thread: see storage.md)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- caps -----------------------------------------------------------------------

    async def caps(self, scope: str, target: str) -> Caps | None:
        sql = f"SELECT {_CAP_COLS} FROM usage_caps WHERE scope=? AND target=?"
        return await self.db.call(lambda c: _caps(c.execute(sql, (scope, target)).fetchone()))

    async def all_caps(self) -> list[tuple[str, str, Caps]]:
        sql = f"SELECT scope, target, {_CAP_COLS} FROM usage_caps ORDER BY scope, target"
        rows = await self.db.fetch_all(sql)
        return [(r[0], r[1], _caps(r[2:])) for r in rows]  # type: ignore[misc]

    async def set_caps(self, scope: str, target: str, caps: Caps | None) -> None:
        """Save (or with None remove) the caps of a role or a member."""
        now = datetime.now(UTC).isoformat()
        if caps is None:
            sql = "DELETE FROM usage_caps WHERE scope=? AND target=?"
            await self.db.execute(sql, (scope, target))
            return
        values = msgspec.structs.astuple(caps)
        upsert = (
            f"INSERT INTO usage_caps(scope, target, {_CAP_COLS}, updated_at) "
            "VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (scope, target) DO UPDATE SET "
            + ", ".join(f"{n}=excluded.{n}" for n in _CAP_COLS.split(", "))
            + ", updated_at=excluded.updated_at"
        )
        await self.db.execute(upsert, (scope, target, *values, now))

    async def resolve(self, user_id: str, role: str) -> tuple[Caps | None, bool]:
        """The caps that apply and whether they are the member's own."""
        own = await self.caps("user", user_id)
        return (own, True) if own is not None else (await self.caps("role", role), False)

    async def totals(self, user_id: str, since: float) -> Totals:
        return await self.db.call(lambda c: _totals(c, user_id, since))

    async def check_and_count(
        self,
        user_id: str,
        role: str,
        starts: tuple[float, float],
        at: float,
        decide: Decide,
    ) -> tuple[str | None, list[str], bool]:
        """A turn's cap check in one write transaction (one trip): the caps that apply
        (the member's own, else their role's) and what they used since the day's and the
        month's start (`starts`) go to `decide`, which answers (the refusal or None, the
        80 % warnings due as (period key, measure, text)); unless refused, the warnings
        not given yet this period are recorded and the turn is counted. Answers (the
        refusal, the texts of the warnings to send now, whether any cap applies). One
        transaction on the registry's one thread: two turns at once cannot both pass the
        last turn a cap allows."""
        sql = f"SELECT {_CAP_COLS} FROM usage_caps WHERE scope=? AND target=?"
        warned = (
            "INSERT OR IGNORE INTO usage_warnings(user_id, period, measure, at) VALUES (?,?,?,?)"
        )
        now = datetime.now(UTC).isoformat()

        def q(c: apsw.Connection) -> tuple[str | None, list[str], bool]:
            caps = _caps(c.execute(sql, ("user", user_id)).fetchone())
            if caps is None:
                caps = _caps(c.execute(sql, ("role", role)).fetchone())
            if caps is None or caps.unlimited:
                _count(c, user_id, at)
                return None, [], False
            day, month = (_totals(c, user_id, start) for start in starts)
            refused, due = decide(caps, day, month)
            if refused is not None:
                return refused, [], True
            send: list[str] = []
            for period, measure, text in due:
                c.execute(warned, (user_id, period, measure, now))
                if c.changes():
                    send.append(text)
            _count(c, user_id, at)
            return None, send, True

        return await self.db.transaction(q)

    def count_turn(self, user_id: str, at: float) -> asyncio.Future[None]:
        """Count a turn that no cap had to judge (`CapGate`): queued on the registry's
        thread when this returns, done when the future is."""
        return self.db.send(lambda c: _count(c, user_id, at))

    # -- stats ----------------------------------------------------------------------

    async def bucketed(
        self,
        starts: list[int],
        until: float,
        user_id: str | None,
        first: int = 0,
        stop: int | None = None,
    ) -> list[tuple[str, str, int, int, int, int, float]]:
        """(user, model, bucket, turns, requests, tokens, cost): the hours from
        `starts[i]` to the next start summed into bucket i, for one member or everyone;
        only buckets `first` to `stop` (`StatsCache` reads the closed ones and the open
        one apart).
        One range read of the hour index per bucket (CROSS JOIN keeps the JSON list of
        bounds the outer loop: left to itself the planner walked the whole primary key
        for the GROUP BY, 40x slower), so the rows that reach Python are buckets x
        members x models, never hours."""
        hours = [s // 3600 for s in starts] + [int(until // 3600) + 1]
        bounds = json.dumps(
            [
                [i, hours[i], hours[i + 1]]
                for i in range(first, len(starts) if stop is None else stop)
            ]
        )
        mine = "" if user_id is None else " AND u.user_id = ?"
        sql = (
            "WITH b(i, lo, hi) AS "
            "(SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?)) "
            "SELECT u.user_id, u.model_id, b.i, sum(u.turns), sum(u.requests), "
            "sum(u.input_tokens + u.output_tokens), sum(u.cost_usd) "
            f"FROM b CROSS JOIN usage_hourly u ON u.hour >= b.lo AND u.hour < b.hi{mine} "
            "GROUP BY u.user_id, u.model_id, b.i"
        )
        params = (bounds,) if user_id is None else (bounds, user_id)
        rows = await self.db.fetch_all(sql, params)
        return [
            (str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]))
            for r in rows
        ]
