"""Usage routes: the charts' numbers, a member's own limits, administrators' caps.

Rule: counts never content (see stats.py). A member reads their own figures; everyone's
(`everyone=true`) and the caps table need `admin.users`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec
from litestar import delete, get, put
from litestar.di import NamedDependency
from litestar.exceptions import PermissionDeniedException
from litestar.params import FromPath, FromQuery, JSONBody

from skald.api.deps import group, requires
from skald.api.openapi import errors
from skald.core.users import ADMIN_USERS
from skald.errors import NotFoundError
from skald.features.usage.caps import windows
from skald.features.usage.stats import Range, Stats, StatsCache, build, window
from skald.features.usage.store import Caps, UsageStore
from skald.permissions import can
from skald.plugins.facade import Member, Server  # Litestar reads the routes' annotations

Scope = Literal["role", "user"]
# The guard of the group in ROUTES.
ADMIN = [requires(ADMIN_USERS)]


class CapRow(msgspec.Struct, frozen=True, kw_only=True):
    scope: Scope
    target: str
    caps: Caps


class Used(msgspec.Struct, frozen=True, kw_only=True):
    turns: int
    tokens: int
    cost: float
    resets_at: str  # ISO, the member's zone


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    caps: Caps | None  # None: no limits
    own: bool  # the member's own caps (else their role's)
    day: Used
    month: Used


async def _names(server: Server, sql: str) -> dict[str, str]:
    rows = await server.db.fetch_all(sql)
    return {str(r[0]): str(r[1]) for r in rows}


@get("/api/usage/stats", responses=errors(400, 403))
async def usage_stats(
    member: NamedDependency[Member],
    period: FromQuery[Range] = "week",
    everyone: FromQuery[bool] = False,
) -> Stats:
    """Turns, requests, tokens and cost per bucket, per member and per model."""
    server = member.server
    household = everyone
    if household and not can(member.role, ADMIN_USERS):
        raise PermissionDeniedException("only administrators see everyone's usage")
    starts, _, until = window(period, member.timezone())
    store = UsageStore(server.db)
    who = None if household else member.id
    cache = server.state(StatsCache, None)
    if cache is None:
        cells = await store.bucketed(starts, until, who)
    else:
        cells = await cache.cells(store.bucketed, starts, until, who)
    people = await _names(server, "SELECT id, display_name FROM users")
    models = {m.id: m.name for m in await server.llm.models()}
    return build(period, cells, people, models, starts)


@get("/api/usage/limits")
async def my_limits(member: NamedDependency[Member]) -> Limits:
    """The caller's caps and what they used today and this month."""
    user, role = await member.fetch()
    day, month = windows(datetime.now(member.timezone()))
    store = UsageStore(member.server.db)
    caps, own = await store.resolve(user.id, role.name)
    used_day = await store.totals(user.id, day.start)
    used_month = await store.totals(user.id, month.start)
    return Limits(
        caps=caps,
        own=own,
        day=Used(**msgspec.structs.asdict(used_day), resets_at=day.reset.isoformat()),
        month=Used(**msgspec.structs.asdict(used_month), resets_at=month.reset.isoformat()),
    )


@get("/api/usage/caps")
async def list_caps(server: NamedDependency[Server]) -> list[CapRow]:
    rows = await UsageStore(server.db).all_caps()
    return [CapRow(scope=s, target=t, caps=c) for s, t, c in rows]  # type: ignore[arg-type]


async def _check_target(server: Server, scope: Scope, target: str) -> None:
    if scope == "user":
        await server.fetch(target)  # NotFoundError: no such user
        return
    sql = "SELECT 1 FROM roles WHERE name=?"
    found = await server.db.fetch_one(sql, (target,))
    if found is None:
        raise NotFoundError("no such role")


@put("/api/usage/caps/{kind:str}/{target:str}", responses=errors(400, 404))
async def save_caps(
    kind: FromPath[Scope],
    target: FromPath[str],
    data: JSONBody[Caps],
    server: NamedDependency[Server],
) -> CapRow:
    """Set a role's or a member's caps (a member's replace their role's); 0 = unlimited.
    The next turn reads them: raising a cap unblocks at once."""
    await _check_target(server, kind, target)
    await UsageStore(server.db).set_caps(kind, target, data)
    return CapRow(scope=kind, target=target, caps=data)


@delete("/api/usage/caps/{kind:str}/{target:str}", status_code=204, responses=errors(404))
async def remove_caps(
    kind: FromPath[Scope], target: FromPath[str], server: NamedDependency[Server]
) -> None:
    await _check_target(server, kind, target)
    await UsageStore(server.db).set_caps(kind, target, None)


ROUTES = [usage_stats, my_limits, group(list_caps, save_caps, remove_caps, guards=ADMIN)]
