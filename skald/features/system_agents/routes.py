"""The System agents and Reports pages' API.

Rule: a member's runs are read from their own database only (no admin override: an
admin sees their own runs too); admins also get run health across members, counts and
times only, never content, and alone change the settings. Reports are listed and opened
through `Reader.may_read`, decided at each request: a report the caller may not read is
"not found", the same answer as one that does not exist.
"""

from __future__ import annotations

import secrets
from typing import Annotated

import msgspec
from litestar import get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import group, requires
from skald.api.openapi import errors
from skald.core.services import ServiceSpec
from skald.core.users import ADMIN_USERS
from skald.errors import InvalidInputError, NotFoundError
from skald.features.system_agents.household import people, reader
from skald.features.system_agents.reports import Report, ReportSummary
from skald.features.system_agents.runner import SystemAgents
from skald.features.system_agents.store import Run, RunLog
from skald.features.system_agents.suggestions import Accepted, accept
from skald.plugins.facade import Member, Server

# The guard of the group in ROUTES.
ADMIN = [requires(ADMIN_USERS)]
MIN_INTERVAL_S = 60
MAX_INTERVAL_S = 90 * 24 * 3600


class AgentOut(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    enabled: bool
    interval_s: int
    my_interval_s: int | None  # an override for the caller, if any
    overrides: dict[str, int] | None  # admins only: user id -> interval


class HealthOut(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: str
    user_id: str
    username: str
    runs: int
    failures: int
    last_status: str
    last_run_at: str


class SettingIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool
    interval_s: int


class OverrideIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    interval_s: int | None


class Count(msgspec.Struct, frozen=True, kw_only=True):
    count: int


def _check_interval(seconds: int) -> int:
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise InvalidInputError(
            f"the interval is between {MIN_INTERVAL_S} seconds and {MAX_INTERVAL_S // 86400} days"
        )
    return seconds


def _runner(server: Server) -> SystemAgents:
    return server.state(SystemAgents)


@get("/api/system-agents")
async def list_agents(
    server: NamedDependency[Server], member: NamedDependency[Member]
) -> list[AgentOut]:
    runner = _runner(server)
    admin = member.can(ADMIN_USERS)
    out = []
    for agent in runner.agents:
        s = await runner.settings.get(agent.id, agent.interval_s)
        out.append(
            AgentOut(
                id=agent.id,
                enabled=s.enabled,
                interval_s=s.interval_s,
                my_interval_s=s.overrides.get(member.id),
                overrides=s.overrides if admin else None,
            )
        )
    return out


@get("/api/system-agents/runs")
async def my_runs(member: NamedDependency[Member]) -> list[Run]:
    return await RunLog(member.db).runs()


@get("/api/system-agents/health")
async def health(server: NamedDependency[Server]) -> list[HealthOut]:
    names = {p.id: p.username for p in await people(server.db)}
    return [
        HealthOut(**msgspec.structs.asdict(h), username=names.get(h.user_id, "?"))
        for h in await _runner(server).settings.health()
    ]


def _agent(server: Server, agent_id: str) -> str:
    if _runner(server).agent(agent_id) is None:
        raise NotFoundError("no such system agent")
    return agent_id


@put("/api/system-agents/{agent_id:str}", status_code=204, responses=errors(400, 404))
async def put_setting(
    agent_id: FromPath[str], data: JSONBody[SettingIn], server: NamedDependency[Server]
) -> None:
    await _runner(server).settings.put(
        _agent(server, agent_id), data.enabled, _check_interval(data.interval_s)
    )


@put(
    "/api/system-agents/{agent_id:str}/members/{user_id:str}",
    status_code=204,
    responses=errors(400, 404),
)
async def put_override(
    agent_id: FromPath[str],
    user_id: FromPath[str],
    data: JSONBody[OverrideIn],
    server: NamedDependency[Server],
) -> None:
    await server.fetch(user_id)  # NotFound for an unknown member
    seconds = None if data.interval_s is None else _check_interval(data.interval_s)
    await _runner(server).settings.override(_agent(server, agent_id), user_id, seconds)


@post("/api/system-agents/{agent_id:str}/run", status_code=202, responses=errors(404))
async def run_now(agent_id: FromPath[str], server: NamedDependency[Server]) -> None:
    runner = _runner(server)
    name = _agent(server, agent_id)

    async def once() -> None:
        await runner.pass_once(only=name, force=True)

    server.services.add(
        ServiceSpec(f"system-agent-{name}-{secrets.token_hex(4)}", once, restart=False)
    )


@get("/api/reports")
async def list_reports(
    server: NamedDependency[Server], member: NamedDependency[Member]
) -> list[ReportSummary]:
    return await _runner(server).reports.readable(await reader(server.db, member.id))


@get("/api/reports/unread")
async def unread(server: NamedDependency[Server], member: NamedDependency[Member]) -> Count:
    return Count(count=await _runner(server).reports.unread(await reader(server.db, member.id)))


@get("/api/reports/{report_id:str}", responses=errors(404))
async def open_report(
    report_id: FromPath[Annotated[str, msgspec.Meta(max_length=64)]],
    server: NamedDependency[Server],
    member: NamedDependency[Member],
) -> Report:
    return await _runner(server).reports.open(await reader(server.db, member.id), report_id)


@post(
    "/api/reports/{report_id:str}/suggestions/{n:str}/accept",
    status_code=201,
    responses=errors(400, 404, 409),
)
async def accept_suggestion(
    report_id: FromPath[Annotated[str, msgspec.Meta(max_length=64)]],
    n: FromPath[Annotated[str, msgspec.Meta(max_length=8)]],
    server: NamedDependency[Server],
    member: NamedDependency[Member],
) -> Accepted:
    """Accept one suggestion of a report the caller may read: an approval request for
    the change waits in their Inbox (the change is never made here)."""
    # Parsed by hand: a number out of any range is "no such suggestion", never a 500.
    if not n.isdigit() or not 1 <= int(n) <= 10_000:
        raise NotFoundError("the report has no such suggestion")
    runner = _runner(server)
    who = await reader(server.db, member.id)
    return await accept(member, runner.reports, who, report_id, int(n))


ROUTES = [
    list_agents,
    my_runs,
    group(health, put_setting, put_override, run_now, guards=ADMIN),
    list_reports,
    unread,
    open_report,
    accept_suggestion,
]
