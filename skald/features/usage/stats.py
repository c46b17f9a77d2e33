"""The usage charts' numbers: the hourly aggregate summed into the range's buckets.

Rule: counts never content. Every figure comes from `usage_hourly` (turns, requests,
tokens, cost per member, hour and model); a series is named by a member's display name
or a model's name, nothing else. A member asks for their own; `household` (everyone
together, one series per member) is for administrators, checked by the route.

Trap: day buckets are the member's local days (the zone's midnights), hour buckets UTC
hours; each bucket runs from its start to the next (the SQL sums them), so a DST day of
23 or 25 hours is still one bucket.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Final, Literal
from zoneinfo import ZoneInfo

import msgspec

Range = Literal["day", "week", "month"]
_DAYS = {"week": 7, "month": 30}


class Series(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # a user id or a model id
    name: str
    turns: list[int]
    requests: list[int]
    tokens: list[int]
    cost: list[float]


class Stats(msgspec.Struct, frozen=True, kw_only=True):
    range: Range
    step: Literal["hour", "day"]
    starts: list[int]  # each bucket's start, epoch seconds
    members: list[Series]
    models: list[Series]
    turns: int
    requests: int
    tokens: int
    cost: float


def bucket_starts(rng: Range, now: datetime) -> list[int]:
    """The buckets' starts: the last 24 UTC hours, or the last 7 / 30 local days."""
    if rng == "day":
        top = int(now.timestamp() // 3600) * 3600
        return [top - 3600 * i for i in range(23, -1, -1)]
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days = [today - timedelta(days=i) for i in range(_DAYS[rng] - 1, -1, -1)]
    # Each local midnight made again in the zone (a DST change between them).
    return [int(d.replace(tzinfo=now.tzinfo).timestamp()) for d in days]


Row = tuple[str, int, int, int, int, float]  # key, bucket, turns, requests, tokens, cost


def series(rows: list[Row], n: int, names: dict[str, str]) -> list[Series]:
    """One series per key over `n` buckets; keys ordered by their tokens."""
    acc: dict[str, list[list[float]]] = {}
    for key, i, turns, requests, tokens, cost in rows:
        cols = acc.setdefault(key, [[0] * n, [0] * n, [0] * n, [0.0] * n])
        cols[0][i] += turns
        cols[1][i] += requests
        cols[2][i] += tokens
        cols[3][i] += cost
    out = [
        Series(
            key=key,
            name=names.get(key, key or "?"),
            turns=[int(x) for x in c[0]],
            requests=[int(x) for x in c[1]],
            tokens=[int(x) for x in c[2]],
            cost=[round(x, 6) for x in c[3]],
        )
        for key, c in acc.items()
    ]
    return sorted(out, key=lambda s: (-sum(s.tokens), -sum(s.turns), s.name))


Cell = tuple[str, str, int, int, int, int, float]  # user, model, bucket, figures...


def build(
    rng: Range,
    cells: list[Cell],
    member_names: dict[str, str],
    model_names: dict[str, str],
    starts: list[int],
) -> Stats:
    by_member: list[Row] = [(u, i, t, r, k, c) for u, _, i, t, r, k, c in cells]
    # Turns are counted under model '' (before a model is chosen): not a model.
    by_model: list[Row] = [(m, i, t, r, k, c) for _, m, i, t, r, k, c in cells if m]
    members = series(by_member, len(starts), member_names)
    models = series(by_model, len(starts), model_names)
    step: Literal["hour", "day"] = "hour" if rng == "day" else "day"
    return Stats(
        range=rng,
        step=step,
        starts=starts,
        members=members,
        models=models,
        turns=sum(sum(s.turns) for s in members),
        requests=sum(sum(s.requests) for s in members),
        tokens=sum(sum(s.tokens) for s in members),
        cost=round(sum(sum(s.cost) for s in members), 6),
    )


def window(rng: Range, zone: ZoneInfo) -> tuple[list[int], float, float]:
    now = datetime.now(zone)
    starts = bucket_starts(rng, now)
    return starts, float(starts[0]), now.timestamp()


Cells = list[Cell]
CLOSED_TTL_S: Final = 300.0
MAX_KEPT: Final = 64


class StatsCache:
    """The closed buckets of a range, kept (server state): only the open bucket (this
    hour, or today) is read again at each view.

    A request row lands in the hour it is recorded (`at` = its end), so a closed
    bucket's sums do not change; the key is the buckets' starts (a new hour or day is a
    new key) and who. Kept at most `CLOSED_TTL_S`: what else can touch a closed hour (a
    member deleted, the clock set back, a backfill) shows within five minutes. Before:
    the admins' "everyone" month re-summed about 17,000 hourly rows at every view
    (p95 72 ms under load, bench/README.md); after, one day's rows.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._kept: dict[tuple[tuple[int, ...], str | None], tuple[float, Cells]] = {}

    async def cells(
        self,
        read: Callable[[list[int], float, str | None, int, int | None], Awaitable[Cells]],
        starts: list[int],
        until: float,
        who: str | None,
    ) -> Cells:
        """`read` is `UsageStore.bucketed` (buckets `first` to `stop`)."""
        last = len(starts) - 1
        key = (tuple(starts), who)
        now = self.clock()
        found = self._kept.get(key)
        if found is None or now - found[0] > CLOSED_TTL_S:
            closed = await read(starts, until, who, 0, last)
            if len(self._kept) >= MAX_KEPT:
                self._kept.clear()
            self._kept[key] = found = (now, closed)
        return found[1] + await read(starts, until, who, last, None)
